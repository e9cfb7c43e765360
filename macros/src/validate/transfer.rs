//! What a transfer must say: how many bytes it moves (an argument, or the one slice parameter)
//! and in which direction (CUDA reports both by itself).

use super::args::Given;
use super::params::{ParamClass, Usable};
use super::Errors;
use crate::plan::{Bytes, Kind, Resource};
use proc_macro2::Span;
use syn::ItemFn;

/// The transfer's byte count, if known, after checking that a transfer says what it must.
pub(super) fn check(
    kind: Kind,
    given: &Given<'_>,
    usable: &Usable<'_, '_>,
    resource: &Resource,
    func: &ItemFn,
    errors: &mut Errors,
) -> Option<Bytes> {
    let explicit = given.bytes.map(|e| Bytes::Explicit(e.clone()));
    if kind != Kind::Transfer {
        return explicit;
    }
    let cuda = matches!(resource, Resource::Cuda { .. });
    let mut bytes = explicit;
    if bytes.is_none() && !given.said("bytes") {
        let slices = usable.of(ParamClass::Slice);
        if slices.len() > 1 {
            errors.push(syn::Error::new(
                slices[1].name.span(),
                format!(
                    "cannot tell the transfer size: `{}` and `{}` are both slices; say `bytes = ...` or `untimed(...)` one",
                    slices[0].name, slices[1].name
                ),
            ));
        } else if let Some(s) = slices.first() {
            bytes = Some(Bytes::SliceParam(s.name.clone()));
        } else if !cuda {
            errors.push(syn::Error::new(
                func.sig.ident.span(),
                "cannot tell how many bytes this transfer moves: take the data as a slice parameter (not \
                 `untimed`) or add `bytes = <expr>`",
            ));
        }
    }
    if !given.direction_given && !given.is_invalid("direction") && !cuda {
        errors.push(syn::Error::new(
            Span::call_site(),
            "#[gpu_transfer] needs `direction = cpu_to_gpu`, `gpu_to_cpu` or `gpu_to_gpu` \
             (only CUDA reports the direction of each copy by itself)",
        ));
    }
    bytes
}
