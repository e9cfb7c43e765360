//! What the parameter list offers: each parameter classified by its type (a recorder, a queue,
//! a stream, a slice...), which of them `untimed` keeps out of inference, and which ones the arguments
//! use.

use super::args::Given;
use super::Errors;
use crate::plan::{Field, FieldValue};
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{FnArg, Ident, ItemFn, Pat, Type};

/// One named parameter and what its type makes it.
pub(super) struct Param<'a> {
    pub name: &'a Ident,
    pub class: ParamClass,
}

#[derive(PartialEq, Eq, Clone, Copy)]
pub(super) enum ParamClass {
    Recorder,
    Queue,
    Device,
    Stream,
    /// A CUDA context: the function launches CUDA work on streams it makes itself.
    CudaContext,
    /// A command encoder or pass the function cannot have queries closed in: by shared
    /// reference (queries need `&mut`) or by value (it may be finished in the body).
    UnusableRecorder,
    Slice,
    Other,
}

pub(super) fn classify_all(func: &ItemFn) -> Vec<Param<'_>> {
    func.sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(pi) => Some(Param { name: &pi.ident, class: classify(&pt.ty) }),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect()
}

/// A name the function binds from its parameters (`self`, and each name inside a pattern), as
/// `tracing` records them: `as_value` for the types it records as values (integers, `bool`,
/// `str`, `String`, ...), else with `Debug`.
pub(super) struct Binding {
    pub name: Ident,
    pub as_value: bool,
}

pub(super) fn bindings(func: &ItemFn) -> Vec<Binding> {
    let mut out = Vec::new();
    for arg in &func.sig.inputs {
        match arg {
            FnArg::Receiver(r) => out.push(Binding { name: Ident::new("self", r.self_token.span), as_value: false }),
            FnArg::Typed(pt) => pattern_names(&pt.pat, records_as_value(&pt.ty), &mut out),
        }
    }
    out
}

fn pattern_names(pat: &Pat, as_value: bool, out: &mut Vec<Binding>) {
    match pat {
        Pat::Ident(p) => out.push(Binding { name: p.ident.clone(), as_value }),
        Pat::Reference(r) => pattern_names(&r.pat, as_value, out),
        // The types of the parts of a pattern are not written: `Debug`, as `tracing` does.
        Pat::Struct(s) => s.fields.iter().for_each(|f| pattern_names(&f.pat, false, out)),
        Pat::Tuple(t) => t.elems.iter().for_each(|p| pattern_names(p, false, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pattern_names(p, false, out)),
        _ => {}
    }
}

/// `tracing-attributes`' list of the types recorded as values rather than with `Debug`.
fn records_as_value(ty: &Type) -> bool {
    const TYPES_FOR_VALUE: &[&str] = &[
        "bool",
        "str",
        "u8",
        "i8",
        "u16",
        "i16",
        "u32",
        "i32",
        "u64",
        "i64",
        "u128",
        "i128",
        "f32",
        "f64",
        "usize",
        "isize",
        "String",
        "NonZeroU8",
        "NonZeroI8",
        "NonZeroU16",
        "NonZeroI16",
        "NonZeroU32",
        "NonZeroI32",
        "NonZeroU64",
        "NonZeroI64",
        "NonZeroU128",
        "NonZeroI128",
        "NonZeroUsize",
        "NonZeroIsize",
        "Wrapping",
    ];
    match ty {
        Type::Path(p) => {
            p.path.segments.last().is_some_and(|s| TYPES_FOR_VALUE.contains(&s.ident.to_string().as_str()))
        }
        Type::Reference(r) => records_as_value(&r.elem),
        _ => false,
    }
}

/// Every `skip(x)` and `untimed(x)` names a parameter (`self` included).
pub(super) fn check_skips(given: &Given<'_>, bindings: &[Binding], errors: &mut Errors) {
    let named = given.skip.iter().map(|s| ("skip", s)).chain(given.untimed.iter().map(|s| ("untimed", s)));
    for (arg, s) in named {
        if !bindings.iter().any(|b| b.name == **s) {
            errors.push(syn::Error::new(s.span(), format!("`{arg}({s})`: the function has no parameter named `{s}`")));
        }
    }
}

/// The parameters left to inference: all of them, less those `untimed` names. `skip` and
/// `skip_all` do not count: in a drop-in for `#[instrument]` they say which parameters are
/// recorded, and a user who skips a parameter to avoid `Debug` must not lose its GPU time.
pub(super) struct Usable<'p, 'a> {
    params: Vec<&'p Param<'a>>,
}

impl<'p, 'a> Usable<'p, 'a> {
    /// `func` hands back a pass (its return type names `ComputePass` or `RenderPass`): the pass
    /// still borrows the encoder it was begun on when the call returns, where a query timed in
    /// that encoder would be closed, so its encoder and pass parameters time nothing (as if
    /// `untimed`): the call is timed otherwise (a queue, else the host), and the same program
    /// compiles with measuring on and off (issue 42).
    pub fn new(params: &'p [Param<'a>], given: &Given<'_>, func: &syn::ItemFn) -> Self {
        let hands_back_a_pass = hands_back_a_pass(&func.sig.output);
        let params = params
            .iter()
            .filter(|p| !given.untimed.contains(&p.name))
            .filter(|p| !(hands_back_a_pass && matches!(p.class, ParamClass::Recorder | ParamClass::UnusableRecorder)))
            .collect();
        Usable { params }
    }

    pub fn of(&self, class: ParamClass) -> Vec<&'p Param<'a>> {
        self.params.iter().filter(|p| p.class == class).copied().collect()
    }
}

