//! The derive's input as the derive sees it: the fields, each visited or skipped, and
//! where `#[scope_value]` was written. Mistakes inside a `#[scope_value(..)]` attribute
//! are found here, every one of them (combined into one `syn::Error`).

use proc_macro2::Span;
use syn::{Attribute, DeriveInput, Generics, Ident, Meta, Type};

use crate::args::suggestion;

/// A type deriving `ScopeValue`.
pub(super) struct Input<'a> {
    pub ident: &'a Ident,
    pub generics: &'a Generics,
    pub data: Data<'a>,
    /// `#[scope_value]` on the type itself (a mistake).
    pub misplaced: Vec<&'a Attribute>,
}

pub(super) enum Data<'a> {
    Struct(Fields<'a>),
    Enum(Vec<Variant<'a>>),
    /// A union, and the span of `union`.
    Union(Span),
}

pub(super) struct Variant<'a> {
    pub ident: &'a Ident,
    pub fields: Fields<'a>,
    /// `#[scope_value]` on the variant (a mistake).
    pub misplaced: Vec<&'a Attribute>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    Named,
    Unnamed,
    Unit,
}

pub(super) struct Fields<'a> {
    pub style: Style,
    pub fields: Vec<Field<'a>>,
}

pub(super) struct Field<'a> {
    /// The field's name (named fields).
    pub ident: Option<&'a Ident>,
    /// Its index in declaration order.
    pub index: usize,
    pub ty: &'a Type,
    /// `#[scope_value(skip)]`.
    pub skip: bool,
}

impl<'a> Input<'a> {
    pub(super) fn from_syn(input: &'a DeriveInput) -> syn::Result<Input<'a>> {
        let mut errors = Errors::default();
        let data = match &input.data {
            syn::Data::Struct(s) => Data::Struct(Fields::from_syn(&s.fields, &mut errors)),
            syn::Data::Enum(e) => Data::Enum(
                e.variants
                    .iter()
                    .map(|v| Variant {
                        ident: &v.ident,
                        fields: Fields::from_syn(&v.fields, &mut errors),
                        misplaced: scope_value_attrs(&v.attrs),
                    })
                    .collect(),
            ),
            syn::Data::Union(u) => Data::Union(u.union_token.span),
        };
        errors.finish()?;
        Ok(Input {
            ident: &input.ident,
            generics: &input.generics,
            data,
            misplaced: scope_value_attrs(&input.attrs),
        })
    }
}

impl<'a> Fields<'a> {
    fn from_syn(fields: &'a syn::Fields, errors: &mut Errors) -> Fields<'a> {
        let style = match fields {
            syn::Fields::Named(_) => Style::Named,
            syn::Fields::Unnamed(_) => Style::Unnamed,
            syn::Fields::Unit => Style::Unit,
        };
        let fields = fields
            .iter()
            .enumerate()
            .map(|(index, field)| Field {
                ident: field.ident.as_ref(),
                index,
                ty: &field.ty,
                skip: errors.take(skip(&field.attrs)).unwrap_or(false),
            })
            .collect();
        Fields { style, fields }
    }
}

/// Whether the field's attributes say `#[scope_value(skip)]`.
fn skip(attrs: &[Attribute]) -> syn::Result<bool> {
    let mut skip = false;
    for attr in attrs {
        if !attr.path().is_ident("scope_value") {
            continue;
        }
        if !matches!(attr.meta, Meta::List(_)) {
            return Err(syn::Error::new_spanned(attr, EXPECTED));
        }
        let mut here = false;
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                if here || skip {
                    return Err(meta.error("`skip` is given more than once"));
                }
                if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                    return Err(meta.error(format!("`skip` takes no value: {EXPECTED}")));
                }
                here = true;
                Ok(())
            } else {
                let name = meta
                    .path
                    .get_ident()
                    .map_or_else(|| "this".to_string(), |i| i.to_string());
                Err(meta.error(format!(
                    "unknown #[scope_value] option `{name}`: the only option is `skip`{}",
                    suggestion(&name, &["skip"])
                )))
            }
        })?;
        if !here {
            return Err(syn::Error::new_spanned(attr, EXPECTED));
        }
        skip = true;
    }
    Ok(skip)
}

const EXPECTED: &str = "expected `#[scope_value(skip)]`";

/// The attributes `#[scope_value ..]` among `attrs`.
fn scope_value_attrs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("scope_value"))
        .collect()
}

/// The mistakes found so far, combined.
#[derive(Default)]
pub(super) struct Errors(Option<syn::Error>);

impl Errors {
    pub(super) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// The value, or `None` with its error kept.
    fn take<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }

    pub(super) fn finish(self) -> syn::Result<()> {
        match self.0 {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
