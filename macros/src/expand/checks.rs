//! What the off arm type-checks: the arguments' expressions, named in dead code (`if false`,
//! no machine code) through the same runtime functions the instrumented code calls, so that
//! an argument of the wrong type is an error with instrumentation off as well as on (issue 42).

use super::operands::{
    device_tokens, formatted_field, operand, queue_tokens, recorder_tokens, respan, stream_tokens, user_call,
};
use crate::plan::{Bytes, FieldValue, Operand, Plan, Resource, Sigil};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;

/// One statement per argument whose type the instrumented code constrains.
pub(super) fn off_checks(plan: &Plan, p: &TokenStream) -> Vec<TokenStream> {
    let mut out = resource(plan, p);
    if let Some(Bytes::Explicit(e)) = &plan.bytes {
        let e = e.to_token_stream();
        let at = respan(p, e.span());
        out.push(quote_spanned!(e.span()=> let _ = #at::byte_count(#e);));
    }
    for (i, f) in plan.fields.iter().enumerate() {
        match &f.value {
            FieldValue::Expr(e, sigil) => {
                let v = operand(e);
                out.push(match sigil {
                    Sigil::Value => quote_spanned!(v.span()=> let _: &dyn #p::tracing::Value = &#v;),
                    _ => formatted_field(&format_ident!("__gpuspan_field_{}", i), e, *sigil, p),
                });
            }
            FieldValue::Param(ident) => {
                out.push(quote_spanned!(ident.span()=> let _: &dyn ::core::fmt::Debug = &#ident;));
            }
            // Declared only, or recorded when the type allows: nothing to refuse.
            FieldValue::Empty | FieldValue::Auto { .. } => {}
        }
    }
    out
}

/// The resource's conversion, as the scope's opening calls it.
fn resource(plan: &Plan, p: &TokenStream) -> Vec<TokenStream> {
    let device = |d: &Operand| {
        let d = device_tokens(d);
        let call = user_call(p, quote!(as_device), &quote_spanned!(d.span()=> &#d));
        quote!(let _ = #call;)
    };
    match &plan.resource {
        Resource::None => Vec::new(),
        Resource::WgpuRecorder { recorder, device: d } => {
            let call = user_call(p, quote!(as_recorder), &recorder_tokens(recorder));
            std::iter::once(quote!(let _ = #call;)).chain(d.as_ref().map(device)).collect()
        }
        Resource::WgpuQueue { queue, device: d } => {
            let call = user_call(p, quote!(as_queue), &queue_tokens(queue));
            std::iter::once(quote!(let _ = #call;)).chain(d.as_ref().map(device)).collect()
        }
        Resource::WgpuDevice { device: d } | Resource::WgpuAttachable { device: d } => vec![device(d)],
        Resource::Cuda { stream: Some(s) } => {
            let s = stream_tokens(s);
            let call = user_call(p, quote!(as_stream), &quote_spanned!(s.span()=> &#s));
            vec![quote!(let _ = #call;)]
        }
        Resource::Cuda { stream: None } => Vec::new(),
    }
}