/// The parameters the arguments use: those recorded by `fields(x)`, then those named inside an
/// argument's or a field's expression, each once.
pub(super) fn used(given: &Given<'_>, fields: &[Field], params: &[Param<'_>]) -> Vec<Ident> {
    let mut out: Vec<Ident> = Vec::new();
    for f in fields {
        if let FieldValue::Param(ident) | FieldValue::Auto { param: ident, .. } = &f.value {
            if !out.contains(ident) {
                out.push(ident.clone());
            }
        }
    }
    let field_exprs = fields.iter().filter_map(|f| match &f.value {
        FieldValue::Expr(e, _) => Some(e),
        _ => None,
    });
    for e in given.exprs.iter().copied().chain(field_exprs) {
        collect(e.to_token_stream(), params, &mut out);
    }
    out
}

/// Adds to `out` each parameter whose name appears in `tokens` (once).
fn collect(tokens: TokenStream, params: &[Param<'_>], out: &mut Vec<Ident>) {
    for tt in tokens {
        match tt {
            proc_macro2::TokenTree::Ident(i) => {
                if let Some(p) = params.iter().find(|p| *p.name == i) {
                    if !out.contains(p.name) {
                        out.push(p.name.clone());
                    }
                }
            }
            proc_macro2::TokenTree::Group(g) => collect(g.stream(), params, out),
            _ => {}
        }
    }
}

/// Recognises resource types by their last path segment, behind references and `Arc`/`Rc`/`Box`.
fn classify(ty: &Type) -> ParamClass {
    let (mut ty, mut refs, mut mutable) = (ty, 0, false);
    while let Type::Reference(r) = ty {
        refs += 1;
        mutable = r.mutability.is_some();
        ty = &r.elem;
    }
    let path = match ty {
        Type::Slice(_) if refs > 0 => return ParamClass::Slice,
        Type::Path(p) => &p.path,
        _ => return ParamClass::Other,
    };
    let Some(last) = path.segments.last() else { return ParamClass::Other };
    let name = last.ident.to_string();
    let (name, has_args) = match name.as_str() {
        "Arc" | "Rc" | "Box" => match single_type_arg(last) {
            Some(Type::Path(inner)) => match inner.path.segments.last() {
                Some(s) => (s.ident.to_string(), !s.arguments.is_none()),
                None => return ParamClass::Other,
            },
            _ => return ParamClass::Other,
        },
        _ => (name, false),
    };
    match name.as_str() {
        "CommandEncoder" | "ComputePass" | "RenderPass" if refs > 0 && mutable => ParamClass::Recorder,
        "CommandEncoder" | "ComputePass" | "RenderPass" => ParamClass::UnusableRecorder,
        // A type with generic arguments is someone else's `Queue`.
        "Queue" if !has_args => ParamClass::Queue,
        "Device" if !has_args => ParamClass::Device,
        "CudaStream" => ParamClass::Stream,
        "CudaContext" => ParamClass::CudaContext,
        _ => ParamClass::Other,
    }
}

fn single_type_arg(seg: &syn::PathSegment) -> Option<&Type> {
    let syn::PathArguments::AngleBracketed(args) = &seg.arguments else { return None };
    match args.args.first() {
        Some(syn::GenericArgument::Type(t)) if args.args.len() == 1 => Some(t),
        _ => None,
    }
}

/// Whether a function's return type names a wgpu pass (`ComputePass`, `RenderPass`), anywhere in
/// it (`Result<wgpu::ComputePass<'_>, E>` too).
fn hands_back_a_pass(output: &syn::ReturnType) -> bool {
    fn names_a_pass(tokens: proc_macro2::TokenStream) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == "ComputePass" || i == "RenderPass",
            proc_macro2::TokenTree::Group(g) => names_a_pass(g.stream()),
            _ => false,
        })
    }
    match output {
        syn::ReturnType::Default => false,
        syn::ReturnType::Type(_, ty) => names_a_pass(quote::ToTokens::to_token_stream(&**ty)),
    }
}
