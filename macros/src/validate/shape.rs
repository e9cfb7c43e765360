//! Function shapes that cannot be instrumented, and a second gpuspan attribute on one function.

use super::Errors;
use crate::plan::Kind;
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

/// Another `#[gpu_kernel]`/`#[gpu_transfer]` below this one on the same function. The attribute
/// being expanded has been removed from `func.attrs`, so any left is a second one: each call
/// would be timed, and counted, twice.
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
}
