//! What parses but cannot be derived: a union, `#[scope_value]` on the type or on a
//! variant. Every mistake is reported (combined into one `syn::Error`).

use super::parse::{Data, Errors, Input};

pub(super) fn check(input: &Input<'_>) -> syn::Result<()> {
    let mut errors = Errors::default();
    for attr in &input.misplaced {
        errors.push(syn::Error::new_spanned(
            attr,
            "#[scope_value(skip)] goes on a field, not on the type",
        ));
    }
    match &input.data {
        Data::Struct(_) => {}
        Data::Enum(variants) => {
            for attr in variants.iter().flat_map(|v| &v.misplaced) {
                errors.push(syn::Error::new_spanned(
                    attr,
                    "#[scope_value(skip)] goes on a field, not on a variant",
                ));
            }
        }
        Data::Union(span) => errors.push(syn::Error::new(
            *span,
            "#[derive(ScopeValue)] does not support unions: which field holds a value is unknown; implement `ScopeValue` by hand",
        )),
    }
    errors.finish()
}
