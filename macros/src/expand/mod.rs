//! Code generation: the instrumented function, wrapped in the runtime's on/off switch.
//!
//! The output is `::gpuspan::__private::select! { { instrumented } { original } }`. The runtime
//! crate decides which arm survives from its `enabled` feature, so with the feature off the item
//! is exactly what the user wrote: no static, no registration, no call.

mod exits;
mod operands;

use crate::parse::Args;
use crate::plan::{Backend, Bytes, Kind, Plan, Resource};
use crate::validate;
use exits::{recorder_and_exit, ExitRewriter};
use operands::{
    device_tokens, field_slots, krate, option_ref, queue_tokens, recorder_tokens, respan, stream_tokens, user_call,
};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Expr, ItemFn, ReturnType, Type};

/// Parse, validate and expand. On error the user's item is still emitted beside the error, so
/// the one real mistake is all they see.
pub fn run(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    match try_run(kind, args, item.clone()) {
        Ok(ts) => ts,
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(item);
            out
        }
    }
}

fn try_run(kind: Kind, args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let func = parse_fn(kind, item)?;
    let args: Args = syn::parse2(args)?;
    let plan = validate::plan(kind, args, &func)?;
    let krate = krate(&plan);
    let instrumented = instrument(&plan, func.clone());
    let off = off_arm(&plan, func);
    Ok(quote! {
        #krate::__private::select! { { #instrumented } { #off } }
    })
}

