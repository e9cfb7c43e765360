//! The user's tokens made ready for the generated code: the runtime's path, operands with
//! the user's spans (so that a type error underlines what the user wrote, once), and the
//! host span's field bindings.

use crate::plan::{FieldValue, Operand, Plan, Sigil};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::Expr;

/// `tokens` with every span set to `span`: a path to a runtime function, so that a type error in
/// a call built around the user's expression is reported there, not across the whole attribute.
pub(super) fn respan(tokens: &TokenStream, span: proc_macro2::Span) -> TokenStream {
    tokens
        .clone()
        .into_iter()
        .map(|mut tt| {
            if let proc_macro2::TokenTree::Group(g) = &tt {
                let mut inner = proc_macro2::Group::new(g.delimiter(), respan(&g.stream(), span));
                inner.set_span(span);
                tt = inner.into();
            } else {
                tt.set_span(span);
            }
            tt
        })
        .collect()
}

pub(super) fn option_ref(
    p: &TokenStream,
    t: &Option<TokenStream>,
    conv: TokenStream,
    none: TokenStream,
) -> TokenStream {
    match t {
        Some(t) => {
            let call = user_call(p, conv, &quote_spanned!(t.span()=> &#t));
            quote!(::core::option::Option::Some(#call))
        }
        // Typed by the runtime: without the backend's feature the parameter is generic, and a
        // bare `None` would leave its type to infer.
        None => quote!(#p::#none()),
    }
}

/// The runtime's path: `crate = ...`, else `::gpuspan`.
pub(super) fn krate(plan: &Plan) -> TokenStream {
    plan.krate.as_ref().map_or_else(|| quote!(::gpuspan), |p| p.to_token_stream())
}

/// One `let` per field, run before the span is built, and the value each field records: the
/// `let` binds the field's value with the user's spans (`&dyn Debug` for a parameter named in
/// `fields`, `&dyn Value` for an expression), so that a value of the wrong type is one error at
/// the user's token instead of three inside `tracing`'s macros, underlining the whole attribute.
pub(super) fn field_slots(plan: &Plan, p: &TokenStream) -> (Vec<TokenStream>, Vec<TokenStream>) {
    let mut lets = Vec::new();
    let mut values = Vec::new();
    for (i, f) in plan.fields.iter().enumerate() {
        let slot = format_ident!("__gpuspan_field_{}", i);
        match &f.value {
            FieldValue::Expr(v, Sigil::Value) => {
                let v = operand(v);
                lets.push(quote_spanned!(v.span()=> let #slot: &dyn #p::tracing::Value = &#v;));
                values.push(quote!(#slot));
            }
            FieldValue::Expr(v, sigil) => {
                lets.push(formatted_field(&slot, v, *sigil, p));
                values.push(match sigil {
                    Sigil::Display => quote!(%#slot),
                    _ => quote!(?#slot),
                });
            }
            FieldValue::Param(ident) => {
                lets.push(quote_spanned!(ident.span()=> let #slot: &dyn ::core::fmt::Debug = &#ident;));
                values.push(quote!(?#slot));
            }
            FieldValue::Empty => values.push(quote!(#p::tracing::field::Empty)),
            // Recorded as `tracing` records parameters; a type without `Debug` is left out
            // rather than refused (the probe picks the arm at compile time).
            FieldValue::Auto { param, as_value: true } => {
                lets.push(quote_spanned!(param.span()=> let #slot = &#param;));
                values.push(quote!(#slot));
            }
            FieldValue::Auto { param, as_value: false } => {
                lets.push(quote!(let #slot = (&#p::FieldProbe(&#param)).gpuspan_field();));
                values.push(quote!(#slot));
            }
        }
    }
    (lets, values)
}

/// `fields(k = %v)` / `k = ?v`: `let slot: &dyn Display = ..` (or `Debug`) through the runtime's
/// `display_field`/`debug_field`, the off arm's check too, so that a value without the trait is
/// one error, the same in both modes, and `tracing`'s macro then sees a type that has it. The
/// value is borrowed twice (`&&v`, the reference sized) so that `%*s` of a `str` works.
pub(super) fn formatted_field(slot: &syn::Ident, v: &Expr, sigil: Sigil, p: &TokenStream) -> TokenStream {
    let v = operand(v);
    let (check, tr) = match sigil {
        Sigil::Display => (quote!(display_field), quote!(Display)),
        _ => (quote!(debug_field), quote!(Debug)),
    };
    let check = respan(&quote!(#p::#check), v.span());
    // At the user's expression, so that the unmet bound underlines it, not the attribute.
    let by_ref = syn::Ident::new(&format!("{slot}_ref"), v.span());
    quote_spanned! {v.span()=>
        let #by_ref = &#v;
        let #slot: &dyn ::core::fmt::#tr = #check(&#by_ref);
    }
}

// The user's expressions keep their own spans, and so does the `&`/`&mut` put before them, so
// that a type error underlines the expression rather than the whole attribute.

pub(super) fn recorder_tokens(o: &Operand) -> TokenStream {
    match o {
        Operand::Param(n) => quote_spanned!(n.span()=> &mut *#n),
        Operand::Arg(e) => {
            let e = operand(e);
            quote_spanned!(e.span()=> &mut #e)
        }
    }
}

pub(super) fn queue_tokens(o: &Operand) -> TokenStream {
    match o {
        // Borrowed, as the device is: the parameter may be a `&Queue`, an `Arc<Queue>` or a
        // `&Arc<Queue>`, and `as_queue` takes any of them behind a reference.
        Operand::Param(n) => quote_spanned!(n.span()=> &#n),
        Operand::Arg(e) => {
            let e = operand(e);
            quote_spanned!(e.span()=> &#e)
        }
    }
}

pub(super) fn device_tokens(o: &Operand) -> TokenStream {
    match o {
        Operand::Param(n) => n.to_token_stream(),
        Operand::Arg(e) => operand(e),
    }
}

pub(super) fn stream_tokens(o: &Operand) -> TokenStream {
    match o {
        Operand::Param(n) => n.to_token_stream(),
        Operand::Arg(e) => {
            let e = operand(e);
            quote_spanned!(e.span()=> &#e)
        }
    }
}

/// `e` ready to be put after `&` or `&mut`: as is when it binds tighter than a prefix operator,
/// so that a type error underlines all of it, else in parentheses (the span of generated
/// parentheses is one token on stable, so the error then underlines the first token).
pub(super) fn operand(e: &Expr) -> TokenStream {
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

/// `#p::#func(#arg)` spanned entirely at the user's expression `arg`: a value of the wrong type
/// is reported once, there (the same error at every exit is deduplicated), with the message of
/// the runtime trait's `#[diagnostic::on_unimplemented]`.
pub(super) fn user_call(p: &TokenStream, func: TokenStream, arg: &TokenStream) -> TokenStream {
    let span = arg.span();
    let path = respan(&quote!(#p::#func), span);
    quote_spanned!(span=> #path(#arg))
}
