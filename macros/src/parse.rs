//! Parsing of the attribute arguments into a small typed AST.
//!
//! Parsing only checks syntax and keeps every token's span; what the arguments mean and whether
//! they fit the function is `validate.rs`'s job, so that all errors of one kind live in one place.
//!
//! Each comma-separated argument, and each entry of `fields(..)` and `skip(..)`, is parsed on its
//! own: a syntax error in one is recorded and parsing resumes at the next comma, so every mistake
//! in the attribute is reported in one run instead of only the first.

use proc_macro2::{Span, TokenTree};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitBool, LitInt, LitStr, Path, Token};

/// Every argument name the attributes know, for "unknown argument" messages and suggestions.
pub const KNOWN: &[&str] = &[
    "name",
    "backend",
    "encoder",
    "queue",
    "device",
    "stream",
    "direction",
    "bytes",
    "threshold_us",
    "trace_all",
    "fields",
    "skip",
    "skip_all",
    "untimed",
    "err",
    "ret",
    "target",
    "parent",
    "follows_from",
    "level",
    "track_memory",
    "crate",
];

/// One `key = value`, `key(...)` or bare `key` argument, with the span of its key.
pub struct Arg {
    pub key: Ident,
    pub value: ArgValue,
}

pub enum ArgValue {
    /// `name = "..."`, `name = CONST`, or a bare string literal first (as `tracing` accepts).
    Name(StrOrConst),
    /// `target = "..."` or `target = CONST`.
    Target(StrOrConst),
    /// `parent = <expr>`: the span's explicit parent, as in `tracing::span!(parent: ..)`.
    Parent(Expr),
    /// `follows_from = <expr>`: an iterator of causes, each passed to `Span::follows_from`.
    FollowsFrom(Expr),
    /// `wgpu`, `cuda` or `auto`; checked in validation so the error points at the value.
    Backend(Ident),
    Encoder(Expr),
    Queue(Expr),
    Device(Expr),
    Stream(Expr),
    /// `cpu_to_gpu`, `gpu_to_cpu` or `gpu_to_gpu`; checked in validation.
    Direction(Ident),
    Bytes(Expr),
    ThresholdUs(LitInt),
    /// Bare `trace_all` or `trace_all = true|false`.
    TraceAll(Option<LitBool>),
    /// Bare `track_memory` or `track_memory = true|false`.
    TrackMemory(Option<LitBool>),
    Fields(Punctuated<Field, Token![,]>),
    /// Parameter names, `self` included.
    Skip(Punctuated<Ident, Token![,]>),
    /// Bare `skip_all`: no parameter is recorded (timing is unaffected, as with `skip`).
    SkipAll,
    /// Parameters that neither time the call (a queue, an encoder, a stream) nor size it (a
    /// slice): `skip` only says what is recorded, as in `tracing`.
    Untimed(Punctuated<Ident, Token![,]>),
    /// `err`, `err(Debug)`, `err(Display, level = ..)`: an `Err` leaving the function is emitted
    /// as an event, as `tracing` does (gpuspan marks every `Err` on the span anyway).
    Err(EventArgs),
    /// `ret`, `ret(Debug)`, `ret(Display, level = ..)`: the returned value as an event.
    Ret(EventArgs),
    /// A level as `tracing` users write it; checked in validation.
    Level(LevelValue),
    Crate(Path),
    /// The key was given but its value did not parse (the error is in [`Args::errors`]).
    /// Kept so that validation treats the argument as present and adds no follow-on error
    /// such as "needs `direction`".
    Invalid,
}

/// A name or target: a string literal or a constant's name, as `tracing` accepts.
#[derive(Clone)]
pub enum StrOrConst {
    Str(LitStr),
    Const(Ident),
}

/// The parenthesised arguments of `err(..)` and `ret(..)`.
#[derive(Default)]
pub struct EventArgs {
    /// `Debug` or `Display`, when given (checked at parse time).
    pub mode: Option<Ident>,
    pub level: Option<LevelValue>,
}

/// A level: `"info"` (any case), `info`, `Level::INFO`, `tracing::Level::INFO`, or `1`..=`5` as
/// `#[tracing::instrument]` accepts. The macro maps it to its own `Level` path: it must know the
/// level at compile time to build the span's callsite.
pub enum LevelValue {
    Str(LitStr),
    Int(LitInt),
    Path(Path),
}