/// The block form, `kernel!("name", args.., { .. })`: the same scope around a block, for code in
/// `main`, loops and closures. `break`, `continue`, `return` and `?` keep their meaning in the
/// enclosing code; the scope closes however the block is left, and a `?` that leaves marks the
/// call as an error.
pub fn run_block(kind: Kind, input: TokenStream) -> TokenStream {
    match try_run_block(kind, input.clone()) {
        Ok(ts) => ts,
        Err(e) => {
            // Keep the user's block, when it is there, so that its own errors still show and its
            // value still types; nothing else, which would only add errors of its own.
            let block = input.into_iter().last().filter(
                |t| matches!(t, proc_macro2::TokenTree::Group(g) if g.delimiter() == proc_macro2::Delimiter::Brace),
            );
            let out = e.to_compile_error();
            let value = block.map(|b| quote!(#[allow(unused_braces)] let __gpuspan_out = #b; __gpuspan_out));
            quote!({ #out #value })
        }
    }
}

fn try_run_block(kind: Kind, input: TokenStream) -> syn::Result<TokenStream> {
    let BlockInput { name, args, block } = syn::parse2(input)?;
    let macro_name = kind.block_macro();
    // Validated like the attribute on a function without parameters: resources and sizes are
    // named explicitly.
    let func: ItemFn = syn::parse_quote!(
        fn block() {}
    );
    let args: Args = syn::parse2(quote!(name = #name, #args))?;
    let plan = validate::plan(kind, args, &func)?;
    let krate = krate(&plan);
    let ScopeParts { p, prelude, enter } = scope_parts(&plan, &format!("{macro_name}!({})", name.value()));
    let (recorder, exit) = recorder_and_exit(&plan, &p);
    let mut timed = block.clone();
    end_brackets_at_submissions(&plan, &p, &mut timed);
    // `return` leaves the enclosing function, whose type the block cannot name: only `?` is
    // inspected (its operand's type is known), every other exit just closes the scope.
    ExitRewriter { p: p.clone(), recorder, ret_ty: None, returns: false }.visit_block_mut(&mut timed);
    Ok(quote! {
        #krate::__private::select! {
            {{
                #prelude
                let mut __gpuspan_scope = #enter;
                #[allow(clippy::let_unit_value, unused_braces)]
                let __gpuspan_out = #timed;
                #[allow(unreachable_code)]
                #exit;
                __gpuspan_out
            }}
            { #block }
        }
    })
}

/// `"name", key = value, .., { block }`.
struct BlockInput {
    name: syn::LitStr,
    args: TokenStream,
    block: syn::Block,
}

impl syn::parse::Parse for BlockInput {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let name: syn::LitStr = input.parse().map_err(|e| {
            syn::Error::new(e.span(), "expected the scope's name first, as a string: `kernel!(\"step\", { .. })`")
        })?;
        let mut args = TokenStream::new();
        loop {
            if input.is_empty() {
                return Err(input.error("expected the block to time last: `kernel!(\"step\", { .. })`"));
            }
            input.parse::<syn::Token![,]>()?;
            if input.peek(syn::token::Brace) {
                let block: syn::Block = input.parse()?;
                input.parse::<Option<syn::Token![,]>>()?;
                if !input.is_empty() {
                    return Err(input.error("the block must be the last argument"));
                }
                return Ok(BlockInput { name, args, block });
            }
            if input.is_empty() {
                return Err(input.error("expected the block to time last: `{ .. }`"));
            }
            // One argument: everything up to the next top-level comma.
            let mut arg = TokenStream::new();
            while !input.is_empty() && !input.peek(syn::Token![,]) {
                arg.extend(std::iter::once(input.parse::<proc_macro2::TokenTree>()?));
            }
            args.extend(quote!(#arg,));
        }
    }
}

/// The function as written, plus `let _ = &x;` for each parameter the arguments use, so that a
/// parameter only named in `fields(...)` or `bytes = ...` does not warn as unused when
/// instrumentation is off. A borrow that is never read generates no machine code.
fn off_arm(plan: &Plan, mut func: ItemFn) -> ItemFn {
    let borrows = plan.used_params.iter().map(|p| -> syn::Stmt { syn::parse_quote!(let _ = &#p;) });
    func.block.stmts.splice(0..0, borrows);
    func
}

/// The item must be a function with a body; anything else is named in the error.
fn parse_fn(kind: Kind, item: TokenStream) -> syn::Result<ItemFn> {
    if let Ok(f) = syn::parse2::<ItemFn>(item.clone()) {
        return Ok(f);
    }
    let attr = kind.attr();
    if let Ok(f) = syn::parse2::<syn::TraitItemFn>(item.clone()) {
        let at = f.semi_token.map_or_else(|| f.sig.span(), |s| s.span());
        return Err(syn::Error::new(
            at,
            format!("{attr} needs a function body; put it on the implementation of this trait method"),
        ));
    }
    let item: syn::Item = syn::parse2(item)?;
    let (at, what) = match &item {
        syn::Item::Struct(s) => (s.struct_token.span(), "a struct"),
        syn::Item::Enum(e) => (e.enum_token.span(), "an enum"),
        syn::Item::Union(u) => (u.union_token.span(), "a union"),
        syn::Item::Const(c) => (c.const_token.span(), "a const item"),
        syn::Item::Static(s) => (s.static_token.span(), "a static"),
        syn::Item::ForeignMod(m) => {
            (m.abi.extern_token.span(), "an extern block (foreign functions have no body to time)")
        }
        syn::Item::Impl(i) => (i.impl_token.span(), "an impl block (put it on the methods)"),
        syn::Item::Trait(t) => (t.trait_token.span(), "a trait (put it on the methods of an implementation)"),
        syn::Item::Mod(m) => (m.mod_token.span(), "a module"),
        syn::Item::Type(t) => (t.type_token.span(), "a type alias"),
        syn::Item::Use(u) => (u.use_token.span(), "a use declaration"),
        syn::Item::Macro(m) => (m.mac.path.span(), "a macro invocation"),
        other => (other.span(), "this item"),
    };
    Err(syn::Error::new(at, format!("{attr} applies to functions, not to {what}")))
}

/// What every instrumented form shares: the path to the expansion support, the site's static
/// and registration, and the expression that opens the scope (or a closed one when off).
struct ScopeParts {
    p: TokenStream,
    prelude: TokenStream,
    enter: TokenStream,
}

fn scope_parts(plan: &Plan, fn_name: &str) -> ScopeParts {
    let krate = krate(plan);
    let p = quote!(#krate::__private);
    let name = &plan.name;
    let kind = match plan.kind {
        Kind::Kernel => quote!(#p::SiteKind::Kernel),
        Kind::Transfer => quote!(#p::SiteKind::Transfer),
    };
    let backend = match plan.resource.backend() {
        Backend::Host => quote!(#p::Backend::Host),
        Backend::Wgpu => quote!(#p::Backend::Wgpu),
        Backend::Cuda => quote!(#p::Backend::Cuda),
    };
    let direction = match plan.direction {
        Some(d) => {
            let v = format_ident!("{}", d.variant());
            quote!(::core::option::Option::Some(#p::Direction::#v))
        }
        None => quote!(::core::option::Option::None),
    };
    let threshold = match plan.threshold_us {
        Some(t) => quote!(::core::option::Option::Some(#t)),
        None => quote!(::core::option::Option::None),
    };
    let trace_all = plan.trace_all;
    let track_memory = plan.track_memory;
    let level = format_ident!("{}", plan.level.constant());
    let level = quote!(Level::#level);
    let kind_str = plan.kind.as_str();
    let backend_str = plan.resource.backend().as_str();
    let field_keys = plan.fields.iter().map(|f| {
        let parts = f.key.iter().map(|s| format_ident!("{}", s.to_string()));
        quote!(#(#parts).*)
    });
    let (field_lets, field_values) = field_slots(plan, &p);
    // Through a function rather than `as u64`, so that no cast lint fires in the user's code
    // and a non-integer gets a type error at the expression.
    let bytes = match &plan.bytes {
        Some(Bytes::Explicit(e)) => {
            let e = e.to_token_stream();
            let at = respan(&p, e.span());
            quote_spanned!(e.span()=> ::core::option::Option::Some(#at::byte_count(#e)))
        }
        Some(Bytes::SliceParam(n)) => {
            quote!(::core::option::Option::Some(#p::byte_count(::core::mem::size_of_val(#n))))
        }
        None => quote!(::core::option::Option::None),
    };

    // The site's constant facts (kind, backend) are in the target, part of the callsite's static
    // metadata, rather than fields every call would record and a formatting subscriber format;
    // exporters take them from the site.
    let target = format!("gpuspan::{kind_str}::{backend_str}");
    let span = quote! {
        #p::tracing::span!(
            target: #target,
            #p::tracing::#level,
            #name,
            error = #p::tracing::field::Empty,
            #(#field_keys = #field_values,)*
        )
    };
    let enter = match &plan.resource {
        Resource::None => quote!(#p::Scope::host(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes)),
        Resource::WgpuRecorder { recorder, device } => {
            let device = option_ref(&p, &device.as_ref().map(device_tokens), quote!(as_device), quote!(no_device));
            let recorder = user_call(&p, quote!(as_recorder), &recorder_tokens(recorder));
            quote!(#p::Scope::wgpu_recorder(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes, #recorder, #device))
        }
        Resource::WgpuQueue { queue, device } => {
            let device = option_ref(&p, &device.as_ref().map(device_tokens), quote!(as_device), quote!(no_device));
            let queue = user_call(&p, quote!(as_queue), &queue_tokens(queue));
            quote!(#p::Scope::wgpu_queue(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes, #queue, #device))
        }
        Resource::WgpuDevice { device } => {
            let device = device_tokens(device);
            let device = user_call(&p, quote!(as_device), &quote!(&#device));
            quote!(#p::Scope::wgpu_device(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes, #device))
        }
        Resource::WgpuAttachable { device } => {
            let device = device_tokens(device);
            let device = user_call(&p, quote!(as_device), &quote!(&#device));
            quote!(#p::Scope::wgpu_attachable(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes, #device))
        }
        Resource::Cuda { stream } => {
            let stream = option_ref(&p, &stream.as_ref().map(stream_tokens), quote!(as_stream), quote!(no_stream));
            quote!(#p::Scope::cuda(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes, #stream))
        }
    };

    let prelude = quote! {
        #[allow(unused_imports)]
        use #p::{ProbeExit as _, ProbeOther as _};
        static __GPUSPAN_SITE: #p::Site = #p::Site::new(#p::SiteDesc {
            name: #name,
            function: #fn_name,
            kind: #kind,
            backend: #backend,
            module_path: ::core::module_path!(),
            file: ::core::file!(),
            line: ::core::line!(),
            direction: #direction,
            threshold_us: #threshold,
            trace_all: #trace_all,
            track_memory: #track_memory,
        });
        #p::register_site!(__GPUSPAN_SITE);
    };
    // Off at run time: one relaxed load and a compare, no span, no argument evaluated; the
    // scope is opened out of line, so that the off path is the plain function's.
    let enter = quote! {
        if #p::might_be_on() {
            #p::open(|| {
                let __gpuspan_bytes: ::core::option::Option<u64> = #bytes;
                #(#field_lets)*
                let __gpuspan_span = #span;
                #enter
            })
        } else {
            #p::Scope::off()
        }
    };
    ScopeParts { p, prelude, enter }
}

fn instrument(plan: &Plan, mut func: ItemFn) -> TokenStream {
    let ScopeParts { p, prelude, enter } = scope_parts(plan, &func.sig.ident.to_string());

    let block = &mut func.block;
    if func.sig.asyncness.is_some() {
        // Name the async block's output type where it can be named, so that `?` inside it
        // infers its error conversion (the same trick as tracing-attributes).
        let fake_return = match &func.sig.output {
            ReturnType::Type(_, ty) if !contains_impl_trait(ty) => quote! {
                #[allow(unknown_lints, unreachable_code, clippy::diverging_sub_expression, clippy::let_unit_value, clippy::unreachable, clippy::empty_loop)]
                if false {
                    let __gpuspan_fake_return: #ty = loop {};
                    return __gpuspan_fake_return;
                }
            },
            _ => quote!(),
        };
        let handle = end_async_brackets_at_submissions(plan, &p, block);
        let stmts = &block.stmts;
        let timed = timed_future(&p, &prelude, &enter, handle, quote!({ #fake_return #(#stmts)* }));
        *block = syn::parse_quote!({ #timed });
        return func.into_token_stream();
    }
    // `#[async_trait]` has already turned the method into `Box::pin(async move { .. })`: time the
    // future, not the call that boxes it (tracing-attributes' `AsyncInfo` does the same).
    if let Some(inner) = async_trait_body(block) {
        let handle = end_async_brackets_at_submissions(plan, &p, &mut inner.block);
        let stmts = &inner.block.stmts;
        let timed = timed_future(&p, &prelude, &enter, handle, quote!({ #(#stmts)* }));
        inner.block = syn::parse_quote!({ #timed });
        return func.into_token_stream();
    }

    end_brackets_at_submissions(plan, &p, block);
    let (recorder, exit) = recorder_and_exit(plan, &p);
    let diverges = matches!(&func.sig.output, ReturnType::Type(_, t) if matches!(**t, Type::Never(_)));
    let named_return = match &func.sig.output {
        ReturnType::Type(_, ty) if !contains_impl_trait(ty) => Some(quote!(: #ty)),
        ReturnType::Type(..) => None,
        ReturnType::Default => Some(quote!(: ())),
    };
    let track_caller = func.attrs.iter().any(|a| a.path().is_ident("track_caller"));
    if let (Some(ret_ty), false, false) = (&named_return, diverges, track_caller) {
        // The body runs in a closure called once, so every exit (`return`, `?`, and those
        // hidden in macros such as `anyhow::bail!`) ends in the value probed below. The closure
        // is passed as `FnOnce`, so a body may return borrows of its `&mut` parameters.
        let body = &*block;
        *block = syn::parse_quote!({
            #prelude
            let mut __gpuspan_scope = #enter;
            #[allow(clippy::let_unit_value, clippy::redundant_closure_call)]
            let __gpuspan_out #ret_ty = #p::call_once(|| #body);
            #exit;
            __gpuspan_out
        });
        return func.into_token_stream();
    }
    // A return type that cannot be named (`impl Trait`), `-> !` or `#[track_caller]` (a closure
    // would change `Location::caller()`): the function's own exits are rewritten instead, so
    // exits inside macro calls are not seen.
    let mut rewriter =
        ExitRewriter { p: p.clone(), recorder: recorder.clone(), ret_ty: named_return.clone(), returns: true };
    rewriter.visit_block_mut(block);
    let body = &*block;
    *block = if diverges {
        syn::parse_quote!({
            #prelude
            let mut __gpuspan_scope = #enter;
            #body
        })
    } else {
        syn::parse_quote!({
            #prelude
            let mut __gpuspan_scope = #enter;
            #[allow(clippy::let_unit_value)]
            let __gpuspan_out #named_return = #body;
            #[allow(unreachable_code)]
            #exit;
            __gpuspan_out
        })
    };
    func.into_token_stream()
}

/// A queue-bracketed body's own submissions carry the bracket's end (`submit.rs`).
fn end_brackets_at_submissions(plan: &Plan, p: &TokenStream, block: &mut syn::Block) {
    if is_bracketed(plan) {
        crate::submit::rewrite(p, &format_ident!("__gpuspan_scope"), block);
    }
}

/// The same for an async body, whose scope is in the future wrapping it: the submissions use a
/// handle moved into the body. The statement that makes the handle, when any was rewritten.
fn end_async_brackets_at_submissions(plan: &Plan, p: &TokenStream, block: &mut syn::Block) -> Option<TokenStream> {
    let handle = format_ident!("__gpuspan_bracket");
    (is_bracketed(plan) && crate::submit::rewrite(p, &handle, block) > 0)
        .then(|| quote!(let mut #handle = __gpuspan_scope.bracket_handle();))
}

fn is_bracketed(plan: &Plan) -> bool {
    matches!(plan.resource, Resource::WgpuQueue { .. } | Resource::WgpuDevice { .. })
}

/// The statements of an async body that open the scope at the first poll, run `body` as a
/// future whose host span is entered per poll (the future stays `Send`), and probe its output.
/// `handle` makes the bracket handle the body's submissions use, when they use one.
fn timed_future(
    p: &TokenStream,
    prelude: &TokenStream,
    enter: &TokenStream,
    handle: Option<TokenStream>,
    body: TokenStream,
) -> TokenStream {
    quote! {
        #prelude
        #[allow(unused_mut)]
        let mut __gpuspan_scope = #enter;
        #handle
        let (__gpuspan_out, mut __gpuspan_scope) =
            #p::ScopedFuture::new(__gpuspan_scope, async move #body).await;
        __gpuspan_scope.exit((&#p::Probe(&__gpuspan_out)).gpuspan_exit());
        ::core::mem::drop(__gpuspan_scope);
        __gpuspan_out
    }
}

/// The `async move { .. }` block of a body shaped `Box::pin(async move { .. })` (what
/// `#[async_trait]` generates), if this is one.
fn async_trait_body(block: &mut syn::Block) -> Option<&mut syn::ExprAsync> {
    let Some(syn::Stmt::Expr(Expr::Call(call), None)) = block.stmts.last_mut() else { return None };
    let Expr::Path(f) = &*call.func else { return None };
    let segments: Vec<String> = f.path.segments.iter().map(|s| s.ident.to_string()).collect();
    if !segments.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    match call.args.first_mut() {
        Some(Expr::Async(inner)) if inner.capture.is_some() => Some(inner),
        _ => None,
    }
}

fn contains_impl_trait(ty: &Type) -> bool {
    struct Finder(bool);
    impl<'a> syn::visit::Visit<'a> for Finder {
        fn visit_type_impl_trait(&mut self, _: &'a syn::TypeImplTrait) {
            self.0 = true;
        }
    }
    let mut f = Finder(false);
    syn::visit::Visit::visit_type(&mut f, ty);
    f.0
}
