//! Each argument on its own: duplicates, arguments that do not belong to this attribute, and
//! values that cannot mean anything (an unknown backend, direction or level, an empty name, a
//! literal that cannot count bytes).

use super::Errors;
use crate::parse::{self, Arg, ArgValue, EventArgs, LevelValue, StrOrConst};
use crate::plan::{Direction, Event, Kind, Level, Text};
use proc_macro2::Span;
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Lit, Path, Token, UnOp};

/// What the arguments say, each value checked on its own; how they fit the function is decided
/// by the other modules.
pub(super) struct Given<'a> {
    /// `name = "..."` or `name = CONST`, when given.
    pub name: Option<Text>,
    pub target: Option<Text>,
    pub parent: Option<&'a Expr>,
    pub follows_from: Option<&'a Expr>,
    pub err: Option<Event>,
    pub ret: Option<Event>,
    /// `backend = wgpu | cuda | auto`, when it is one of those.
    pub backend: Option<&'a Ident>,
    pub encoder: Option<(&'a Ident, &'a Expr)>,
    pub queue: Option<(&'a Ident, &'a Expr)>,
    pub device: Option<&'a Expr>,
    pub stream: Option<(&'a Ident, &'a Expr)>,
    pub direction: Option<Direction>,
    pub direction_given: bool,
    /// `bytes = <expr>`, unless it is a literal that cannot count bytes.
    pub bytes: Option<&'a Expr>,
    pub threshold_us: Option<u64>,
    pub trace_all: bool,
    pub track_memory: bool,
    pub level: Level,
    pub krate: Option<&'a Path>,
    pub fields: Option<&'a Punctuated<parse::Field, Token![,]>>,
    pub skip: Vec<&'a Ident>,
    pub skip_all: Option<&'a Ident>,
    /// `untimed(..)`: parameters left out of resource and size inference.
    pub untimed: Vec<&'a Ident>,
    /// Keys given, valid or not.
    pub keys: Vec<String>,
    /// Keys whose value did not parse: treated as given, so no follow-on "missing" error.
    pub invalid: Vec<String>,
    /// Every expression the arguments evaluate, to find the parameters they use.
    pub exprs: Vec<&'a Expr>,
}

impl Given<'_> {
    pub fn said(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }

    pub fn is_invalid(&self, key: &str) -> bool {
        self.invalid.iter().any(|k| k == key)
    }
}

pub(super) fn read<'a>(kind: Kind, args: &'a [Arg], errors: &mut Errors) -> Given<'a> {
    let mut keys: Vec<String> = Vec::new();
    for Arg { key, .. } in args {
        let k = key.to_string();
        if keys.contains(&k) {
            errors.push(syn::Error::new(key.span(), format!("`{k}` specified more than once")));
        }
        if kind == Kind::Kernel && (k == "direction" || k == "bytes") {
            errors.push(syn::Error::new(
                key.span(),
                format!("`{k}` only applies to #[gpu_transfer]; a kernel moves no bytes between host and device"),
            ));
        }
        keys.push(k);
    }

    let mut given = Given {
        name: None,
        target: None,
        parent: None,
        follows_from: None,
        err: None,
        ret: None,
        backend: None,
        encoder: None,
        queue: None,
        device: None,
        stream: None,
        direction: None,
        direction_given: false,
        bytes: None,
        threshold_us: None,
        trace_all: false,
        track_memory: false,
        level: Level::Info,
        krate: None,
        fields: None,
        skip: Vec::new(),
        skip_all: None,
        untimed: Vec::new(),
        keys,
        invalid: Vec::new(),
        exprs: Vec::new(),
    };
    let mut skip_list: Option<&Ident> = None;
    let (mut err_args, mut ret_args) = (None, None);
    for Arg { key, value } in args {
        match value {
            ArgValue::Name(n) => given.name = Some(text(key, n, errors)),
            ArgValue::Target(t) => given.target = Some(text(key, t, errors)),
            ArgValue::Parent(e) => {
                given.exprs.push(e);
                given.parent = Some(e);
            }
            ArgValue::FollowsFrom(e) => {
                given.exprs.push(e);
                given.follows_from = Some(e);
            }
            ArgValue::Backend(b) => match b.to_string().as_str() {
                "wgpu" | "cuda" | "auto" => given.backend = Some(b),
                other => errors.push(syn::Error::new(
                    b.span(),
                    format!("unknown backend `{other}`; expected `wgpu`, `cuda` or `auto`"),
                )),
            },
            ArgValue::Encoder(e) => {
                given.exprs.push(e);
                given.encoder = Some((key, e));
            }
            ArgValue::Queue(e) => {
                given.exprs.push(e);
                given.queue = Some((key, e));
            }
            ArgValue::Device(e) => {
                given.exprs.push(e);
                given.device = Some(e);
            }
            ArgValue::Stream(e) => {
                given.exprs.push(e);
                given.stream = Some((key, e));
            }
            ArgValue::Direction(d) => {
                given.direction_given = true;
                match Direction::from_name(&d.to_string()) {
                    Some(dir) => given.direction = Some(dir),
                    None => errors.push(syn::Error::new(
                        d.span(),
                        format!("unknown direction `{d}`; expected `cpu_to_gpu`, `gpu_to_cpu` or `gpu_to_gpu`"),
                    )),
                }
            }
            ArgValue::Bytes(e) => {
                given.exprs.push(e);
                match check_bytes_literal(e) {
                    Some(err) => errors.push(err),
                    None => given.bytes = Some(e),
                }
            }
            ArgValue::ThresholdUs(lit) => match lit.base10_parse::<u64>() {
                Ok(v) => given.threshold_us = Some(v),
                Err(_) => errors.push(syn::Error::new(lit.span(), "expected a whole number of microseconds")),
            },
            ArgValue::TraceAll(v) => given.trace_all = v.as_ref().is_none_or(|b| b.value),
            ArgValue::TrackMemory(v) => given.track_memory = v.as_ref().is_none_or(|b| b.value),
            ArgValue::Fields(f) => given.fields = Some(f),
            ArgValue::Skip(s) => {
                if let Some(all) = given.skip_all {
                    errors.push(redundant_skip(key, all));
                }
                skip_list = Some(key);
                for id in s {
                    if given.skip.contains(&id) {
                        errors.push(syn::Error::new(id.span(), format!("`{id}` is listed in `skip` more than once")));
                    }
                    given.skip.push(id);
                }
            }
            ArgValue::SkipAll => {
                if let Some(list) = skip_list {
                    errors.push(redundant_skip(key, list));
                }
                given.skip_all = Some(key);
            }
            ArgValue::Untimed(list) => {
                for id in list {
                    if given.untimed.contains(&id) {
                        errors
                            .push(syn::Error::new(id.span(), format!("`{id}` is listed in `untimed` more than once")));
                    }
                    given.untimed.push(id);
                }
            }
            ArgValue::Err(a) => err_args = Some(a),
            ArgValue::Ret(a) => ret_args = Some(a),
            ArgValue::Invalid => given.invalid.push(key.to_string()),
            ArgValue::Level(l) => match level(l) {
                Ok(v) => given.level = v,
                Err(e) => errors.push(e),
            },
            ArgValue::Crate(p) => given.krate = Some(p),
        }
    }
    // As `tracing`: an error is shown with `Display` at ERROR, a returned value with `Debug` at
    // the span's level.
    given.err = err_args.map(|a| event(a, Level::Error, true, errors));
    given.ret = ret_args.map(|a| event(a, given.level, false, errors));
    given
}

