//! Attribute macros of [gpuspan](https://docs.rs/gpuspan). Depend on `gpuspan`, not on this
//! crate: it re-exports them, and decides through its `enabled` feature whether they instrument.
//!
//! The pipeline is `parse` (syntax into a typed AST) → `validate` (meaning, against the
//! function, into a typed `plan`) → `expand` (code, the only module that writes any).
//! Validation does not know whether instrumentation is on, so a misuse is the same error either
//! way.

mod expand;
mod parse;
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
