//! `fields(...)`: bare names are parameters (recorded with `Debug`), `key = expr` records the
//! expression; a key said twice, one gpuspan sets itself, or a name that is no parameter is an
//! error at the key.

use super::args::Given;
use super::params::Param;
use super::Errors;
use crate::plan::{Field, FieldValue};
use syn::spanned::Spanned;

/// Keys gpuspan records itself.
const RESERVED: &[&str] = &["error", "otel.status_code", "gpu.kernel", "gpu.backend", "gpuspan.kind"];

pub(super) fn check(given: &Given<'_>, params: &[Param<'_>], errors: &mut Errors) -> Vec<Field> {
    let mut fields = Vec::new();
    let Some(list) = given.fields else { return fields };
    let mut keys: Vec<String> = Vec::new();
    for f in list {
        let key = f.key.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(".");
        if keys.contains(&key) {
            errors.push(syn::Error::new_spanned(&f.key, format!("field `{key}` is recorded more than once")));
            continue;
        }
        keys.push(key.clone());
        if RESERVED.contains(&key.as_str()) {
            errors.push(syn::Error::new(
                f.key.span(),
                format!("field `{key}` is set by gpuspan itself; choose another name"),
            ));
            continue;
        }
        let value = match &f.value {
            Some(v) => FieldValue::Expr(v.clone()),
            None => {
                let ident = f.key.first().expect("parsed non-empty");
                if f.key.len() > 1 || !params.iter().any(|p| p.name == ident) {
                    errors.push(syn::Error::new(
                        f.key.span(),
                        format!("`fields({key})`: the function has no parameter named `{key}`; use `{key} = <expr>` to record an expression"),
                    ));
                    continue;
                }
                if given.skip.contains(&ident) {
                    errors.push(syn::Error::new(
                        f.key.span(),
                        format!("`{key}` is both recorded in `fields` and listed in `skip`"),
                    ));
                    continue;
                }
                FieldValue::Param(ident.clone())
            }
        };
        fields.push(Field { key: f.key.iter().cloned().collect(), value });
    }
    fields
}
