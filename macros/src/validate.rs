//! Meaning and consistency of the arguments against the function they annotate.
//!
//! Validation turns the parsed arguments and the item into a [`Plan`], or into errors that each
//! point at the token at fault. Independent problems are all reported in one run (`combine`).
//! It does not depend on whether instrumentation is enabled, so the errors are the same on and off.

use crate::parse::{Arg, ArgValue, Args, LevelValue};
use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, Type};

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
    /// CUDA: CUPTI correlation, or events on the stream when CUPTI is missing.
    Cuda { stream: Option<TokenStream> },
}

impl Resource {
    pub fn backend_name(&self) -> &'static str {
        match self {
            Resource::None => "host",
            Resource::WgpuRecorder { .. } | Resource::WgpuQueue { .. } | Resource::WgpuDevice { .. } => "wgpu",
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
    let mut errors: Option<syn::Error> = None;
    let mut push = |e: syn::Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };

    check_shape(func).into_iter().for_each(&mut push);

    // Duplicates, and arguments that do not belong to this attribute.
    let mut seen: Vec<String> = Vec::new();
    for Arg { key, value } in &args.args {
        let k = key.to_string();
        if seen.contains(&k) {
            push(syn::Error::new(key.span(), format!("`{k}` specified more than once")));
        }
        seen.push(k.clone());
        if kind == Kind::Kernel && matches!(value, ArgValue::Direction(_) | ArgValue::Bytes(_)) {
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
            ArgValue::Encoder(e) => encoder = Some((key, e)),
            ArgValue::Queue(e) => queue = Some((key, e)),
            ArgValue::Device(e) => device = Some(e),
            ArgValue::Stream(e) => stream = Some((key, e)),
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
            ArgValue::Bytes(e) => bytes = Some(BytesExpr::Explicit(e.to_token_stream())),
            ArgValue::ThresholdUs(lit) => match lit.base10_parse::<u64>() {
                Ok(v) => threshold_us = Some(v),
                Err(_) => push(syn::Error::new(lit.span(), "expected a whole number of microseconds")),
            },
            ArgValue::TraceAll(v) => trace_all = v.as_ref().is_none_or(|b| b.value),
            ArgValue::TrackMemory(v) => track_memory = v.as_ref().is_none_or(|b| b.value),
            ArgValue::Fields(f) => fields_arg = Some(f),
            ArgValue::Skip(s) => skip.extend(s.iter()),
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
    let usable: Vec<&Param<'_>> = params.iter().filter(|p| !skip.contains(&p.name)).collect();
    let of = |class| usable.iter().filter(move |p| p.class == class).copied().collect::<Vec<_>>();

    // Resource: explicit expressions first, then inference from parameter types.
    let backend_name = backend.as_ref().map(|b| b.to_string());
    let device_tokens = device.map(|e| e.to_token_stream()).or_else(|| {
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
            return Ok(Resource::WgpuRecorder { recorder: quote!(&mut *#n), device: device_tokens.clone() });
        }
        if let Some(e) = ambiguous(&queues, "queue", "queue") {
            return Err(e);
        }
        if let Some(q) = queues.first() {
            let n = q.name;
            return Ok(Resource::WgpuQueue { queue: quote!(#n), device: device_tokens.clone() });
        }
        if let Some(r) = unusable_recorders.first() {
            return Err(unusable_recorder(r, func));
        }
        // Only a device: its registered queue is bracketed.
        if let Some(d) = &device_tokens {
            return Ok(Resource::WgpuDevice { device: d.clone() });
        }
        Err(syn::Error::new(
            backend.as_ref().map_or_else(Span::call_site, |b| b.span()),
            "backend `wgpu` needs a `&mut wgpu::CommandEncoder` (or `ComputePass`/`RenderPass`) or `&wgpu::Queue` \
             parameter, or an explicit `encoder = ...` / `queue = ...`",
        ))
    };
    let cuda_from_params = || -> Result<Resource, syn::Error> {
        if let Some(e) = ambiguous(&streams, "CUDA stream", "stream") {
            return Err(e);
        }
        Ok(Resource::Cuda { stream: streams.first().map(|s| s.name.to_token_stream()) })
    };

    let resource = if let Some((_, e)) = &encoder {
        Ok(Resource::WgpuRecorder { recorder: quote!(&mut #e), device: device_tokens.clone() })
    } else if let Some((_, e)) = &queue {
        Ok(Resource::WgpuQueue { queue: quote!(&#e), device: device_tokens.clone() })
    } else if let Some((_, e)) = &stream {
        Ok(Resource::Cuda { stream: Some(quote!(&#e)) })
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
        if bytes.is_none() {
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
                push(syn::Error::new(
                    func.sig.ident.span(),
                    "cannot tell how many bytes this transfer moves: take the data as a slice parameter or add \
                     `bytes = <expr>`",
                ));
            }
        }
        if !direction_given && !matches!(resource, Resource::Cuda { .. }) {
            push(syn::Error::new(
                Span::call_site(),
                "#[gpu_transfer] needs `direction = cpu_to_gpu`, `gpu_to_cpu` or `gpu_to_gpu` \
                 (only CUDA reports the direction of each copy by itself)",
            ));
        }
    }

    // Fields: bare names are parameters (recorded with Debug), `key = expr` records the expression.
    let mut fields = Vec::new();
    if let Some(list) = fields_arg {
        for f in list {
            let key = f.key.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(".");
            if RESERVED_FIELDS.contains(&key.as_str()) {
                push(syn::Error::new(
                    f.key.span(),
                    format!("field `{key}` is set by gpuspan itself; choose another name"),
                ));
                continue;
            }
            match &f.value {
                Some(v) => fields.push((key, v.to_token_stream())),
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
                        fields.push((key, quote!(?#ident)));
                    }
                }
            }
        }
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

fn level_tokens(l: &LevelValue) -> syn::Result<TokenStream> {
    let level = match l.text().to_ascii_lowercase().as_str() {
        "trace" => quote!(TRACE),
        "debug" => quote!(DEBUG),
        "info" => quote!(INFO),
        "warn" => quote!(WARN),
        "error" => quote!(ERROR),
        other => {
            return Err(syn::Error::new(
                l.span(),
                format!("unknown level `{other}`; expected \"trace\", \"debug\", \"info\", \"warn\" or \"error\""),
            ))
        }
    };
    Ok(quote!(Level::#level))
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