/// A name or target: a literal must not be empty.
fn text(key: &Ident, v: &StrOrConst, errors: &mut Errors) -> Text {
    match v {
        StrOrConst::Str(lit) => {
            let n = lit.value();
            if n.trim().is_empty() {
                errors.push(syn::Error::new(lit.span(), format!("`{key}` must not be empty")));
            }
            Text::Str(n)
        }
        StrOrConst::Const(id) => Text::Const(id.clone()),
    }
}

/// `err(..)`/`ret(..)`, with the level and format used when none is given.
fn event(a: &EventArgs, default: Level, display: bool, errors: &mut Errors) -> Event {
    let level = match &a.level {
        Some(l) => match level(l) {
            Ok(v) => v,
            Err(e) => {
                errors.push(e);
                default
            }
        },
        None => default,
    };
    let display = a.mode.as_ref().map_or(display, |m| m == "Display");
    Event { display, level }
}

/// `"info"` (any case), `info`, `Level::INFO`, `tracing::Level::INFO` or `1`..=`5` (as
/// `#[tracing::instrument]` numbers them).
fn level(l: &LevelValue) -> syn::Result<Level> {
    const EXPECTED: &str = "expected trace, debug, info, warn or error, written \"info\", info or Level::INFO";
    let (text, at) = match l {
        LevelValue::Str(s) => (s.value(), s.span()),
        LevelValue::Int(i) => {
            return i.base10_parse::<u8>().ok().and_then(Level::from_number).ok_or_else(|| {
                syn::Error::new(i.span(), "unknown level: numeric levels go from 1 (trace) to 5 (error)")
            })
        }
        LevelValue::Path(p) => {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if segs.len() > 1 && segs[segs.len() - 2] != "Level" {
                return Err(syn::Error::new_spanned(
                    p,
                    format!("expected a level such as `Level::INFO`, found the path `{}`", segs.join("::")),
                ));
            }
            let at = p.segments.last().map_or_else(Span::call_site, |s| s.ident.span());
            (segs.last().cloned().unwrap_or_default(), at)
        }
    };
    Level::from_name(&text)
        .ok_or_else(|| syn::Error::new(at, format!("unknown level `{}`; {EXPECTED}", text.to_ascii_lowercase())))
}

/// Both `skip(...)` and `skip_all`: the second one said is the error.
fn redundant_skip(second: &Ident, first: &Ident) -> syn::Error {
    syn::Error::new(
        second.span(),
        format!("`{second}` given together with `{first}`; `skip_all` already skips every parameter, keep one of them"),
    )
}

/// A literal `bytes` that cannot be a byte count is an error at the literal (a non-literal
/// expression of the wrong type is a type error, at the expression, from `ByteCount`).
fn check_bytes_literal(e: &Expr) -> Option<syn::Error> {
    match e {
        Expr::Paren(p) => check_bytes_literal(&p.expr),
        Expr::Group(g) => check_bytes_literal(&g.expr),
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) && matches!(&*u.expr, Expr::Lit(_)) => {
            Some(syn::Error::new_spanned(e, "`bytes` cannot be negative: a transfer moves 0 or more bytes"))
        }
        Expr::Lit(l) => {
            let what = match &l.lit {
                Lit::Int(_) => return None,
                Lit::Float(_) => "a float",
                Lit::Str(_) | Lit::CStr(_) | Lit::ByteStr(_) => "a string",
                Lit::Bool(_) => "a bool",
                Lit::Char(_) | Lit::Byte(_) => "a character",
                _ => "this literal",
            };
            Some(syn::Error::new_spanned(
                e,
                format!("`bytes` counts whole bytes: expected an integer expression, found {what}, e.g. `bytes = 4096` or `bytes = n * 4`"),
            ))
        }
        _ => None,
    }
}