/// One entry of `fields(...)`: `key`, `key = expr`, `key = %expr`, `key = ?expr`, `%key`, `?key`,
/// with `key` dotted (`model.layer`) or a constant in braces (`{NAME}`), as in `tracing`.
pub struct Field {
    pub key: FieldKey,
    pub sigil: Sigil,
    pub value: Option<Expr>,
}

pub enum FieldKey {
    Dotted(Punctuated<Ident, Token![.]>),
    /// `{CONST} = ..`: the name is a constant expression.
    Const(Expr),
}

/// How a field's value is recorded: as a `tracing::Value`, with `Display` (`%`) or `Debug` (`?`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Sigil {
    Value,
    Display,
    Debug,
}

/// The whole argument list, and the syntax errors of the arguments that did not parse.
pub struct Args {
    pub args: Vec<Arg>,
    pub errors: Option<syn::Error>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Vec::new();
        let mut errors: Option<syn::Error> = None;
        let mut push = |e: syn::Error| match &mut errors {
            Some(all) => all.combine(e),
            None => errors = Some(e),
        };
        while !input.is_empty() {
            if input.peek(LitStr) {
                // `#[instrument("name")]`: `tracing` accepts the name as a bare string.
                let lit: LitStr = input.parse()?;
                args.push(Arg { key: Ident::new("name", lit.span()), value: ArgValue::Name(StrOrConst::Str(lit)) });
            } else {
                match parse_key(input) {
                    Ok(key) => match parse_value(&key, input, &mut push) {
                        Ok(value) => args.push(Arg { key, value }),
                        Err(e) => {
                            push(e);
                            if KNOWN.contains(&key.to_string().as_str()) {
                                args.push(Arg { key, value: ArgValue::Invalid });
                            }
                            skip_to_comma(input)?;
                        }
                    },
                    Err(e) => {
                        push(e);
                        skip_to_comma(input)?;
                    }
                }
            }
            if input.is_empty() {
                break;
            }
            if input.peek(Token![,]) {
                input.parse::<Token![,]>()?;
            } else {
                // A value parsed but something follows it: say so at the first stray token, and
                // drop the rest of the argument (one mistake, one error).
                push(syn::Error::new(next_span(input), "expected `,` between arguments"));
                skip_to_comma(input)?;
            }
        }
        Ok(Args { args, errors })
    }
}

fn parse_key(input: ParseStream<'_>) -> syn::Result<Ident> {
    // `crate` is a keyword, so it needs its own branch.
    if input.peek(Token![crate]) {
        let kw: Token![crate] = input.parse()?;
        return Ok(Ident::new("crate", kw.span));
    }
    input.call(syn::ext::IdentExt::parse_any).map_err(|_| {
        let at = next_span(input);
        syn::Error::new(at, "expected an argument name, e.g. `name = \"...\"`")
    })
}

/// The value after `key`; an unknown key is an error at the key. Mistakes inside a list
/// (`fields(..)`, `skip(..)`) go to `push`, each at its token, and the list keeps its good items.
fn parse_value(key: &Ident, input: ParseStream<'_>, push: &mut dyn FnMut(syn::Error)) -> syn::Result<ArgValue> {
    let name = key.to_string();
    let value = match name.as_str() {
        "name" => ArgValue::Name(parse_eq_with(input, key, "a string or a constant, e.g. `name = \"saxpy\"`")?),
        "target" => ArgValue::Target(parse_eq_with(input, key, "a string or a constant, e.g. `target = \"my_app\"`")?),
        "parent" => ArgValue::Parent(parse_eq(input, key)?),
        "follows_from" => ArgValue::FollowsFrom(parse_eq(input, key)?),
        "backend" => ArgValue::Backend(parse_eq_with(input, key, "`wgpu`, `cuda` or `auto`")?),
        "encoder" => ArgValue::Encoder(parse_eq(input, key)?),
        "queue" => ArgValue::Queue(parse_eq(input, key)?),
        "device" => ArgValue::Device(parse_eq(input, key)?),
        "stream" => ArgValue::Stream(parse_eq(input, key)?),
        "direction" => ArgValue::Direction(parse_eq_with(input, key, "`cpu_to_gpu`, `gpu_to_cpu` or `gpu_to_gpu`")?),
        "bytes" => ArgValue::Bytes(parse_eq(input, key)?),
        "threshold_us" => ArgValue::ThresholdUs(parse_eq_with(
            input,
            key,
            "an integer number of microseconds, e.g. `threshold_us = 250`",
        )?),
        "trace_all" => ArgValue::TraceAll(parse_flag(input, key)?),
        "track_memory" => ArgValue::TrackMemory(parse_flag(input, key)?),
        "fields" => ArgValue::Fields(parse_list(input, key, Field::parse, push)?),
        "skip" => ArgValue::Skip(parse_list(input, key, parse_skip_item, push)?),
        "skip_all" => {
            no_value(input, "`skip_all` takes no value: it skips every parameter")?;
            ArgValue::SkipAll
        }
        "untimed" => ArgValue::Untimed(parse_list(input, key, parse_skip_item, push)?),
        "err" => ArgValue::Err(parse_event_args(input)?),
        "ret" => ArgValue::Ret(parse_event_args(input)?),
        "level" => {
            parse_eq_sign(input, key)?;
            ArgValue::Level(parse_level(input)?)
        }
        "crate" => ArgValue::Crate(parse_eq(input, key)?),
        _ => {
            let mut msg = format!("unknown argument `{name}`");
            if let Some(close) = closest(&name) {
                msg.push_str(&format!("; did you mean `{close}`?"));
            } else {
                msg.push_str(&format!("; expected one of: {}", KNOWN.join(", ")));
            }
            return Err(syn::Error::new(key.span(), msg));
        }
    };
    Ok(value)
}

