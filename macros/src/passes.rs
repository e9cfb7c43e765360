//! The passes a wgpu-timed body begins: each `RECV.begin_compute_pass(ARG)` and
//! `RECV.begin_render_pass(ARG)` becomes `RECV.__gpuspan_pass_receiver().begin_compute_pass(ARG)`,
//! and the body imports `gpuspan::__private::passes::*` (unnamed traits). Method resolution then
//! chooses by the receiver's type (`__private::PassReceiver`): on a wgpu encoder, or a guard
//! that dereferences to one, the descriptor gets gpuspan's `timestamp_writes` for the innermost
//! scope timed by its passes where the device has no in-encoder timestamps (Metal, WebGPU;
//! runtime `wgpu/backend/passes.rs`); any other type's method of that name is called as written.
//! The argument is untouched, so its type is still inferred from the method
//! (`&Default::default()` keeps working).
//!
//! Not rewritten, as for submissions (`submit.rs`): closures and async blocks, nested items,
//! macro invocations.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::Expr;

/// Rewrites the pass receivers in `block`; `p` is the path to the expansion support.
pub fn rewrite(p: &TokenStream, block: &mut syn::Block) {
    let mut rewriter = PassRewriter { rewritten: false };
    rewriter.visit_block_mut(block);
    if rewriter.rewritten {
        let import: syn::Stmt = syn::parse_quote! {
            #[allow(unused_imports, clippy::wildcard_imports)]
            use #p::passes::*;
        };
        block.stmts.insert(0, import);
    }
}

struct PassRewriter {
    rewritten: bool,
}

impl VisitMut for PassRewriter {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        match expr {
            Expr::Closure(_) | Expr::Async(_) => {}
            Expr::MethodCall(call)
                if (call.method == "begin_compute_pass" || call.method == "begin_render_pass")
                    && call.args.len() == 1
                    && call.turbofish.is_none() =>
            {
                syn::visit_mut::visit_expr_method_call_mut(self, call);
                let receiver = &call.receiver;
                let probed: Expr = syn::parse_quote_spanned! {receiver.span()=>
                    #receiver.__gpuspan_pass_receiver()
                };
                *call.receiver = probed;
                self.rewritten = true;
            }
            _ => syn::visit_mut::visit_expr_mut(self, expr),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
