//! Function shapes that cannot be instrumented, and a second gpuspan attribute on one function.

use super::Errors;
use crate::plan::Kind;
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::ItemFn;

pub(super) fn check(kind: Kind, func: &ItemFn, errors: &mut Errors) {
    if let Some(c) = &func.sig.constness {
        errors.push(syn::Error::new(
            c.span,
            "cannot instrument a `const fn`: it may run at compile time, where there is no GPU to time",
        ));
    } else if let Some(v) = &func.sig.variadic {
        errors.push(syn::Error::new(v.span(), "cannot instrument a C-variadic function"));
    }
    stacked(kind, func, errors);
}

/// Another `#[gpu_kernel]`/`#[gpu_transfer]` on the same function, or `#[tracing::instrument]`.
/// The attribute being expanded has been removed from `func.attrs`, so any gpuspan attribute left
/// is a second one: each call would be timed, and counted, twice. Under another name (`use
/// gpuspan::gpu_kernel as timed`) a later one is recognised by the marker every expansion leaves
/// (`__private::instrumented`), an earlier one `#[tracing::instrument]` by the body it generated.
fn stacked(kind: Kind, func: &ItemFn, errors: &mut Errors) {
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
        errors.push(syn::Error::new_spanned(attr, msg));
    }
    if func.attrs.iter().any(is_marker) {
        errors.push(syn::Error::new(
            Span::call_site(),
            format!(
                "{} is applied to a function another gpuspan attribute (perhaps under another name) \
                 already instruments: each call would be timed and counted twice; keep one",
                kind.attr()
            ),
        ));
    }
    if generated_by_instrument(func.block.to_token_stream()) {
        errors.push(syn::Error::new(Span::call_site(), instrument_too(kind.attr())));
    }
}

/// `#[gpuspan::__private::instrumented]`, the marker an expansion leaves on its function.
pub(crate) fn is_marker(attr: &syn::Attribute) -> bool {
    let segments: Vec<_> = attr.path().segments.iter().map(|s| s.ident.to_string()).collect();
    matches!(segments.as_slice(), [.., private, last] if private == "__private" && last == "instrumented")
}

/// Whether `#[tracing::instrument]` already rewrote this body: tracing-attributes names its span
/// `__tracing_attr_span` in the code it generates, sync and async alike.
pub(crate) fn generated_by_instrument(body: TokenStream) -> bool {
    body.into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == "__tracing_attr_span",
        TokenTree::Group(g) => generated_by_instrument(g.stream()),
        _ => false,
    })
}

/// The error for `#[tracing::instrument]` beside a gpuspan attribute, in either order.
pub(crate) fn instrument_too(attr: &str) -> String {
    format!(
        "#[instrument] and {attr} on one function: both open a span for the call, and which one gets the GPU \
         time would depend on their order; {attr} takes #[instrument]'s arguments, so keep it alone"
    )
}
