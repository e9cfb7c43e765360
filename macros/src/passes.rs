//! The passes a wgpu-timed body begins: each `RECV.begin_compute_pass(ARG)` and
//! `RECV.begin_render_pass(ARG)` gets its descriptor through `gpuspan::__private::wgpu_pass`,
//! which, on a device without in-encoder timestamps (Metal, WebGPU), fills its
//! `timestamp_writes` for the innermost scope timed by its passes (runtime
//! `wgpu/backend/passes.rs`), and elsewhere passes a copy. The receiver and the call stay as
//! written, so method resolution is the user's; only the argument changes, and its type is
//! still inferred from the method (`&Default::default()` keeps working).
//!
//! Not rewritten, as for submissions (`submit.rs`): closures and async blocks, nested items,
//! macro invocations.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::Expr;

/// Rewrites the pass descriptors in `block`; `p` is the path to the expansion support.
pub fn rewrite(p: &TokenStream, block: &mut syn::Block) {
    PassRewriter { p }.visit_block_mut(block);
}

struct PassRewriter<'a> {
    p: &'a TokenStream,
}

impl VisitMut for PassRewriter<'_> {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        match expr {
            Expr::Closure(_) | Expr::Async(_) => {}
            Expr::MethodCall(call)
                if (call.method == "begin_compute_pass" || call.method == "begin_render_pass")
                    && call.args.len() == 1
                    && call.turbofish.is_none() =>
            {
                syn::visit_mut::visit_expr_method_call_mut(self, call);
                let p = self.p;
                let arg = &call.args[0];
                let timed: Expr = syn::parse_quote_spanned! {arg.span()=>
                    &#p::wgpu_pass(&mut ::core::option::Option::None, #arg)
                };
                call.args[0] = timed;
            }
            _ => syn::visit_mut::visit_expr_mut(self, expr),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
