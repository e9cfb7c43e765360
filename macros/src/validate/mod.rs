//! Meaning and consistency of the arguments against the function they annotate.
//!
//! Validation turns the parsed arguments and the item into a [`Plan`], or into errors that each
//! point at the token at fault. Independent problems are all reported in one run, in the order
//! below, one concern per module. It does not depend on whether instrumentation is enabled, so
//! the errors are the same on and off, and it writes no code.

mod args;
mod fields;
mod params;
mod resource;
pub(crate) mod shape;
mod transfer;

use crate::parse::Args;
use crate::plan::{Kind, Plan, Text};
use syn::ItemFn;

/// Every error found so far, combined so that rustc shows each one at its own token.
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }
}

pub fn plan(kind: Kind, args: Args, func: &ItemFn) -> syn::Result<Plan> {
    // Syntax errors of single arguments come first; the arguments that parsed are still checked.
    let mut errors = Errors(args.errors);
    shape::check(kind, func, &mut errors);
    let given = args::read(kind, &args.args, &mut errors);
    let params = params::classify_all(func);
    let bindings = params::bindings(func);
    params::check_skips(&given, &bindings, &mut errors);
    let usable = params::Usable::new(&params, &given, func);
    let resource = resource::choose(&given, &usable, func, &mut errors);
    let bytes = transfer::check(kind, &given, &usable, &resource, func, &mut errors);
    let fields = fields::check(&given, &bindings, &mut errors);
    let off_refs = off_refs(&given, &fields);
    let fields = fields::with_params(&given, &bindings, fields);
    let used_params = params::used(&given, &fields, &params);
    match errors.0 {
        Some(e) => Err(e),
        None => Ok(Plan {
            kind,
            name: given.name.clone().unwrap_or_else(|| Text::Str(func.sig.ident.to_string())),
            target: given.target.clone(),
            parent: given.parent.cloned(),
            follows_from: given.follows_from.cloned(),
            err: given.err,
            ret: given.ret,
            // A wgpu-timed body, or a bare one that attaches its own encoder (`wgpu (bare)`).
            time_passes: resource.backend() == crate::plan::Backend::Wgpu
                || resource::calls_attach(quote::ToTokens::to_token_stream(&func.block)),
            resource,
            direction: given.direction,
            bytes,
            threshold_us: given.threshold_us,
            trace_all: given.trace_all,
            track_memory: given.track_memory,
            level: given.level,
            krate: given.krate.cloned(),
            fields,
            used_params,
            off_refs,
        }),
    }
}

/// What only the instrumented code names: field values and constant keys, a constant name or
/// target.
fn off_refs(given: &args::Given<'_>, fields: &[crate::plan::Field]) -> Vec<syn::Expr> {
    use crate::plan::{FieldKey, FieldValue};
    let mut out = Vec::new();
    for f in fields {
        if let FieldKey::Const(e) = &f.key {
            out.push(e.clone());
        }
        if let FieldValue::Expr(e, _) = &f.value {
            out.push(e.clone());
        }
    }
    // Not `parent` or `follows_from`: the off arm types them through `__private` helpers.
    for t in [&given.name, &given.target].into_iter().flatten() {
        if let Text::Const(id) = t {
            out.push(syn::parse_quote!(#id));
        }
    }
    out
}
