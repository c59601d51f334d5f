//! `#[derive(ScopeValue)]`: visits every field that is not `#[scope_value(skip)]`.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Data, DeriveInput, Field, Fields, GenericParam, Ident, Index};

/// `#[derive(ScopeValue)]`. Derives report their errors alone (the item itself is
/// already emitted by the compiler).
pub(crate) fn derive_scope_value(input: TokenStream) -> TokenStream {
    match expand(input) {
        Ok(tokens) => tokens,
        Err(e) => e.to_compile_error(),
    }
}

fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let input: DeriveInput = syn::parse2(input)?;
    for attr in &input.attrs {
        if attr.path().is_ident("scope_value") {
            return Err(syn::Error::new(
                attr.span(),
                "#[scope_value(skip)] goes on a field, not on the type",
            ));
        }
    }
    let p = quote!(::gpuscope::__private);
    let f = format_ident!("__gpuscope_f");
    let type_params: BTreeSet<String> = input
        .generics
        .params
        .iter()
        .filter_map(|g| match g {
            GenericParam::Type(t) => Some(t.ident.to_string()),
            _ => None,
        })
        .collect();
    // Type parameters that appear in visited fields get a `ScopeValue` bound.
    let mut bounded: BTreeSet<String> = BTreeSet::new();

    let body = match &input.data {
        Data::Struct(s) => {
            let fields = visited(&s.fields)?;
            let mut calls = Vec::new();
            for (i, field) in fields {
                mentioned_params(&field.ty, &type_params, &mut bounded);
                let access = match &field.ident {
                    Some(ident) => quote!(#ident),
                    None => {
                        let index = Index::from(i);
                        quote!(#index)
                    }
                };
                calls.push(visit_call(field, quote!(&self.#access), &f));
            }
            quote!(#(#calls)*)
        }
        Data::Enum(e) => {
            let mut arms = Vec::new();
            for variant in &e.variants {
                for attr in &variant.attrs {
                    if attr.path().is_ident("scope_value") {
                        return Err(syn::Error::new(
                            attr.span(),
                            "#[scope_value(skip)] goes on a field, not on a variant",
                        ));
                    }
                }
                let name = &variant.ident;
                let fields = visited(&variant.fields)?;
                let mut calls = Vec::new();
                let pattern = match &variant.fields {
                    Fields::Named(_) => {
                        let mut binds = Vec::new();
                        for (i, field) in &fields {
                            mentioned_params(&field.ty, &type_params, &mut bounded);
                            let ident = field.ident.as_ref();
                            let binding = format_ident!("__gpuscope_field_{i}");
                            binds.push(quote!(#ident: #binding));
                            calls.push(visit_call(field, quote!(#binding), &f));
                        }
                        quote!(Self::#name { #(#binds,)* .. })
                    }
                    Fields::Unnamed(all) => {
                        let mut binds = Vec::new();
                        for (i, _) in all.unnamed.iter().enumerate() {
                            match fields.iter().find(|(j, _)| *j == i) {
                                Some((_, field)) => {
                                    mentioned_params(&field.ty, &type_params, &mut bounded);
                                    let binding = format_ident!("__gpuscope_field_{i}");
                                    binds.push(quote!(#binding));
                                    calls.push(visit_call(field, quote!(#binding), &f));
                                }
                                None => binds.push(quote!(_)),
                            }
                        }
                        quote!(Self::#name(#(#binds),*))
                    }
                    Fields::Unit => quote!(Self::#name),
                };
                arms.push(quote!(#pattern => { #(#calls)* }));
            }
            if arms.is_empty() {
                quote!(match *self {})
            } else {
                quote! {
                    match self {
                        #(#arms)*
                    }
                }
            }
        }
        Data::Union(u) => {
            return Err(syn::Error::new(
                u.union_token.span,
                "#[derive(ScopeValue)] does not support unions: which field holds a value is unknown; implement `ScopeValue` by hand",
            ));
        }
    };

    let name = &input.ident;
    let mut generics = input.generics.clone();
    if !bounded.is_empty() {
        let where_clause = generics.make_where_clause();
        for param in &input.generics.params {
            if let GenericParam::Type(t) = param {
                if bounded.contains(&t.ident.to_string()) {
                    let ident = &t.ident;
                    where_clause
                        .predicates
                        .push(syn::parse_quote!(#ident: #p::ScopeValue));
                }
            }
        }
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #p::ScopeValue for #name #ty_generics #where_clause {
            fn for_each_tensor(&self, #f: &mut dyn ::core::ops::FnMut(&#p::Tensor)) {
                #body
            }
        }
    })
}

/// `ScopeValue::for_each_tensor(<place>, f);`, spanned at the field's type so that a
/// field whose type does not implement `ScopeValue` is the error's location.
fn visit_call(field: &Field, place: TokenStream, f: &Ident) -> TokenStream {
    let ty = &field.ty;
    quote_spanned! {ty.span()=>
        <#ty as ::gpuscope::__private::ScopeValue>::for_each_tensor(#place, #f);
    }
}

/// The fields to visit (index in declaration order, field), checking `#[scope_value]`.
fn visited(fields: &Fields) -> syn::Result<Vec<(usize, &Field)>> {
    let mut out = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        let mut skip = false;
        for attr in &field.attrs {
            if !attr.path().is_ident("scope_value") {
                continue;
            }
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("skip") {
                    if skip {
                        return Err(meta.error("`skip` is given more than once"));
                    }
                    skip = true;
                    Ok(())
                } else {
                    let name = meta
                        .path
                        .get_ident()
                        .map_or_else(|| "this".to_string(), |i| i.to_string());
                    Err(meta.error(format!(
                        "unknown #[scope_value] option `{name}`: the only option is `skip`{}",
                        crate::diagnostics::suggestion(&name, &["skip"])
                    )))
                }
            })?;
            if !skip {
                return Err(syn::Error::new(
                    attr.span(),
                    "expected `#[scope_value(skip)]`",
                ));
            }
        }
        if !skip {
            out.push((i, field));
        }
    }
    Ok(out)
}

/// Adds to `found` the type parameters that `ty` mentions.
fn mentioned_params(ty: &syn::Type, params: &BTreeSet<String>, found: &mut BTreeSet<String>) {
    struct Finder<'a> {
        params: &'a BTreeSet<String>,
        found: &'a mut BTreeSet<String>,
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_path(&mut self, path: &'ast syn::Path) {
            if let Some(first) = path.segments.first() {
                let name = first.ident.to_string();
                if self.params.contains(&name) {
                    self.found.insert(name);
                }
            }
            syn::visit::visit_path(self, path);
        }
    }
    Finder { params, found }.visit_type(ty);
}
