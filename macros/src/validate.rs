//! Meaning and consistency of the arguments against the function they annotate.
//!
//! Validation turns the parsed arguments and the item into a [`Plan`], or into errors that each
//! point at the token at fault. Independent problems are all reported in one run (`combine`).
//! It does not depend on whether instrumentation is enabled, so the errors are the same on and off.

use crate::parse::{Arg, ArgValue, Args, LevelValue};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Expr, FnArg, Ident, ItemFn, Lit, Pat, Type, UnOp};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Kernel,
    Transfer,
}

impl Kind {
    /// The block form's macro name.
    pub fn block_macro(self) -> &'static str {
        match self {
            Kind::Kernel => "kernel",
            Kind::Transfer => "transfer",
        }
    }

    pub fn attr(self) -> &'static str {
        match self {
            Kind::Kernel => "#[gpu_kernel]",
            Kind::Transfer => "#[gpu_transfer]",
        }
    }
}

/// Where the GPU time of a call comes from, decided at compile time from the signature.
pub enum Resource {
    /// No GPU resource: host timing, labelled `host`.
    None,
    /// A command recorder (`CommandEncoder`, `ComputePass`, `RenderPass`): queries inside it.
    WgpuRecorder { recorder: TokenStream, device: Option<TokenStream> },
    /// A queue: the call's submissions are bracketed by timestamp writes.
    WgpuQueue { queue: TokenStream, device: Option<TokenStream> },
    /// Only a device: the submissions on its registered queue are bracketed.
    WgpuDevice { device: TokenStream },
    /// Only a device, and the body hands its own recorder over with `gpuspan::wgpu::attach`:
    /// timed by that query rather than a queue bracket.
    WgpuAttachable { device: TokenStream },
    /// CUDA: CUPTI correlation, or events on the stream when CUPTI is missing.
    Cuda { stream: Option<TokenStream> },
}

impl Resource {
    pub fn backend_name(&self) -> &'static str {
        match self {
            Resource::None => "host",
            Resource::WgpuRecorder { .. }
            | Resource::WgpuQueue { .. }
            | Resource::WgpuDevice { .. }
            | Resource::WgpuAttachable { .. } => "wgpu",
            Resource::Cuda { .. } => "cuda",
        }
    }
}

/// How many bytes a transfer moves, as the macro knows it.
pub enum BytesExpr {
    /// `bytes = <expr>`: any integer type.
    Explicit(TokenStream),
    /// The one slice parameter.
    SliceParam(Ident),
}

pub struct Plan {
    pub kind: Kind,
    pub name: String,
    pub resource: Resource,
    pub direction: Option<&'static str>,
    pub bytes: Option<BytesExpr>,
    pub threshold_us: Option<u64>,
    pub trace_all: bool,
    pub track_memory: bool,
    pub level: TokenStream,
    pub krate: TokenStream,
    pub fields: Vec<(String, TokenStream)>,
    /// Parameters that the arguments use (`fields(x)`, or inside an argument's expression). With
    /// instrumentation off nothing else may use them, so the off arm borrows each one
    /// (`let _ = &x;`, no machine code) rather than let them warn as unused.
    pub used_params: Vec<Ident>,
    /// One `let` per field, run before the span is built: it binds the field's value to the
    /// name `fields` refers to, as `&dyn Debug` (a parameter) or `&dyn Value` (an expression),
    /// with the user's spans. A value of the wrong type is then one error at the user's token
    /// instead of three inside `tracing`'s macros, underlining the whole attribute.
    pub field_lets: Vec<TokenStream>,
}

/// What the parameter list offers, by parameter.
struct Param<'a> {
    name: &'a Ident,
    class: ParamClass,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum ParamClass {
    Recorder,
    Queue,
    Device,
    Stream,
    /// A CUDA context: the function launches CUDA work on streams it makes itself.
    CudaContext,
    /// A command encoder or pass the function cannot have queries closed in: by shared
    /// reference (queries need `&mut`) or by value (it may be finished in the body).
    UnusableRecorder,
    Slice,
    Other,
}

const RESERVED_FIELDS: &[&str] = &["error", "otel.status_code", "gpu.kernel", "gpu.backend", "gpuspan.kind"];

