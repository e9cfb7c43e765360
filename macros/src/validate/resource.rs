//! Which backend times the call, and through which resource: the arguments' explicit
//! expressions first, then inference from the parameters' types, with one error for each
//! conflict or ambiguity.

use super::args::Given;
use super::params::{Param, ParamClass, Usable};
use super::Errors;
use crate::plan::{Operand, Resource};
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat, Type};

pub(super) fn choose(given: &Given<'_>, usable: &Usable<'_, '_>, func: &ItemFn, errors: &mut Errors) -> Resource {
    let backend = given.backend.map(|b| b.to_string());
    let wgpu_explicit = given.encoder.or(given.queue);
    if let (Some((wk, _)), Some((sk, _))) = (wgpu_explicit, given.stream) {
        errors.push(syn::Error::new(
            sk.span(),
            format!("`stream` is a CUDA resource but `{wk}` is a wgpu one; a function is timed by one backend"),
        ));
    }
    if let (Some("cuda"), Some((wk, _))) = (backend.as_deref(), wgpu_explicit) {
        errors.push(syn::Error::new(wk.span(), format!("`{wk}` is a wgpu resource but the backend is `cuda`")));
    }
    if let (Some("wgpu"), Some((sk, _))) = (backend.as_deref(), given.stream) {
        errors.push(syn::Error::new(sk.span(), "`stream` is a CUDA resource but the backend is `wgpu`"));
    }

    let inference = Inference { given, usable, func, device: device(given, usable) };
    let resource_invalid = ["encoder", "queue", "stream", "device", "backend"].iter().any(|k| given.is_invalid(k));
    let resource = if let Some((_, e)) = given.encoder {
        Ok(Resource::WgpuRecorder { recorder: Operand::Arg(e.clone()), device: inference.device.clone() })
    } else if let Some((_, e)) = given.queue {
        Ok(Resource::WgpuQueue { queue: Operand::Arg(e.clone()), device: inference.device.clone() })
    } else if let Some((_, e)) = given.stream {
        Ok(Resource::Cuda { stream: Some(Operand::Arg(e.clone())) })
    } else if resource_invalid {
        Ok(Resource::None)
    } else {
        match backend.as_deref() {
            Some("wgpu") => inference.wgpu(),
            Some("cuda") => inference.cuda(),
            _ => inference.auto(),
        }
    };
    let resource = resource.unwrap_or_else(|e| {
        errors.push(e);
        Resource::None
    });
    if let (Some(asyncness), Resource::WgpuRecorder { .. }) = (&func.sig.asyncness, &resource) {
        errors.push(syn::Error::new(
            asyncness.span(),
            "an `async fn` cannot be timed inside a command encoder: encoding is synchronous, so annotate \
             the function that records into the encoder, or pass the `&wgpu::Queue` instead",
        ));
    }
    resource
}

/// `device = ...`, else the one device parameter.
fn device(given: &Given<'_>, usable: &Usable<'_, '_>) -> Option<Operand> {
    given.device.map(|e| Operand::Arg(e.clone())).or_else(|| {
        let devices = usable.of(ParamClass::Device);
        (devices.len() == 1).then(|| Operand::Param(devices[0].name.clone()))
    })
}

/// The resource read from the parameters' types, when no argument names one.
struct Inference<'g, 'p, 'a> {
    given: &'g Given<'g>,
    usable: &'g Usable<'p, 'a>,
    func: &'g ItemFn,
    device: Option<Operand>,
}

impl Inference<'_, '_, '_> {
    fn wgpu(&self) -> syn::Result<Resource> {
        let recorders = self.usable.of(ParamClass::Recorder);
        ambiguous(&recorders, "command recorder", "encoder")?;
        if let Some(r) = recorders.first() {
            return Ok(Resource::WgpuRecorder {
                recorder: Operand::Param(r.name.clone()),
                device: self.device.clone(),
            });
        }
        let queues = self.usable.of(ParamClass::Queue);
        ambiguous(&queues, "queue", "queue")?;
        if let Some(q) = queues.first() {
            return Ok(Resource::WgpuQueue { queue: Operand::Param(q.name.clone()), device: self.device.clone() });
        }
        if let Some(r) = self.usable.of(ParamClass::UnusableRecorder).first() {
            return Err(unusable_recorder(r, self.func));
        }
        // Only a device: its registered queue is bracketed, unless the body attaches its own
        // recorder (a bracket would then time the same work less exactly, and first).
        if let Some(d) = &self.device {
            if calls_attach(self.func.block.to_token_stream()) {
                return Ok(Resource::WgpuAttachable { device: d.clone() });
            }
            return Ok(Resource::WgpuDevice { device: d.clone() });
        }
        let why =
            "backend `wgpu` needs a `&mut wgpu::CommandEncoder` (or `ComputePass`/`RenderPass`) or `&wgpu::Queue` \
             parameter (not `untimed`), or an explicit `encoder = ...` / `queue = ...`";
        Err(syn::Error::new(self.given.backend.map_or_else(Span::call_site, |b| b.span()), why))
    }

    fn cuda(&self) -> syn::Result<Resource> {
        let streams = self.usable.of(ParamClass::Stream);
        ambiguous(&streams, "CUDA stream", "stream")?;
        Ok(Resource::Cuda { stream: streams.first().map(|s| Operand::Param(s.name.clone())) })
    }

    /// No backend said: wgpu resources, CUDA ones, or none (host timing).
    fn auto(&self) -> syn::Result<Resource> {
        let u = self.usable;
        let has_wgpu = !u.of(ParamClass::Recorder).is_empty()
            || !u.of(ParamClass::Queue).is_empty()
            || !u.of(ParamClass::UnusableRecorder).is_empty()
            || (u.of(ParamClass::Device).len() == 1 && self.device.is_some());
        let streams = u.of(ParamClass::Stream);
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
            self.wgpu()
        } else if !streams.is_empty() || !u.of(ParamClass::CudaContext).is_empty() {
            self.cuda()
        } else {
            Ok(Resource::None)
        }
    }
}

fn ambiguous(list: &[&Param<'_>], what: &str, arg: &str) -> syn::Result<()> {
    if list.len() > 1 {
        return Err(syn::Error::new(
            list[1].name.span(),
            format!(
                "ambiguous {what}: `{}` and `{}` both qualify; say which with `{arg} = ...`, or `untimed(...)` the other",
                list[0].name, list[1].name
            ),
        ));
    }
    Ok(())
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
             take `&mut` instead, bracket the submission with `queue = ...`, or `untimed({n})` to time the call on the host"
        ),
    )
}

/// Whether `body` calls `...::attach(..)` (`gpuspan::wgpu::attach`, however imported as a path).
pub(super) fn calls_attach(body: TokenStream) -> bool {
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
