//! Parsing of the attribute arguments into a small typed AST.
//!
//! Parsing only checks syntax and keeps every token's span; what the arguments mean and whether
//! they fit the function is `validate.rs`'s job, so that all errors of one kind live in one place.
//!
//! Each comma-separated argument is parsed on its own: a syntax error in one is recorded and
//! parsing resumes at the next top-level comma, so every mistake in the attribute is reported in
//! one run instead of only the first.

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
    "err",
    "level",
    "track_memory",
    "crate",
];

/// `#[tracing::instrument]` arguments that gpuspan recognises but cannot honour, with what to do
/// instead: a user moving from `tracing` gets a reason, not "unknown argument".
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "ret",
        "`ret` is not supported: gpuspan does not record return values; log the value in the function body, \
         or add `#[tracing::instrument(ret)]` beside this attribute",
    ),
    (
        "target",
        "`target` is not supported: gpuspan spans' targets are `gpuspan::<kind>::<backend>`, so one \
         filter directive (`gpuspan=info`) selects them all; use `name = \"...\"` to tell sites apart",
    ),
    (
        "parent",
        "`parent` is not supported: a gpuspan span is a child of the current span; enter the parent span \
         around the call instead",
    ),
    (
        "follows_from",
        "`follows_from` is not supported: gpuspan spans only have a parent; use `fields(...)` to record \
         an id that links the calls",
    ),
];

/// One `key = value`, `key(...)` or bare `key` argument, with the span of its key.
pub struct Arg {
    pub key: Ident,
    pub value: ArgValue,
}

pub enum ArgValue {
    Name(LitStr),
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
    Skip(Punctuated<Ident, Token![,]>),
    /// Bare `skip_all`: no parameter is used for resource or size inference.
    SkipAll,
    /// Bare `err`, as `tracing` users write it: gpuspan marks every `Err` already, so it only
    /// states the default.
    Err,
    /// A level as `tracing` users write it; checked in validation.
    Level(LevelValue),
    Crate(Path),
    /// The key was given but its value did not parse (the error is in [`Args::errors`]).
    /// Kept so that validation treats the argument as present and adds no follow-on error
    /// such as "needs `direction`".
    Invalid,
}

/// A level: `"info"` (any case), `info`, `Level::INFO`, `tracing::Level::INFO`, or `1`..=`5` as
/// `#[tracing::instrument]` accepts. The macro maps it to its own `Level` path: it must know the
/// level at compile time to build the span's callsite.
pub enum LevelValue {
    Str(LitStr),
    Int(LitInt),
    Path(Path),
}

/// One entry of `fields(...)`: a bare parameter name, or `key = expr`.
pub struct Field {
    /// Dotted keys such as `model.layer` are allowed, as in `tracing`.
    pub key: Punctuated<Ident, Token![.]>,
    pub value: Option<Expr>,
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
            match parse_key(input) {
                Ok(key) => match parse_value(&key, input) {
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

/// The value after `key`; an unknown or unsupported key is an error at the key.
fn parse_value(key: &Ident, input: ParseStream<'_>) -> syn::Result<ArgValue> {
    let name = key.to_string();
    let value = match name.as_str() {
        "name" => ArgValue::Name(parse_eq_with(input, key, "a string, e.g. `name = \"saxpy\"`")?),
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
        "fields" => ArgValue::Fields(parse_list(input, key, Field::parse)?),
        "skip" => ArgValue::Skip(parse_list(input, key, Ident::parse)?),
        "skip_all" => {
            no_value(input, "`skip_all` takes no value: it skips every parameter")?;
            ArgValue::SkipAll
        }
        "err" => {
            no_value(
                input,
                "`err(...)` is not supported: gpuspan marks a call that returns `Err` with `error = true` but \
                 does not record the error value; use bare `err`, and log the error where it is handled",
            )?;
            ArgValue::Err
        }
        "level" => {
            parse_eq_sign(input, key)?;
            ArgValue::Level(parse_level(input)?)
        }
        "crate" => ArgValue::Crate(parse_eq(input, key)?),
        _ => {
            if let Some((_, why)) = UNSUPPORTED.iter().find(|(k, _)| *k == name) {
                return Err(syn::Error::new(key.span(), why));
            }
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

impl Parse for Field {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let key = Punctuated::parse_separated_nonempty_with(input, syn::ext::IdentExt::parse_any)?;
        let value = if input.peek(Token![=]) {
            let eq: Token![=] = input.parse()?;
            if input.is_empty() || input.peek(Token![,]) {
                return Err(syn::Error::new(eq.span, "expected an expression after `=`"));
            }
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Field { key, value })
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

fn parse_list<T>(
    input: ParseStream<'_>,
    key: &Ident,
    item: fn(ParseStream<'_>) -> syn::Result<T>,
) -> syn::Result<Punctuated<T, Token![,]>> {
    if !input.peek(syn::token::Paren) {
        return Err(syn::Error::new(key.span(), format!("`{key}` takes a list: `{key}(...)`")));
    }
    let content;
    syn::parenthesized!(content in input);
    Punctuated::parse_terminated_with(&content, item)
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
        .chain(UNSUPPORTED.iter().map(|(k, _)| k))
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
