//! The body of a queue-bracketed function: each `RECV.submit(ARG)` becomes a call that, when
//! `RECV` turns out to be a wgpu queue, also submits the bracket's end, so that the bracket
//! closes with the call's last submission instead of at its exit (after a read-back's map, wait
//! and copy-out). Whether `RECV` is a queue is decided by its type, through autoref
//! specialization in `gpuspan::__private`: another type's `submit` (a thread pool's) and
//! generic code keep the plain call.
//!
//! In an async function (or an `#[async_trait]` body) the scope lives in the future that wraps
//! the body, for the whole body: the body's own submissions reach it through a handle
//! (`BracketHandle`) moved into the body, the same rewrite with another name.
//!
//! Not rewritten, and why:
//! - closures and async blocks: they may run after the function returned or on another thread,
//!   when the scope is closed or out of reach;
//! - nested functions and items: they are not the call being timed;
//! - macro invocations: their tokens are opaque until expanded.
//!
//! A bracket whose call submitted nothing the macro saw (submissions in a callee, say) keeps
//! ending at the function's exit, and its records say so.

use proc_macro2::TokenStream;
use quote::quote;
use syn::visit_mut::VisitMut;
use syn::{Expr, ExprMethodCall};

/// Rewrites the submissions in `block`, the body of a bracketed scope; each asks `ends` (the
/// scope, or an async body's handle: a local of that name) for the bracket's end. `p` is the
/// path to the expansion support. Returns how many submissions were rewritten.
pub fn rewrite(p: &TokenStream, ends: &syn::Ident, block: &mut syn::Block) -> usize {
    let mut r = SubmitRewriter { p, ends, rewritten: 0 };
    r.visit_block_mut(block);
    r.rewritten
}

struct SubmitRewriter<'a> {
    p: &'a TokenStream,
    ends: &'a syn::Ident,
    rewritten: usize,
}

impl SubmitRewriter<'_> {
    fn rewrite(&mut self, call: &ExprMethodCall) -> Expr {
        self.rewritten += 1;
        let p = self.p;
        let ends = self.ends;
        let receiver = &call.receiver;
        let arg = &call.args[0];
        let method = &call.method;
        let submit = |recv: TokenStream| {
            quote! {
                #[allow(unused_imports)]
                use #p::{SubmitOther as _, SubmitQueue as _};
                let __gpuspan_submit = (&#p::SubmitProbe(&#recv)).gpuspan_submit();
                #recv.#method(__gpuspan_submit.with_end(#arg, &mut #ends))
            }
        };
        if is_place(receiver) {
            // Evaluating a place twice (once borrowed to learn its type, once for the call)
            // has no effect of its own.
            let body = submit(quote!(#receiver));
            syn::parse_quote!({ #body })
        } else {
            // A value (a call's result): evaluated once, kept for the call.
            let body = submit(quote!(__gpuspan_recv));
            syn::parse_quote!({
                #[allow(unused_mut)]
                let mut __gpuspan_recv = #receiver;
                #body
            })
        }
    }
}

/// A place expression without side effects: a path, a field of one, a deref of one, or one
/// indexed by a path or a literal.
fn is_place(e: &Expr) -> bool {
    match e {
        Expr::Path(_) => true,
        Expr::Field(f) => is_place(&f.base),
        Expr::Paren(p) => is_place(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => is_place(&u.expr),
        Expr::Index(i) => is_place(&i.expr) && matches!(&*i.index, Expr::Path(_) | Expr::Lit(_)),
        _ => false,
    }
}

impl VisitMut for SubmitRewriter<'_> {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        match expr {
            Expr::Closure(_) | Expr::Async(_) => {}
            Expr::MethodCall(call) if call.method == "submit" && call.args.len() == 1 && call.turbofish.is_none() => {
                // Submissions nested in the receiver or the argument first.
                syn::visit_mut::visit_expr_method_call_mut(self, call);
                *expr = self.rewrite(call);
            }
            _ => syn::visit_mut::visit_expr_mut(self, expr),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
