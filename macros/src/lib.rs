//! Attribute macros of [gpuspan](https://docs.rs/gpuspan). Depend on `gpuspan`, not on this
//! crate: it re-exports them, and decides through its `enabled` feature whether they instrument.
//!
//! The pipeline is `parse` (syntax into a typed AST) → `validate` (meaning, against the
//! function, into a typed `plan`) → `expand` (code, the only module that writes any).
//! Validation does not know whether instrumentation is on, so a misuse is the same error either
//! way.

mod expand;
mod parse;
mod passes;
mod plan;
mod submit;
mod validate;

use plan::Kind;
use proc_macro::TokenStream;

/// Times a function that encodes or launches GPU work. See `gpuspan::gpu_kernel` for the
/// arguments.
#[proc_macro_attribute]
pub fn gpu_kernel(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::run(Kind::Kernel, args.into(), item.into()).into()
}

/// Times a function that moves data between host and device. See `gpuspan::gpu_transfer` for
/// the arguments.
#[proc_macro_attribute]
pub fn gpu_transfer(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::run(Kind::Transfer, args.into(), item.into()).into()
}

/// Times a block that encodes or launches GPU work. See `gpuspan::kernel!`.
#[proc_macro]
pub fn kernel(input: TokenStream) -> TokenStream {
    expand::run_block(Kind::Kernel, input.into()).into()
}

/// Times a block that moves data between host and device. See `gpuspan::transfer!`.
#[proc_macro]
pub fn transfer(input: TokenStream) -> TokenStream {
    expand::run_block(Kind::Transfer, input.into()).into()
}

/// The marker an expansion of `#[gpu_kernel]`/`#[gpu_transfer]` leaves on its function, so that
/// a second gpuspan attribute below it, under any name, is an error, and so is a
/// `#[tracing::instrument]` below it (whose expansion runs before this marker's). Its argument is
/// the attribute that left it. Otherwise it returns the function unchanged.
#[doc(hidden)]
#[proc_macro_attribute]
pub fn __instrumented(args: TokenStream, item: TokenStream) -> TokenStream {
    let item2: proc_macro2::TokenStream = item.clone().into();
    let body = syn::parse2::<syn::ItemFn>(item2).ok().map(|f| quote::ToTokens::to_token_stream(&f.block));
    if body.is_some_and(validate::shape::generated_by_instrument) {
        // At the argument, which the expansion spanned at the user's attribute: the error then
        // names `gpu_kernel`, not this marker, as the macro it comes from.
        let args: proc_macro2::TokenStream = args.into();
        let at = args.clone().into_iter().next().map_or_else(proc_macro2::Span::call_site, |t| t.span());
        let err = syn::Error::new(at, validate::shape::instrument_too(&format!("#[{args}]")));
        let mut out: TokenStream = err.to_compile_error().into();
        out.extend(item);
        return out;
    }
    item
}