pub fn plan(kind: Kind, args: Args, func: &ItemFn) -> syn::Result<Plan> {
    // Syntax errors of single arguments come first; the arguments that parsed are still checked.
    let mut errors: Option<syn::Error> = args.errors;
    let mut push = |e: syn::Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };

    check_shape(func).into_iter().for_each(&mut push);
    check_stacked(kind, func).into_iter().for_each(&mut push);

    // Duplicates, and arguments that do not belong to this attribute.
    let mut seen: Vec<String> = Vec::new();
    for Arg { key, .. } in &args.args {
        let k = key.to_string();
        if seen.contains(&k) {
            push(syn::Error::new(key.span(), format!("`{k}` specified more than once")));
        }
        seen.push(k.clone());
        if kind == Kind::Kernel && (k == "direction" || k == "bytes") {
            push(syn::Error::new(
                key.span(),
                format!("`{k}` only applies to #[gpu_transfer]; a kernel moves no bytes between host and device"),
            ));
        }
    }

    let mut name = func.sig.ident.to_string();
    let mut backend: Option<Ident> = None;
    let (mut encoder, mut queue, mut device, mut stream) = (None, None, None, None);
    let mut direction = None;
    let mut direction_given = false;
    let mut bytes = None;
    let mut threshold_us = None;
    let mut trace_all = false;
    let mut track_memory = false;
    let mut level = quote!(Level::INFO);
    let mut krate = quote!(::gpuspan);
    let mut fields_arg = None;
    let mut skip: Vec<&Ident> = Vec::new();
    let mut skip_all: Option<&Ident> = None;
    let mut skip_list: Option<&Ident> = None;
    // Keys whose value did not parse: treated as given, so no follow-on "missing" error.
    let mut invalid: Vec<String> = Vec::new();
    // Every expression the arguments evaluate, to find the parameters they use.
    let mut exprs: Vec<&Expr> = Vec::new();

    for Arg { key, value } in &args.args {
        match value {
            ArgValue::Name(lit) => {
                name = lit.value();
                if name.trim().is_empty() {
                    push(syn::Error::new(lit.span(), "`name` must not be empty"));
                }
            }
            ArgValue::Backend(b) => match b.to_string().as_str() {
                "wgpu" | "cuda" | "auto" => backend = Some(b.clone()),
                other => push(syn::Error::new(
                    b.span(),
                    format!("unknown backend `{other}`; expected `wgpu`, `cuda` or `auto`"),
                )),
            },
            ArgValue::Encoder(e) => {
                exprs.push(e);
                encoder = Some((key, e))
            }
            ArgValue::Queue(e) => {
                exprs.push(e);
                queue = Some((key, e))
            }
            ArgValue::Device(e) => {
                exprs.push(e);
                device = Some(e)
            }
            ArgValue::Stream(e) => {
                exprs.push(e);
                stream = Some((key, e))
            }
            ArgValue::Direction(d) => {
                direction_given = true;
                match d.to_string().as_str() {
                    "cpu_to_gpu" => direction = Some("cpu_to_gpu"),
                    "gpu_to_cpu" => direction = Some("gpu_to_cpu"),
                    "gpu_to_gpu" => direction = Some("gpu_to_gpu"),
                    other => push(syn::Error::new(
                        d.span(),
                        format!("unknown direction `{other}`; expected `cpu_to_gpu`, `gpu_to_cpu` or `gpu_to_gpu`"),
                    )),
                }
            }
            ArgValue::Bytes(e) => {
                exprs.push(e);
                match check_bytes_literal(e) {
                    Some(err) => push(err),
                    None => bytes = Some(BytesExpr::Explicit(e.to_token_stream())),
                }
            }
            ArgValue::ThresholdUs(lit) => match lit.base10_parse::<u64>() {
                Ok(v) => threshold_us = Some(v),
                Err(_) => push(syn::Error::new(lit.span(), "expected a whole number of microseconds")),
            },
            ArgValue::TraceAll(v) => trace_all = v.as_ref().is_none_or(|b| b.value),
            ArgValue::TrackMemory(v) => track_memory = v.as_ref().is_none_or(|b| b.value),
            ArgValue::Fields(f) => fields_arg = Some(f),
            ArgValue::Skip(s) => {
                if let Some(all) = skip_all {
                    push(redundant_skip(key, all));
                }
                skip_list = Some(key);
                for id in s {
                    if skip.contains(&id) {
                        push(syn::Error::new(id.span(), format!("`{id}` is listed in `skip` more than once")));
                    }
                    skip.push(id);
                }
            }
            ArgValue::SkipAll => {
                if let Some(list) = skip_list {
                    push(redundant_skip(key, list));
                }
                skip_all = Some(key);
            }
            ArgValue::Err => {}
            ArgValue::Invalid => invalid.push(key.to_string()),
            ArgValue::Level(l) => match level_tokens(l) {
                Ok(t) => level = t,
                Err(e) => push(e),
            },
            ArgValue::Crate(p) => krate = p.to_token_stream(),
        }
    }

    let params = classify_params(func);
    for s in &skip {
        if !params.iter().any(|p| p.name == *s) {
            push(syn::Error::new(s.span(), format!("`skip({s})`: the function has no parameter named `{s}`")));
        }
    }
    let usable: Vec<&Param<'_>> = params.iter().filter(|p| skip_all.is_none() && !skip.contains(&p.name)).collect();
    let of = |class| usable.iter().filter(move |p| p.class == class).copied().collect::<Vec<_>>();

    // Resource: explicit expressions first, then inference from parameter types.
    let backend_name = backend.as_ref().map(|b| b.to_string());
    let device_tokens = device.map(operand).or_else(|| {
        let devices = of(ParamClass::Device);
        (devices.len() == 1).then(|| devices[0].name.to_token_stream())
    });
    let wgpu_explicit = encoder.as_ref().or(queue.as_ref());
    if let (Some((wk, _)), Some((sk, _))) = (wgpu_explicit, stream.as_ref()) {
        push(syn::Error::new(
            sk.span(),
            format!("`stream` is a CUDA resource but `{wk}` is a wgpu one; a function is timed by one backend"),
        ));
    }
    if let (Some(b), Some((wk, _))) = (&backend_name, wgpu_explicit) {
        if b == "cuda" {
            push(syn::Error::new(wk.span(), format!("`{wk}` is a wgpu resource but the backend is `cuda`")));
        }
    }
    if let (Some(b), Some((sk, _))) = (&backend_name, &stream) {
        if b == "wgpu" {
            push(syn::Error::new(sk.span(), "`stream` is a CUDA resource but the backend is `wgpu`"));
        }
    }

    let recorders = of(ParamClass::Recorder);
    let queues = of(ParamClass::Queue);
    let devices = of(ParamClass::Device);
    let streams = of(ParamClass::Stream);
    let contexts = of(ParamClass::CudaContext);
    let unusable_recorders = of(ParamClass::UnusableRecorder);
    let ambiguous = |list: &[&Param<'_>], what: &str, arg: &str| -> Option<syn::Error> {
        (list.len() > 1).then(|| {
            syn::Error::new(
                list[1].name.span(),
                format!(
                    "ambiguous {what}: `{}` and `{}` both qualify; say which with `{arg} = ...`, or `skip(...)` the other",
                    list[0].name, list[1].name
                ),
            )
        })
    };
    let wgpu_from_params = || -> Result<Resource, syn::Error> {
        if let Some(e) = ambiguous(&recorders, "command recorder", "encoder") {
            return Err(e);
        }
        if let Some(r) = recorders.first() {
            let n = r.name;
            let recorder = quote_spanned!(n.span()=> &mut *#n);
            return Ok(Resource::WgpuRecorder { recorder, device: device_tokens.clone() });
        }
        if let Some(e) = ambiguous(&queues, "queue", "queue") {
            return Err(e);
        }
        if let Some(q) = queues.first() {
            let n = q.name;
            return Ok(Resource::WgpuQueue { queue: quote_spanned!(n.span()=> #n), device: device_tokens.clone() });
        }
        if let Some(r) = unusable_recorders.first() {
            return Err(unusable_recorder(r, func));
        }
        // Only a device: its registered queue is bracketed, unless the body attaches its own
        // recorder (a bracket would then time the same work less exactly, and first).
        if let Some(d) = &device_tokens {
            if calls_attach(func.block.to_token_stream()) {
                return Ok(Resource::WgpuAttachable { device: d.clone() });
            }
            return Ok(Resource::WgpuDevice { device: d.clone() });
        }
        let why = match skip_all {
            Some(_) => "backend `wgpu` needs `encoder = ...` or `queue = ...`: `skip_all` keeps every parameter out of inference",
            None => "backend `wgpu` needs a `&mut wgpu::CommandEncoder` (or `ComputePass`/`RenderPass`) or `&wgpu::Queue` \
             parameter, or an explicit `encoder = ...` / `queue = ...`",
        };
        Err(syn::Error::new(backend.as_ref().map_or_else(Span::call_site, |b| b.span()), why))
    };
    let cuda_from_params = || -> Result<Resource, syn::Error> {
        if let Some(e) = ambiguous(&streams, "CUDA stream", "stream") {
            return Err(e);
        }
        Ok(Resource::Cuda { stream: streams.first().map(|s| s.name.to_token_stream()) })
    };

    // The user's expressions keep their own spans, and so does the `&`/`&mut` put before them,
    // so that a type error underlines the expression rather than the whole attribute.
    let resource_invalid =
        ["encoder", "queue", "stream", "device", "backend"].iter().any(|k| invalid.iter().any(|i| i == k));
    let resource = if let Some((_, e)) = &encoder {
        let e = operand(e);
        Ok(Resource::WgpuRecorder { recorder: quote_spanned!(e.span()=> &mut #e), device: device_tokens.clone() })
    } else if let Some((_, e)) = &queue {
        let e = operand(e);
        Ok(Resource::WgpuQueue { queue: quote_spanned!(e.span()=> &#e), device: device_tokens.clone() })
    } else if let Some((_, e)) = &stream {
        let e = operand(e);
        Ok(Resource::Cuda { stream: Some(quote_spanned!(e.span()=> &#e)) })
    } else if resource_invalid {
        Ok(Resource::None)
    } else {
        match backend_name.as_deref() {
            Some("wgpu") => wgpu_from_params(),
            Some("cuda") => cuda_from_params(),
            _ => {
                let has_wgpu = !recorders.is_empty()
                    || !queues.is_empty()
                    || !unusable_recorders.is_empty()
                    || (devices.len() == 1 && device_tokens.is_some());
                if has_wgpu && !streams.is_empty() {
                    Err(syn::Error::new(
                        streams[0].name.span(),
                        format!(
                            "cannot tell the backend: `{}` is a CUDA stream but the function also takes wgpu \
                             resources; say `backend = wgpu` or `backend = cuda`",
                            streams[0].name
                        ),
                    ))
                } else if has_wgpu {
                    wgpu_from_params()
                } else if !streams.is_empty() || !contexts.is_empty() {
                    cuda_from_params()
                } else {
                    Ok(Resource::None)
                }
            }
        }
    };
    let resource = match resource {
        Ok(r) => r,
        Err(e) => {
            push(e);
            Resource::None
        }
    };

    if func.sig.asyncness.is_some() {
        if let Resource::WgpuRecorder { .. } = resource {
            push(syn::Error::new(
                func.sig.asyncness.span(),
                "an `async fn` cannot be timed inside a command encoder: encoding is synchronous, so annotate \
                 the function that records into the encoder, or pass the `&wgpu::Queue` instead",
            ));
        }
    }

    // Transfers: bytes and direction.
    if kind == Kind::Transfer {
        let bytes_given = bytes.is_some() || args.args.iter().any(|a| a.key == "bytes");
        if !bytes_given {
            let slices = of(ParamClass::Slice);
            if slices.len() > 1 {
                push(syn::Error::new(
                    slices[1].name.span(),
                    format!(
                        "cannot tell the transfer size: `{}` and `{}` are both slices; say `bytes = ...` or `skip(...)` one",
                        slices[0].name, slices[1].name
                    ),
                ));
            } else if let Some(s) = slices.first() {
                bytes = Some(BytesExpr::SliceParam(s.name.clone()));
            } else if !matches!(resource, Resource::Cuda { .. }) {
                let why = match skip_all {
                    Some(_) => {
                        "cannot tell how many bytes this transfer moves: `skip_all` keeps the slice parameters \
                         out of inference; add `bytes = <expr>`"
                    }
                    None => {
                        "cannot tell how many bytes this transfer moves: take the data as a slice parameter or add \
                         `bytes = <expr>`"
                    }
                };
                push(syn::Error::new(skip_all.map_or_else(|| func.sig.ident.span(), |k| k.span()), why));
            }
        }
        if !direction_given && !invalid.iter().any(|k| k == "direction") && !matches!(resource, Resource::Cuda { .. }) {
            push(syn::Error::new(
                Span::call_site(),
                "#[gpu_transfer] needs `direction = cpu_to_gpu`, `gpu_to_cpu` or `gpu_to_gpu` \
                 (only CUDA reports the direction of each copy by itself)",
            ));
        }
    }

    // Fields: bare names are parameters (recorded with Debug), `key = expr` records the expression.
    let mut fields = Vec::new();
    let mut field_lets = Vec::new();
    let mut used_params: Vec<Ident> = Vec::new();
    let mut field_keys: Vec<String> = Vec::new();
    if let Some(list) = fields_arg {
        for f in list {
            let key = f.key.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(".");
            if field_keys.contains(&key) {
                push(syn::Error::new_spanned(&f.key, format!("field `{key}` is recorded more than once")));
                continue;
            }
            field_keys.push(key.clone());
            if let Some(v) = &f.value {
                exprs.push(v);
            }
            if RESERVED_FIELDS.contains(&key.as_str()) {
                push(syn::Error::new(
                    f.key.span(),
                    format!("field `{key}` is set by gpuspan itself; choose another name"),
                ));
                continue;
            }
            match &f.value {
                Some(v) => {
                    let slot = format_ident!("__gpuspan_field_{}", fields.len());
                    let v = operand(v);
                    let value = quote!(#krate::__private::tracing::Value);
                    field_lets.push(quote_spanned!(v.span()=> let #slot: &dyn #value = &#v;));
                    fields.push((key, quote!(#slot)));
                }
                None => {
                    let ident = f.key.first().expect("parsed non-empty");
                    if f.key.len() > 1 || !params.iter().any(|p| p.name == ident) {
                        push(syn::Error::new(
                            f.key.span(),
                            format!("`fields({key})`: the function has no parameter named `{key}`; use `{key} = <expr>` to record an expression"),
                        ));
                    } else if skip.contains(&ident) {
                        push(syn::Error::new(
                            f.key.span(),
                            format!("`{key}` is both recorded in `fields` and listed in `skip`"),
                        ));
                    } else {
                        if !used_params.contains(ident) {
                            used_params.push(ident.clone());
                        }
                        let slot = format_ident!("__gpuspan_field_{}", fields.len());
                        field_lets.push(quote_spanned!(ident.span()=> let #slot: &dyn ::core::fmt::Debug = &#ident;));
                        fields.push((key, quote!(?#slot)));
                    }
                }
            }
        }
    }

    for e in exprs {
        collect_params(e.to_token_stream(), &params, &mut used_params);
    }

    match errors {
        Some(e) => Err(e),
        None => Ok(Plan {
            kind,
            name,
            resource,
            direction,
            bytes,
            threshold_us,
            trace_all,
            track_memory,
            level,
            krate,
            fields,
            used_params,
            field_lets,
        }),
    }
}

/// Function shapes that cannot be instrumented.
fn check_shape(func: &ItemFn) -> Option<syn::Error> {
    if let Some(c) = &func.sig.constness {
        return Some(syn::Error::new(
            c.span,
            "cannot instrument a `const fn`: it may run at compile time, where there is no GPU to time",
        ));
    }
    if let Some(v) = &func.sig.variadic {
        return Some(syn::Error::new(v.span(), "cannot instrument a C-variadic function"));
    }
    None
}

/// `"info"` (any case), `info`, `Level::INFO`, `tracing::Level::INFO` or `1`..=`5` (as
/// `#[tracing::instrument]` numbers them) into the runtime's `Level` path.
fn level_tokens(l: &LevelValue) -> syn::Result<TokenStream> {
    const EXPECTED: &str = "expected trace, debug, info, warn or error, written \"info\", info or Level::INFO";
    let text = match l {
        LevelValue::Str(s) => s.value(),
        LevelValue::Int(i) => {
            let name = match i.base10_parse::<u8>() {
                Ok(1) => "trace",
                Ok(2) => "debug",
                Ok(3) => "info",
                Ok(4) => "warn",
                Ok(5) => "error",
                _ => {
                    return Err(syn::Error::new(
                        i.span(),
                        "unknown level: numeric levels go from 1 (trace) to 5 (error)",
                    ))
                }
            };
            name.to_owned()
        }
        LevelValue::Path(p) => {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if segs.len() > 1 && segs[segs.len() - 2] != "Level" {
                return Err(syn::Error::new_spanned(
                    p,
                    format!("expected a level such as `Level::INFO`, found the path `{}`", segs.join("::")),
                ));
            }
            segs.last().cloned().unwrap_or_default()
        }
    };
    let level = match text.to_ascii_lowercase().as_str() {
        "trace" => quote!(TRACE),
        "debug" => quote!(DEBUG),
        "info" => quote!(INFO),
        "warn" => quote!(WARN),
        "error" => quote!(ERROR),
        other => {
            let at = match l {
                LevelValue::Path(p) => p.segments.last().map_or_else(Span::call_site, |s| s.ident.span()),
                LevelValue::Str(s) => s.span(),
                LevelValue::Int(i) => i.span(),
            };
            return Err(syn::Error::new(at, format!("unknown level `{other}`; {EXPECTED}")));
        }
    };
    Ok(quote!(Level::#level))
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

/// Another `#[gpu_kernel]`/`#[gpu_transfer]` below this one on the same function. The attribute
/// being expanded has been removed from `func.attrs`, so any left is a second one: each call
/// would be timed, and counted, twice.
fn check_stacked(kind: Kind, func: &ItemFn) -> Option<syn::Error> {
    let mut errors: Option<syn::Error> = None;
    for attr in &func.attrs {
        let Some(last) = attr.path().segments.last() else { continue };
        let other = match last.ident.to_string().as_str() {
            "gpu_kernel" => Kind::Kernel,
            "gpu_transfer" => Kind::Transfer,
            _ => continue,
        };
        let msg = if other == kind {
            format!("{} is applied more than once: each call would be timed and counted twice", kind.attr())
        } else {
            "#[gpu_kernel] and #[gpu_transfer] on one function: a call is either a kernel or a transfer, \
             and with both it would be counted twice; keep one"
                .to_owned()
        };
        let e = syn::Error::new_spanned(attr, msg);
        match &mut errors {
            Some(all) => all.combine(e),
            None => errors = Some(e),
        }
    }
    errors
}

/// `e` ready to be put after `&` or `&mut`: as is when it binds tighter than a prefix operator,
/// so that a type error underlines all of it, else in parentheses (the span of generated
/// parentheses is one token on stable, so the error then underlines the first token).
fn operand(e: &Expr) -> TokenStream {
    match e {
        Expr::Path(_)
        | Expr::Field(_)
        | Expr::MethodCall(_)
        | Expr::Call(_)
        | Expr::Index(_)
        | Expr::Lit(_)
        | Expr::Paren(_)
        | Expr::Tuple(_)
        | Expr::Array(_)
        | Expr::Macro(_)
        | Expr::Struct(_)
        | Expr::Block(_)
        // Prefix operators nest: `&*x`, `&-x`, `&&x`.
        | Expr::Unary(_)
        | Expr::Reference(_) => e.to_token_stream(),
        _ => {
            let mut g = proc_macro2::Group::new(proc_macro2::Delimiter::Parenthesis, e.to_token_stream());
            g.set_span(e.span());
            g.into_token_stream()
        }
    }
}

/// Adds to `out` each parameter whose name appears in `tokens` (once).
fn collect_params(tokens: TokenStream, params: &[Param<'_>], out: &mut Vec<Ident>) {
    for tt in tokens {
        match tt {
            proc_macro2::TokenTree::Ident(i) => {
                if let Some(p) = params.iter().find(|p| *p.name == i) {
                    if !out.contains(p.name) {
                        out.push(p.name.clone());
                    }
                }
            }
            proc_macro2::TokenTree::Group(g) => collect_params(g.stream(), params, out),
            _ => {}
        }
    }
}

fn classify_params(func: &ItemFn) -> Vec<Param<'_>> {
    func.sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(pi) => Some(Param { name: &pi.ident, class: classify(&pt.ty) }),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect()
}

/// Recognises resource types by their last path segment, behind references and `Arc`/`Rc`/`Box`.
fn classify(ty: &Type) -> ParamClass {
    let (mut ty, mut refs, mut mutable) = (ty, 0, false);
    while let Type::Reference(r) = ty {
        refs += 1;
        mutable = r.mutability.is_some();
        ty = &r.elem;
    }
    let path = match ty {
        Type::Slice(_) if refs > 0 => return ParamClass::Slice,
        Type::Path(p) => &p.path,
        _ => return ParamClass::Other,
    };
    let Some(last) = path.segments.last() else { return ParamClass::Other };
    let name = last.ident.to_string();
    let (name, has_args) = match name.as_str() {
        "Arc" | "Rc" | "Box" => match single_type_arg(last) {
            Some(Type::Path(inner)) => match inner.path.segments.last() {
                Some(s) => (s.ident.to_string(), !s.arguments.is_none()),
                None => return ParamClass::Other,
            },
            _ => return ParamClass::Other,
        },
        _ => (name, false),
    };
    match name.as_str() {
        "CommandEncoder" | "ComputePass" | "RenderPass" if refs > 0 && mutable => ParamClass::Recorder,
        "CommandEncoder" | "ComputePass" | "RenderPass" => ParamClass::UnusableRecorder,
        // A type with generic arguments is someone else's `Queue`.
        "Queue" if !has_args => ParamClass::Queue,
        "Device" if !has_args => ParamClass::Device,
        "CudaStream" => ParamClass::Stream,
        "CudaContext" => ParamClass::CudaContext,
        _ => ParamClass::Other,
    }
}

fn single_type_arg(seg: &syn::PathSegment) -> Option<&Type> {
    let syn::PathArguments::AngleBracketed(args) = &seg.arguments else { return None };
    match args.args.first() {
        Some(syn::GenericArgument::Type(t)) if args.args.len() == 1 => Some(t),
        _ => None,
    }
}

/// The error for an encoder or pass parameter that queries cannot be closed in, with the fixes.
fn unusable_recorder(r: &Param<'_>, func: &ItemFn) -> syn::Error {
    let n = r.name;
    let how = func
        .sig
        .inputs
        .iter()
        .find_map(|a| match a {
            FnArg::Typed(pt) if matches!(&*pt.pat, Pat::Ident(pi) if &pi.ident == n) => Some(&*pt.ty),
            _ => None,
        })
        .map_or("", |t| if matches!(t, Type::Reference(_)) { "by shared reference" } else { "by value" });
    syn::Error::new(
        n.span(),
        format!(
            "`{n}` is taken {how}, so gpuspan cannot close a timestamp query in it when the function returns; \
             take `&mut` instead, bracket the submission with `queue = ...`, or `skip({n})` to time the call on the host"
        ),
    )
}

/// Whether `body` calls `...::attach(..)` (`gpuspan::wgpu::attach`, however imported as a path).
fn calls_attach(body: TokenStream) -> bool {
    let tokens: Vec<proc_macro2::TokenTree> = body.into_iter().collect();
    tokens.iter().enumerate().any(|(i, t)| match t {
        proc_macro2::TokenTree::Group(g) => calls_attach(g.stream()),
        proc_macro2::TokenTree::Ident(id) => {
            id == "attach"
                && i >= 1
                && matches!(&tokens[i - 1], proc_macro2::TokenTree::Punct(p) if p.as_char() == ':')
                && matches!(tokens.get(i + 1), Some(proc_macro2::TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Parenthesis)
        }
        _ => false,
    })
}
