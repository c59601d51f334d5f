//! The `ScopeValue` impl: `for_each_tensor` visits every field not skipped; each type
//! parameter used in a visited field gets a `T: ScopeValue` bound.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{DeriveInput, GenericParam, Ident, Index};

use super::parse::{Data, Field, Fields, Input, Style};

fn private() -> TokenStream {
    quote!(::gpuscope::__private)
}

/// The impl for a valid input.
pub(super) fn impl_scope_value(input: &Input<'_>) -> TokenStream {
    let p = private();
    let f = format_ident!("__gpuscope_f");
    let mut bounds = Bounds::new(input);
    let body = match &input.data {
        Data::Struct(fields) => {
            let calls = fields.visited().map(|field| {
                bounds.note(field);
                let access = match field.ident {
                    Some(ident) => quote!(#ident),
                    None => {
                        let index = Index::from(field.index);
                        quote!(#index)
                    }
                };
                visit_call(field, quote!(&self.#access), &f)
            });
            let calls: Vec<_> = calls.collect();
            quote!(#(#calls)*)
        }
        Data::Enum(variants) if variants.is_empty() => quote!(match *self {}),
        Data::Enum(variants) => {
            let arms = variants.iter().map(|variant| {
                let name = variant.ident;
                let (pattern, calls) = variant_arm(&variant.fields, &f, &mut bounds);
                let pattern = match variant.fields.style {
                    Style::Named => quote!(Self::#name { #pattern .. }),
                    Style::Unnamed => quote!(Self::#name(#pattern)),
                    Style::Unit => quote!(Self::#name),
                };
                quote!(#pattern => { #calls })
            });
            let arms: Vec<_> = arms.collect();
            quote! {
                match self {
                    #(#arms)*
                }
            }
        }
        // Rejected by `validate`.
        Data::Union(_) => TokenStream::new(),
    };
    let name = input.ident;
    let mut generics = input.generics.clone();
    if !bounds.used.is_empty() {
        let where_clause = generics.make_where_clause();
        for param in &input.generics.params {
            if let GenericParam::Type(t) = param {
                if bounds.used.contains(&t.ident.to_string()) {
                    let ident = &t.ident;
                    where_clause
                        .predicates
                        .push(syn::parse_quote!(#ident: #p::ScopeValue));
                }
            }
        }
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #p::ScopeValue for #name #ty_generics #where_clause {
            fn for_each_tensor(&self, #f: &mut dyn ::core::ops::FnMut(&#p::Tensor)) {
                #body
            }
        }
    }
}

/// An impl visiting nothing, beside the error of an input that was not valid: the type
/// is still a `ScopeValue`, so that no second error follows where it is used as one.
pub(super) fn fallback(input: &DeriveInput) -> TokenStream {
    let p = private();
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #p::ScopeValue for #name #ty_generics #where_clause {
            fn for_each_tensor(&self, _: &mut dyn ::core::ops::FnMut(&#p::Tensor)) {}
        }
    }
}

/// The bindings of a variant's pattern (without the path) and the visits of its fields.
fn variant_arm(fields: &Fields<'_>, f: &Ident, bounds: &mut Bounds) -> (TokenStream, TokenStream) {
    let mut binds = Vec::new();
    let mut calls = Vec::new();
    for field in &fields.fields {
        let binding = format_ident!("__gpuscope_field_{}", field.index);
        match (fields.style, field.skip) {
            (Style::Named, true) => continue,
            (Style::Named, false) => {
                let ident = field.ident;
                binds.push(quote!(#ident: #binding,));
            }
            (_, true) => {
                binds.push(quote!(_));
                continue;
            }
            (_, false) => binds.push(quote!(#binding)),
        }
        bounds.note(field);
        calls.push(visit_call(field, quote!(#binding), f));
    }
    let pattern = match fields.style {
        Style::Named => quote!(#(#binds)*),
        _ => quote!(#(#binds),*),
    };
    (pattern, quote!(#(#calls)*))
}

impl<'a> Fields<'a> {
    fn visited(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields.iter().filter(|f| !f.skip)
    }
}

/// `ScopeValue::for_each_tensor(<place>, f);`, spanned at the field's type so that a
/// field whose type does not implement `ScopeValue` is the error's location.
fn visit_call(field: &Field<'_>, place: TokenStream, f: &Ident) -> TokenStream {
    let ty = field.ty;
    quote_spanned! {ty.span()=>
        <#ty as ::gpuscope::__private::ScopeValue>::for_each_tensor(#place, #f);
    }
}

/// The type parameters, and those mentioned by visited fields (which get a bound).
struct Bounds {
    params: BTreeSet<String>,
    used: BTreeSet<String>,
}

impl Bounds {
    fn new(input: &Input<'_>) -> Bounds {
        let params = input
            .generics
            .params
            .iter()
            .filter_map(|g| match g {
                GenericParam::Type(t) => Some(t.ident.to_string()),
                _ => None,
            })
            .collect();
        Bounds {
            params,
            used: BTreeSet::new(),
        }
    }

    /// Notes the type parameters the field's type mentions.
    fn note(&mut self, field: &Field<'_>) {
        struct Finder<'b>(&'b mut Bounds);
        impl<'ast> Visit<'ast> for Finder<'_> {
            fn visit_path(&mut self, path: &'ast syn::Path) {
                if let Some(first) = path.segments.first() {
                    let name = first.ident.to_string();
                    if self.0.params.contains(&name) {
                        self.0.used.insert(name);
                    }
                }
                syn::visit::visit_path(self, path);
            }
        }
        Finder(self).visit_type(field.ty);
    }
}
