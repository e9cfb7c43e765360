//! Parsing of the attribute arguments into a small typed AST.
//!
//! Parsing only checks syntax and keeps every token's span; what the arguments mean and whether
//! they fit the function is `validate.rs`'s job, so that all errors of one kind live in one place.

use proc_macro2::Span;
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
    /// A level given as a string (`"debug"`) or an identifier (`debug`, `Level::DEBUG` is not
    /// accepted: the macro must know the level at compile time to build the span's callsite).
    Level(LevelValue),
    Crate(Path),
}

pub enum LevelValue {
    Str(LitStr),
    Ident(Ident),
}

impl LevelValue {
    pub fn text(&self) -> String {
        match self {
            LevelValue::Str(s) => s.value(),
            LevelValue::Ident(i) => i.to_string(),
        }
    }
    pub fn span(&self) -> Span {
        match self {
            LevelValue::Str(s) => s.span(),
            LevelValue::Ident(i) => i.span(),
        }
    }
}

/// One entry of `fields(...)`: a bare parameter name, or `key = expr`.
pub struct Field {
    /// Dotted keys such as `model.layer` are allowed, as in `tracing`.
    pub key: Punctuated<Ident, Token![.]>,
    pub value: Option<Expr>,
}

/// The whole argument list.
pub struct Args {
    pub args: Vec<Arg>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Vec::new();
        while !input.is_empty() {
            args.push(input.parse()?);
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(Args { args })
    }
}

impl Parse for Arg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        // `crate` is a keyword, so it needs its own branch.
        let key: Ident = if input.peek(Token![crate]) {
            let kw: Token![crate] = input.parse()?;
            Ident::new("crate", kw.span)
        } else {
            input.call(syn::ext::IdentExt::parse_any)?
        };
        let name = key.to_string();
        let value = match name.as_str() {
            "name" => ArgValue::Name(parse_eq(input)?),
            "backend" => ArgValue::Backend(parse_eq(input)?),
            "encoder" => ArgValue::Encoder(parse_eq(input)?),
            "queue" => ArgValue::Queue(parse_eq(input)?),
            "device" => ArgValue::Device(parse_eq(input)?),
            "stream" => ArgValue::Stream(parse_eq(input)?),
            "direction" => ArgValue::Direction(parse_eq(input)?),
            "bytes" => ArgValue::Bytes(parse_eq(input)?),
            "threshold_us" => ArgValue::ThresholdUs(parse_eq_with(
                input,
                "an integer number of microseconds, e.g. `threshold_us = 250`",
            )?),
            "trace_all" => {
                if input.peek(Token![=]) {
                    ArgValue::TraceAll(Some(parse_eq_with(input, "`true` or `false`")?))
                } else {
                    ArgValue::TraceAll(None)
                }
            }
            "track_memory" => {
                if input.peek(Token![=]) {
                    ArgValue::TrackMemory(Some(parse_eq_with(input, "`true` or `false`")?))
                } else {
                    ArgValue::TrackMemory(None)
                }
            }
            "fields" => ArgValue::Fields(parse_list(input, &key, Field::parse)?),
            "skip" => ArgValue::Skip(parse_list(input, &key, Ident::parse)?),
            "level" => {
                input.parse::<Token![=]>()?;
                if input.peek(LitStr) {
                    ArgValue::Level(LevelValue::Str(input.parse()?))
                } else {
                    ArgValue::Level(LevelValue::Ident(input.parse().map_err(|e| {
                        syn::Error::new(
                            e.span(),
                            "expected a level: \"trace\", \"debug\", \"info\", \"warn\" or \"error\"",
                        )
                    })?))
                }
            }
            "crate" => ArgValue::Crate(parse_eq(input)?),
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
        Ok(Arg { key, value })
    }
}

impl Parse for Field {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let key = Punctuated::parse_separated_nonempty_with(input, syn::ext::IdentExt::parse_any)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Field { key, value })
    }
}

fn parse_eq<T: Parse>(input: ParseStream<'_>) -> syn::Result<T> {
    input.parse::<Token![=]>()?;
    input.parse()
}

/// `= value` where a wrong kind of value gets a message that says what was expected.
fn parse_eq_with<T: Parse>(input: ParseStream<'_>, expected: &str) -> syn::Result<T> {
    input.parse::<Token![=]>()?;
    let fork = input.fork();
    match input.parse::<T>() {
        Ok(v) => Ok(v),
        Err(_) => {
            let span = fork.cursor().token_tree().map_or(input.span(), |(tt, _)| tt.span());
            Err(syn::Error::new(span, format!("expected {expected}")))
        }
    }
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