impl Parse for StrOrConst {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(LitStr) {
            Ok(StrOrConst::Str(input.parse()?))
        } else {
            Ok(StrOrConst::Const(input.parse()?))
        }
    }
}

/// A `skip(..)` or `untimed(..)` entry: a parameter's name, `self` included.
fn parse_skip_item(input: ParseStream<'_>) -> syn::Result<Ident> {
    input
        .call(syn::ext::IdentExt::parse_any)
        .map_err(|_| syn::Error::new(next_span(input), "expected a parameter name"))
}

/// `err`/`ret` alone, or with `(Debug|Display)`, `(level = ..)` or both, as `tracing` takes them.
fn parse_event_args(input: ParseStream<'_>) -> syn::Result<EventArgs> {
    let mut args = EventArgs::default();
    if !input.peek(syn::token::Paren) {
        no_value(input, "expected `(Debug)`, `(Display)` or `(level = ..)`, or nothing")?;
        return Ok(args);
    }
    let content;
    syn::parenthesized!(content in input);
    while !content.is_empty() {
        let id: Ident = content.call(syn::ext::IdentExt::parse_any)?;
        match id.to_string().as_str() {
            "level" if args.level.is_none() => {
                parse_eq_sign(&content, &id)?;
                args.level = Some(parse_level(&content)?);
            }
            "Debug" | "Display" if args.mode.is_none() => args.mode = Some(id),
            "level" | "Debug" | "Display" => {
                return Err(syn::Error::new(id.span(), format!("`{id}`: only one format and one level")))
            }
            _ => {
                return Err(syn::Error::new(
                    id.span(),
                    "unknown event formatting mode, expected either `Debug` or `Display`",
                ))
            }
        }
        if !content.is_empty() {
            content.parse::<Token![,]>()?;
        }
    }
    Ok(args)
}

impl Parse for Field {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut sigil = parse_sigil(input)?;
        let key = if input.peek(syn::token::Brace) {
            let content;
            syn::braced!(content in input);
            FieldKey::Const(content.parse()?)
        } else {
            FieldKey::Dotted(Punctuated::parse_separated_nonempty_with(input, syn::ext::IdentExt::parse_any)?)
        };
        let value = if input.peek(Token![=]) {
            let eq: Token![=] = input.parse()?;
            if sigil == Sigil::Value {
                sigil = parse_sigil(input)?;
            }
            if input.is_empty() || input.peek(Token![,]) {
                return Err(syn::Error::new(eq.span, "expected an expression after `=`"));
            }
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Field { key, sigil, value })
    }
}

fn parse_sigil(input: ParseStream<'_>) -> syn::Result<Sigil> {
    if input.peek(Token![%]) {
        input.parse::<Token![%]>()?;
        Ok(Sigil::Display)
    } else if input.peek(Token![?]) {
        input.parse::<Token![?]>()?;
        Ok(Sigil::Debug)
    } else {
        Ok(Sigil::Value)
    }
}

/// `level = ...` in any of the spellings `tracing` users type.
fn parse_level(input: ParseStream<'_>) -> syn::Result<LevelValue> {
    if input.peek(LitStr) {
        Ok(LevelValue::Str(input.parse()?))
    } else if input.peek(LitInt) {
        Ok(LevelValue::Int(input.parse()?))
    } else if input.peek(Ident) || input.peek(Token![::]) {
        Ok(LevelValue::Path(input.call(Path::parse_mod_style)?))
    } else {
        let at = next_span(input);
        Err(syn::Error::new(
            at,
            "expected a level: `\"info\"`, `info` or `Level::INFO` (trace, debug, info, warn, error)",
        ))
    }
}

