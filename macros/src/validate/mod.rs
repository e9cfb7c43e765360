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
mod shape;
mod transfer;

use crate::parse::Args;
use crate::plan::{Kind, Plan};
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
    params::check_skips(&given, &params, &mut errors);
    let usable = params::Usable::new(&params, &given);
    let resource = resource::choose(&given, &usable, func, &mut errors);
    let bytes = transfer::check(kind, &given, &usable, &resource, func, &mut errors);
    let fields = fields::check(&given, &params, &mut errors);
    let used_params = params::used(&given, &fields, &params);
    match errors.0 {
        Some(e) => Err(e),
        None => Ok(Plan {
            kind,
            name: given.name.clone().unwrap_or_else(|| func.sig.ident.to_string()),
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
        }),
    }
}
