//! Every way out of the timed code: the value leaving it is handed to the scope (an `Err`
//! marks the span as an error) and, with a command recorder, the query is closed in it first.

use super::operands::{recorder_tokens, user_call};
use crate::plan::{Plan, Resource};
use proc_macro2::TokenStream;
use quote::quote;
use syn::visit_mut::VisitMut;
use syn::Expr;

/// The recorder expression (when the scope's queries are in one) and the statement that hands
/// the scope the value leaving the timed code, closing the query in the recorder if any.
pub(super) fn recorder_and_exit(plan: &Plan, p: &TokenStream) -> (Option<TokenStream>, TokenStream) {
    let recorder = match &plan.resource {
        Resource::WgpuRecorder { recorder, .. } => Some(user_call(p, quote!(as_recorder), &recorder_tokens(recorder))),
        _ => None,
    };
    let exit = match &recorder {
        Some(r) => quote!(__gpuspan_scope.exit_recorder((&#p::Probe(&__gpuspan_out)).gpuspan_exit(), #r)),
        None => quote!(__gpuspan_scope.exit((&#p::Probe(&__gpuspan_out)).gpuspan_exit())),
    };
    (recorder, exit)
}

/// Rewrites the function's own exits (`return` and `?`) so that the scope sees the value leaving
/// the function (an `Err` marks the span as an error) and, with a command recorder, closes its
/// query in the recorder before the function returns. Closures, async blocks and nested items
/// have exits of their own and are left alone; so are macro bodies, which are opaque tokens.
pub(super) struct ExitRewriter {
    pub p: TokenStream,
    pub recorder: Option<TokenStream>,
    pub ret_ty: Option<TokenStream>,
    /// `return` leaves the code being timed (false for the block form, where it leaves the
    /// enclosing function: the scope then just closes).
    pub returns: bool,
    /// The `err`/`ret` events, emitted at each `return` as at the tail.
    pub events: super::Events,
}

impl ExitRewriter {
    fn on_exit(&self, value: TokenStream) -> TokenStream {
        let p = &self.p;
        match &self.recorder {
            Some(r) => quote!(__gpuspan_scope.exit_recorder((&#p::Probe(&#value)).gpuspan_exit(), #r)),
            None => quote!(__gpuspan_scope.exit((&#p::Probe(&#value)).gpuspan_exit())),
        }
    }
}

impl VisitMut for ExitRewriter {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        match expr {
            Expr::Closure(_) | Expr::Async(_) => {}
            Expr::Return(ret) if !self.returns => {
                if let Some(value) = &mut ret.expr {
                    self.visit_expr_mut(value);
                }
            }
            Expr::Return(ret) => {
                if let Some(value) = &mut ret.expr {
                    self.visit_expr_mut(value);
                    let on_exit = self.on_exit(quote!(__gpuspan_v));
                    let events = self.events.emit(&self.p, &quote!(__gpuspan_v));
                    let ty = &self.ret_ty;
                    **value = syn::parse_quote!({ let __gpuspan_v #ty = #value; #events #on_exit; __gpuspan_v });
                } else if self.recorder.is_some() {
                    let on_exit = self.on_exit(quote!(()));
                    *expr = syn::parse_quote!({ #on_exit; return });
                }
            }
            Expr::Try(t) => {
                self.visit_expr_mut(&mut t.expr);
                let inner = &t.expr;
                let p = &self.p;
                let on_try = match &self.recorder {
                    Some(r) => quote!(__gpuspan_scope.try_exit_recorder((&#p::Probe(&__gpuspan_v)).gpuspan_exit(), #r)),
                    None => quote!(__gpuspan_scope.try_exit((&#p::Probe(&__gpuspan_v)).gpuspan_exit())),
                };
                *t.expr = syn::parse_quote!(match #inner { __gpuspan_v => { #on_try; __gpuspan_v } });
            }
            _ => syn::visit_mut::visit_expr_mut(self, expr),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