/// `=`, or an error at the key saying the argument needs a value.
fn parse_eq_sign(input: ParseStream<'_>, key: &Ident) -> syn::Result<()> {
    if !input.peek(Token![=]) {
        let at = if input.is_empty() || input.peek(Token![,]) { key.span() } else { next_span(input) };
        return Err(syn::Error::new(at, format!("expected `=` after `{key}`: `{key} = ...`")));
    }
    let eq: Token![=] = input.parse()?;
    if input.is_empty() || input.peek(Token![,]) {
        return Err(syn::Error::new(eq.span, format!("`{key} =` needs a value")));
    }
    Ok(())
}

fn parse_eq<T: Parse>(input: ParseStream<'_>, key: &Ident) -> syn::Result<T> {
    parse_eq_sign(input, key)?;
    input.parse()
}

/// `= value` where a wrong kind of value gets a message that says what was expected.
fn parse_eq_with<T: Parse>(input: ParseStream<'_>, key: &Ident, expected: &str) -> syn::Result<T> {
    parse_eq_sign(input, key)?;
    let fork = input.fork();
    match input.parse::<T>() {
        Ok(v) => Ok(v),
        Err(_) => {
            let span = fork.cursor().token_tree().map_or(input.span(), |(tt, _)| tt.span());
            Err(syn::Error::new(span, format!("expected {expected}")))
        }
    }
}

/// Bare `key`, or `key = true|false`.
fn parse_flag(input: ParseStream<'_>, key: &Ident) -> syn::Result<Option<LitBool>> {
    if input.peek(Token![=]) {
        Ok(Some(parse_eq_with(input, key, "`true` or `false`")?))
    } else {
        no_value(input, &format!("`{key}` is a flag: write `{key}` or `{key} = true|false`"))?;
        Ok(None)
    }
}

/// For bare keys: anything before the next comma is an error, at that token.
fn no_value(input: ParseStream<'_>, msg: &str) -> syn::Result<()> {
    if input.is_empty() || input.peek(Token![,]) {
        return Ok(());
    }
    Err(syn::Error::new(next_span(input), msg))
}

/// `key(a, b, ..)`: each item parsed on its own, so that one bad item is reported at its token
/// and the others (and the other arguments) are still checked.
fn parse_list<T>(
    input: ParseStream<'_>,
    key: &Ident,
    item: fn(ParseStream<'_>) -> syn::Result<T>,
    push: &mut dyn FnMut(syn::Error),
) -> syn::Result<Punctuated<T, Token![,]>> {
    if !input.peek(syn::token::Paren) {
        return Err(syn::Error::new(key.span(), format!("`{key}` takes a list: `{key}(...)`")));
    }
    let content;
    syn::parenthesized!(content in input);
    let mut list = Punctuated::new();
    while !content.is_empty() {
        match item(&content) {
            Ok(v) => list.push(v),
            Err(e) => {
                push(e);
                skip_to_comma(&content)?;
            }
        }
        if content.is_empty() {
            break;
        }
        if content.peek(Token![,]) {
            content.parse::<Token![,]>()?;
        } else {
            push(syn::Error::new(next_span(&content), format!("expected `,` between the entries of `{key}(..)`")));
            skip_to_comma(&content)?;
            if content.peek(Token![,]) {
                content.parse::<Token![,]>()?;
            }
        }
    }
    Ok(list)
}

/// The span of the next token (not consumed), for errors about what comes next; a whole token
/// tree, so `(Display)` is underlined as one.
fn next_span(input: ParseStream<'_>) -> Span {
    input.cursor().token_tree().map_or_else(|| input.span(), |(tt, _)| tt.span())
}

/// Recovery after an error: drop the rest of the argument, up to the next top-level comma.
/// Commas inside brackets are inside one token tree, so they are skipped with it.
fn skip_to_comma(input: ParseStream<'_>) -> syn::Result<()> {
    input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tt, next)) = rest.token_tree() {
            if matches!(&tt, TokenTree::Punct(p) if p.as_char() == ',') {
                return Ok(((), rest));
            }
            rest = next;
        }
        Ok(((), rest))
    })
}

/// The known argument closest to a misspelt one, if any is close enough to be a typo.
fn closest(name: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
