//! Code generation: the instrumented function, wrapped in the runtime's on/off switch.
//!
//! The output is `::gpuspan::__private::select! { { instrumented } { original } }`. The runtime
//! crate decides which arm survives from its `enabled` feature, so with the feature off the item
//! is exactly what the user wrote: no static, no registration, no call. Both arms carry the
//! marker `#[__private::instrumented]`, which returns the function unchanged: it is how a second
//! gpuspan attribute under another name, or a `#[tracing::instrument]` below, is told.

mod checks;
mod exits;
mod operands;

use crate::parse::Args;
use crate::plan::{Backend, Bytes, FieldKey, Kind, Plan, Resource, Text};
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
    let mut func = func;
    let name = format_ident!("{}", kind.attr().trim_start_matches("#[").trim_end_matches(']'));
    func.attrs.push(syn::parse_quote!(#[#krate::__private::instrumented(#name)]));
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
    let ScopeParts { p, prelude, enter } = scope_parts(&plan, &format!("{macro_name}!({})", name.value()), false);
    let (recorder, exit) = recorder_and_exit(&plan, &p);
    let mut timed = block.clone();
    time_passes(&plan, &p, &mut timed);
    end_brackets_at_submissions(&plan, &p, &mut timed);
    // `return` leaves the enclosing function, whose type the block cannot name: only `?` is
    // inspected (its operand's type is known), every other exit just closes the scope.
    let events = Events::new(&plan);
    let tail_events = events.emit(&p, &quote!(__gpuspan_out));
    ExitRewriter { p: p.clone(), recorder, ret_ty: None, returns: false, events }.visit_block_mut(&mut timed);
    // Off: the block's value through a `match` (not braces around it, which `unused_braces`
    // flags where the call is an argument), after the same checks as the attribute's off arm
    // and a call that is not `const`, so that a block in a const context fails in both modes.
    let mut checks = checks::off_checks(&plan, &p);
    let runtime_only = respan(&quote!(#p::gpu_scope_opens_at_run_time), name.span());
    checks.push(quote_spanned!(name.span()=> #runtime_only();));
    let dead = dead_code(&plan, Vec::new(), checks);
    Ok(quote! {
        #krate::__private::select! {
            {{
                #prelude
                let mut __gpuspan_scope = #enter;
                #[allow(clippy::let_unit_value, unused_braces)]
                let __gpuspan_out = #timed;
                #[allow(unreachable_code)]
                #tail_events
                #[allow(unreachable_code)]
                #exit;
                __gpuspan_out
            }}
            {{
                #dead
                match #block {
                    #[allow(unreachable_code)]
                    __gpuspan_out => __gpuspan_out,
                }
            }}
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
///
/// The expressions only the instrumented code evaluates (field values, `parent`, a constant
/// name) are named in an `if false` block, so that an import or a constant used only there does
/// not warn as unused either; dead code, it generates nothing (off-check compares the machine
/// code).
fn off_arm(plan: &Plan, mut func: ItemFn) -> ItemFn {
    let mut stmts: Vec<syn::Stmt> = plan.used_params.iter().map(|p| syn::parse_quote!(let _ = &#p;)).collect();
    // `parent` and `follows_from` are typed through helpers that take what `tracing` takes
    // (`parent = None` needs that type to infer).
    let krate = krate(plan);
    let links: Vec<TokenStream> = [
        plan.parent.as_ref().map(|e| quote!(#krate::__private::parent(#e);)),
        plan.follows_from.as_ref().map(|e| quote!(#krate::__private::follows_from(#e);)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let checks = checks::off_checks(plan, &quote!(#krate::__private));
    if let Some(dead) = dead_code(plan, links, checks) {
        stmts.push(syn::parse_quote!(#dead));
    }
    func.block.stmts.splice(0..0, stmts);
    func
}

/// The off arm's `if false { .. }`: the argument expressions only the instrumented code
/// evaluates, named so that what they use is used, and type-checked as the instrumented code
/// types them. Dead code: no machine code (off-check compares it).
fn dead_code(plan: &Plan, links: Vec<TokenStream>, checks: Vec<TokenStream>) -> Option<TokenStream> {
    if plan.off_refs.is_empty() && links.is_empty() && checks.is_empty() {
        return None;
    }
    let refs = plan.off_refs.iter().map(operands::operand);
    Some(quote! {
        #[allow(unreachable_code, unused_variables, clippy::all)]
        if false {
            #(let _ = &#refs;)*
            #(#links)*
            #(#checks)*
        }
    })
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

/// `idle`: an async call's scope, whose span the future enters per poll (`__private::open_idle`).
fn scope_parts(plan: &Plan, fn_name: &str, idle: bool) -> ScopeParts {
    let krate = krate(plan);
    let p = quote!(#krate::__private);
    let name = text(&plan.name);
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
    let field_keys = plan.fields.iter().map(|f| match &f.key {
        FieldKey::Dotted(d) => {
            let parts = d.iter().map(|s| syn::Ident::new(&s.to_string(), s.span()));
            quote!(#(#parts).*)
        }
        FieldKey::Const(e) => quote!({ #e }),
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

    // The target is the user's module, as with `#[tracing::instrument]`, so that their filter
    // directives select their functions. The site's constant facts (kind, backend) are the name
    // of a field never recorded, `gpuspan.<kind>.<backend>`: part of the callsite's static
    // metadata, which is how the runtime tells its own spans apart, at no cost per call (a
    // subscriber sees no value for it). Exporters take them from the site.
    let marker = syn::Ident::new(kind_str, proc_macro2::Span::call_site());
    let marker_backend = syn::Ident::new(backend_str, proc_macro2::Span::call_site());
    let target = match &plan.target {
        Some(t) => text(t),
        None => quote!(::core::module_path!()),
    };
    let parent = plan.parent.as_ref().map(|e| quote!(parent: #e,));
    let follows_from = plan.follows_from.as_ref().map(|e| {
        quote! {
            if !__gpuspan_span.is_disabled() {
                for __gpuspan_cause in #e {
                    __gpuspan_span.follows_from(__gpuspan_cause);
                }
            }
        }
    });
    let span = quote! {
        #p::tracing::span!(
            target: #target,
            #parent
            #p::tracing::#level,
            #name,
            #(#field_keys = #field_values,)*
            error = #p::tracing::field::Empty,
            gpuspan.#marker.#marker_backend = #p::tracing::field::Empty,
        )
    };
    let enter = match &plan.resource {
        Resource::None => quote!(#p::Scope::host(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes)),
        // The scope call takes the resource's span: the runtime's bound on it (a wgpu major's
        // queue, ...) then fails where the conversion's does, and rustc reports it once. A
        // `device = ...` goes in as written: its bound names the major of the other resource.
        Resource::WgpuRecorder { recorder, device } => {
            let device = device_option(&p, device.as_ref());
            let recorder = user_call(&p, quote!(as_recorder), &recorder_tokens(recorder));
            scope_call(&p, quote!(wgpu_recorder), quote!(#recorder, #device), recorder.span())
        }
        Resource::WgpuQueue { queue, device } => {
            let device = device_option(&p, device.as_ref());
            let queue = user_call(&p, quote!(as_queue), &queue_tokens(queue));
            scope_call(&p, quote!(wgpu_queue), quote!(#queue, #device), queue.span())
        }
        Resource::WgpuDevice { device } => {
            let device = device_tokens(device);
            let device = user_call(&p, quote!(as_device), &quote!(&#device));
            scope_call(&p, quote!(wgpu_device), device.clone(), device.span())
        }
        Resource::WgpuAttachable { device } => {
            let device = device_tokens(device);
            let device = user_call(&p, quote!(as_device), &quote!(&#device));
            scope_call(&p, quote!(wgpu_attachable), device.clone(), device.span())
        }
        Resource::Cuda { stream } => {
            let stream = option_ref(&p, &stream.as_ref().map(stream_tokens), quote!(as_stream), quote!(no_stream));
            quote!(#p::Scope::cuda(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes, #stream))
        }
    };

    let prelude = quote! {
        #[allow(unused_imports)]
        use #p::{FieldDebug as _, FieldOther as _, ProbeExit as _, ProbeOther as _};
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
    let open = if idle { quote!(open_idle) } else { quote!(open) };
    let enter = quote! {
        if #p::might_be_on() {
            #p::#open(|| {
                let __gpuspan_bytes: ::core::option::Option<u64> = #bytes;
                #(#field_lets)*
                let __gpuspan_span = #span;
                #follows_from
                #enter
            })
        } else {
            #p::Scope::off()
        }
    };
    ScopeParts { p, prelude, enter }
}

/// A name or target as the generated code writes it: the literal, or the user's constant.
fn text(t: &Text) -> TokenStream {
    match t {
        Text::Str(s) => quote!(#s),
        Text::Const(id) => quote!(#id),
    }
}

fn instrument(plan: &Plan, mut func: ItemFn) -> TokenStream {
    let fn_name = func.sig.ident.to_string();
    let events = Events::new(plan);

    if func.sig.asyncness.is_some() {
        let ScopeParts { p, prelude, enter } = scope_parts(plan, &fn_name, true);
        let block = &mut func.block;
        // Name the async block's output type where it can be named, so that `?` inside it
        // infers its error conversion (the same trick as tracing-attributes).
        // Spanned at the return type, so that a mismatch says "expected because of this": `()`
        // at the function's name (rustc's "default return type"); an `impl Trait` inside the
        // type becomes `_`, as tracing-attributes erases it.
        let fake_return: Option<Type> = match &func.sig.output {
            ReturnType::Default => Some(syn::parse_quote_spanned!(func.sig.ident.span()=> ())),
            ReturnType::Type(_, ty) => Some(erase_impl_trait((**ty).clone())),
        };
        let fake_return = match fake_return {
            Some(ty) => quote_spanned! {ty.span()=>
                #[allow(unknown_lints, unreachable_code, clippy::diverging_sub_expression, clippy::let_unit_value, clippy::unreachable, clippy::empty_loop)]
                if false {
                    let __gpuspan_fake_return: #ty = loop {};
                    return __gpuspan_fake_return;
                }
            },
            _ => quote!(),
        };
        time_passes(plan, &p, block);
        let handle = end_async_brackets_at_submissions(plan, &p, block);
        let brace = block.brace_token;
        let stmts = &block.stmts;
        let body = quote_spanned!(brace.span.join()=> { #fake_return #(#stmts)* });
        let timed = timed_future(&p, &prelude, &enter, handle, &events, body);
        *block = syn::parse_quote_spanned!(brace.span.join()=> { #timed });
        block.brace_token = brace;
        return func.into_token_stream();
    }
    // A function that returns a future it builds last, `async move { .. }` (with an `impl
    // Future` return) or `Box::pin(async move { .. })` (what `#[async_trait]` generates): time
    // the future, not the call that builds it (tracing-attributes' `AsyncInfo`). As in
    // `tracing`, the block becomes `async move`.
    if let Some(inner) = returned_future(&mut func) {
        let ScopeParts { p, prelude, enter } = scope_parts(plan, &fn_name, true);
        time_passes(plan, &p, &mut inner.block);
        let handle = end_async_brackets_at_submissions(plan, &p, &mut inner.block);
        let brace = inner.block.brace_token;
        let stmts = &inner.block.stmts;
        let body = quote_spanned!(brace.span.join()=> { #(#stmts)* });
        let timed = timed_future(&p, &prelude, &enter, handle, &events, body);
        inner.capture = Some(Default::default());
        inner.block = syn::parse_quote_spanned!(brace.span.join()=> { #timed });
        inner.block.brace_token = brace;
        return func.into_token_stream();
    }

    let ScopeParts { p, prelude, enter } = scope_parts(plan, &fn_name, false);
    let block = &mut func.block;
    time_passes(plan, &p, block);
    end_brackets_at_submissions(plan, &p, block);
    let (recorder, exit) = recorder_and_exit(plan, &p);
    let diverges = matches!(&func.sig.output, ReturnType::Type(_, t) if matches!(**t, Type::Never(_)));
    let named_return = match &func.sig.output {
        ReturnType::Type(_, ty) if !contains_impl_trait(ty) => Some(quote!(: #ty)),
        ReturnType::Type(..) => None,
        ReturnType::Default => Some(quote!(: ())),
    };
    let track_caller = func.attrs.iter().any(|a| a.path().is_ident("track_caller"));
    let brace = block.brace_token;
    let tail_events = events.emit(&p, &quote!(__gpuspan_out));
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
            #tail_events
            #exit;
            __gpuspan_out
        });
        block.brace_token = brace;
        return func.into_token_stream();
    }
    // A return type that cannot be named (`impl Trait`), `-> !` or `#[track_caller]` (a closure
    // would change `Location::caller()`): the function's own exits are rewritten instead, so
    // exits inside macro calls are not seen.
    let mut rewriter = ExitRewriter {
        p: p.clone(),
        recorder: recorder.clone(),
        ret_ty: named_return.clone(),
        returns: true,
        events: events.clone(),
    };
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
            #tail_events
            #[allow(unreachable_code)]
            #exit;
            __gpuspan_out
        })
    };
    block.brace_token = brace;
    func.into_token_stream()
}

/// The events of `err` and `ret`, emitted as `#[tracing::instrument]` emits them: an `Err` with
/// `Display` (or `Debug`) at ERROR (or the level given), the returned value (the `Ok` value with
/// `err` too) with `Debug` (or `Display`) at the span's level, to the span's target, while the span
/// is entered.
#[derive(Clone)]
pub(super) struct Events {
    target: TokenStream,
    err: Option<(syn::Ident, bool)>,
    ret: Option<(syn::Ident, bool)>,
}

impl Events {
    fn new(plan: &Plan) -> Events {
        let target = match &plan.target {
            Some(t) => text(t),
            None => quote!(::core::module_path!()),
        };
        let level = |e: &crate::plan::Event| (format_ident!("{}", e.level.constant()), e.display);
        Events { target, err: plan.err.as_ref().map(level), ret: plan.ret.as_ref().map(level) }
    }

    /// The statement emitting the events for `value` (a place of the returned type); empty
    /// without `err` or `ret`.
    pub(super) fn emit(&self, p: &TokenStream, value: &TokenStream) -> TokenStream {
        let target = &self.target;
        let event = |(level, display): &(syn::Ident, bool), key: TokenStream, v: TokenStream| {
            let sigil = if *display { quote!(%) } else { quote!(?) };
            quote!(#p::tracing::event!(target: #target, #p::tracing::Level::#level, #key = #sigil #v))
        };
        match (&self.err, &self.ret) {
            (None, None) => quote!(),
            (None, Some(r)) => {
                let ev = event(r, quote!(return), quote!(__gpuspan_ret));
                quote!({ let __gpuspan_ret = &#value; #ev; })
            }
            (Some(e), ret) => {
                let err = event(e, quote!(error), quote!(__gpuspan_err));
                let ok = ret.as_ref().map(|r| event(r, quote!(return), quote!(__gpuspan_ok)));
                let ok_arm = match ok {
                    Some(ev) => quote!(::core::result::Result::Ok(__gpuspan_ok) => { #ev; }),
                    None => quote!(::core::result::Result::Ok(_) => {}),
                };
                quote! {
                    #[allow(clippy::unit_arg)]
                    match &#value {
                        #ok_arm
                        ::core::result::Result::Err(__gpuspan_err) => { #err; }
                    }
                }
            }
        }
    }
}

/// A wgpu-timed body's passes get gpuspan's timestamp writes where the device has no
/// in-encoder timestamps (`passes.rs`).
fn time_passes(plan: &Plan, p: &TokenStream, block: &mut syn::Block) {
    if plan.time_passes {
        crate::passes::rewrite(p, block);
    }
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
/// future whose host span is entered per poll and for its drop (the future stays `Send`), emit
/// the `err`/`ret` events inside it, and probe its output. `handle` makes the bracket handle the
/// body's submissions use, when they use one.
fn timed_future(
    p: &TokenStream,
    prelude: &TokenStream,
    enter: &TokenStream,
    handle: Option<TokenStream>,
    events: &Events,
    body: TokenStream,
) -> TokenStream {
    let emit = events.emit(p, &quote!(__gpuspan_v));
    let inner = if emit.is_empty() {
        quote!(async move #body)
    } else {
        quote!(async move {
            let __gpuspan_v = async move #body.await;
            #emit
            __gpuspan_v
        })
    };
    quote! {
        #prelude
        #[allow(unused_mut)]
        let mut __gpuspan_scope = #enter;
        #handle
        let (__gpuspan_out, mut __gpuspan_scope) =
            #p::ScopedFuture::new(__gpuspan_scope, #inner).await;
        __gpuspan_scope.exit((&#p::Probe(&__gpuspan_out)).gpuspan_exit());
        ::core::mem::drop(__gpuspan_scope);
        __gpuspan_out
    }
}

/// The future a non-async function builds last and returns, as tracing-attributes'
/// `AsyncInfo` finds it: a tail `async { .. }` block when the return type is `impl Future`, or
/// `Box::pin(async { .. })` (what `#[async_trait]` generates).
fn returned_future(func: &mut ItemFn) -> Option<&mut syn::ExprAsync> {
    let returns_impl_future = match &func.sig.output {
        ReturnType::Type(_, ty) => match &**ty {
            Type::ImplTrait(t) => t.bounds.iter().any(|b| match b {
                syn::TypeParamBound::Trait(t) => t.path.segments.last().is_some_and(|s| s.ident == "Future"),
                _ => false,
            }),
            _ => false,
        },
        ReturnType::Default => false,
    };
    let Some(syn::Stmt::Expr(last, None)) = func.block.stmts.last_mut() else { return None };
    match last {
        Expr::Async(inner) if returns_impl_future => Some(inner),
        Expr::Call(call) => {
            let Expr::Path(f) = &*call.func else { return None };
            let segments: Vec<String> = f.path.segments.iter().map(|s| s.ident.to_string()).collect();
            if !segments.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
                return None;
            }
            match call.args.first_mut() {
                Some(Expr::Async(inner)) => Some(inner),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `ty` with each `impl Trait` replaced by `_`, so that it can annotate a `let`.
fn erase_impl_trait(mut ty: Type) -> Type {
    struct Eraser;
    impl VisitMut for Eraser {
        fn visit_type_mut(&mut self, t: &mut Type) {
            if let Type::ImplTrait(i) = t {
                *t = Type::Infer(syn::TypeInfer { underscore_token: syn::Token![_](i.impl_token.span) });
            } else {
                syn::visit_mut::visit_type_mut(self, t);
            }
        }
    }
    Eraser.visit_type_mut(&mut ty);
    ty
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

/// `Scope::<func>(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes, <resources>)`, the call (not
/// its arguments) at `span`.
fn scope_call(p: &TokenStream, func: TokenStream, resources: TokenStream, span: proc_macro2::Span) -> TokenStream {
    let path = operands::respan(&quote!(#p::Scope::#func), span);
    let args = quote!(&__GPUSPAN_SITE, __gpuspan_span, __gpuspan_bytes, #resources);
    quote_spanned!(span=> #path(#args))
}

/// A `device = ...` next to a recorder or queue, as written and at its own span (the scope's
/// bound on it names the other resource's major), or the runtime's typed `None`.
fn device_option(p: &TokenStream, device: Option<&crate::plan::Operand>) -> TokenStream {
    match device.map(device_tokens) {
        Some(t) => {
            let span = t.span();
            let call = user_call(p, quote!(device_as_written), &quote_spanned!(span=> &#t));
            quote_spanned!(span=> ::core::option::Option::Some(#call))
        }
        None => quote!(#p::no_device()),
    }
}
