//! `fields(...)`: a bare parameter name records it with `Debug`, any other bare name declares an
//! empty field (as in `tracing`), `key = expr` records the expression (`%`/`?` for `Display`/
//! `Debug`); a key said twice or one gpuspan sets itself is an error at the key. Parameters not
//! skipped are recorded too, as `tracing` records them.

use super::args::Given;
use super::params::Binding;
use super::Errors;
use crate::parse::{FieldKey, Sigil};
use crate::plan::{self, Field, FieldValue};
use syn::spanned::Spanned;

/// Keys gpuspan records itself.
const RESERVED: &[&str] = &["error", "otel.status_code", "gpu.kernel", "gpu.backend", "gpuspan.kind"];

pub(super) fn check(given: &Given<'_>, bindings: &[Binding], errors: &mut Errors) -> Vec<Field> {
    let mut fields = Vec::new();
    let Some(list) = given.fields else { return fields };
    let mut keys: Vec<String> = Vec::new();
    for f in list {
        let dotted = match &f.key {
            FieldKey::Dotted(d) => d,
            FieldKey::Const(e) => {
                let value = match &f.value {
                    Some(v) => FieldValue::Expr(v.clone(), f.sigil),
                    None => FieldValue::Empty,
                };
                fields.push(Field { key: plan::FieldKey::Const(e.clone()), value });
                continue;
            }
        };
        let key = dotted.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(".");
        if keys.contains(&key) {
            errors.push(syn::Error::new_spanned(dotted, format!("field `{key}` is recorded more than once")));
            continue;
        }
        keys.push(key.clone());
        if RESERVED.contains(&key.as_str()) || key.starts_with("gpuspan.") {
            errors.push(syn::Error::new(
                dotted.span(),
                format!("field `{key}` is set by gpuspan itself; choose another name"),
            ));
            continue;
        }
        let ident = dotted.first().expect("parsed non-empty");
        let is_param = dotted.len() == 1 && bindings.iter().any(|b| b.name == *ident);
        let value = match (&f.value, f.sigil) {
            (Some(v), sigil) => FieldValue::Expr(v.clone(), sigil),
            // `%x` / `?x`: shorthand for `x = %x`, of a parameter (checked here, so that the
            // error is the same with instrumentation off).
            (None, sigil @ (Sigil::Display | Sigil::Debug)) => {
                if !is_param {
                    errors.push(syn::Error::new(
                        dotted.span(),
                        format!("`fields({}{key})`: the function has no parameter named `{key}`; use `{key} = <expr>` to record an expression", if sigil == Sigil::Display { "%" } else { "?" }),
                    ));
                    continue;
                }
                FieldValue::Expr(syn::parse_quote!(#ident), sigil)
            }
            (None, Sigil::Value) if is_param => {
                if given.skip.contains(&ident) {
                    errors.push(syn::Error::new(
                        dotted.span(),
                        format!("`{key}` is both recorded in `fields` and listed in `skip`"),
                    ));
                    continue;
                }
                FieldValue::Param(ident.clone())
            }
            // As in `tracing`: a field declared now, recorded later with `Span::record`.
            (None, Sigil::Value) => FieldValue::Empty,
        };
        fields.push(Field { key: plan::FieldKey::Dotted(dotted.iter().cloned().collect()), value });
    }
    fields
}

/// The parameters `tracing` would record (all but the skipped ones, and those a field of the
/// same name replaces), first, then the fields the user asked for.
pub(super) fn with_params(given: &Given<'_>, bindings: &[Binding], fields: Vec<Field>) -> Vec<Field> {
    if given.skip_all.is_some() {
        return fields;
    }
    let mut out: Vec<Field> = bindings
        .iter()
        .filter(|b| !given.skip.iter().any(|s| **s == b.name))
        .filter(|b| {
            !fields.iter().any(|f| matches!(&f.key, plan::FieldKey::Dotted(d) if d.len() == 1 && d[0] == b.name))
        })
        .map(|b| Field {
            key: plan::FieldKey::Dotted(vec![b.name.clone()]),
            value: FieldValue::Auto { param: b.name.clone(), as_value: b.as_value },
        })
        .collect();
    out.extend(fields);
    out
}
