//! What a file declares, as the callers' passes need it (`callgraph`'s plain data): its
//! functions (nested ones where a body's statement declares them) with their bodies, its
//! structs' and enums' fields, its `use`s and its `mod name;` declarations, each with the
//! inline modules around it.

use syn::visit::{self, Visit};
use syn::{Block, UseTree};

use super::backends::generic_over_backend;
use crate::callgraph::{AdtDef, FnDef, ModDecl, TypePath, UseDef};

/// Pointers a method call sees through: `Box<Network>`'s methods are `Network`'s.
const POINTERS: &[&str] = &["Box", "Rc", "Arc"];

/// Collects what a file declares.
#[derive(Default)]
pub(super) struct Items<'a> {
    pub(super) fns: Vec<FnDef>,
    /// Each function's body, by the function's index.
    pub(super) bodies: Vec<Option<&'a Block>>,
    /// Each function's signature, and whether the impl or trait around it is generic (a
    /// trait's default methods are, over `Self`), by the function's index.
    pub(super) sigs: Vec<(&'a syn::Signature, bool)>,
    pub(super) adts: Vec<AdtDef>,
    pub(super) uses: Vec<UseDef>,
    pub(super) mods: Vec<ModDecl>,
    /// The impl or trait around: its type (none for a trait).
    within: Option<Option<String>>,
    /// The generics of the impl or trait around, and whether it is generic (a trait is,
    /// over `Self`).
    outer: Option<(&'a syn::Generics, bool)>,
    /// The inline modules around.
    module: Vec<String>,
    /// How many function bodies are around.
    nested: usize,
}

impl<'a> Items<'a> {
    fn push(&mut self, sig: &'a syn::Signature, body: Option<&'a Block>) {
        let mut params = rustc_hash::FxHashMap::default();
        for input in &sig.inputs {
            if let syn::FnArg::Typed(arg) = input {
                if let (syn::Pat::Ident(p), Some(ty)) = (&*arg.pat, type_path(&arg.ty)) {
                    params.insert(p.ident.to_string(), ty);
                }
            }
        }
        self.fns.push(FnDef {
            name: sig.ident.to_string(),
            method: self.within.is_some(),
            owner: self.within.clone().flatten(),
            module: self.module.clone(),
            nested: self.nested > 0,
            params,
            body: body.is_some(),
            backend_generic: generic_over_backend(&sig.generics, self.outer.map(|(g, _)| g)),
        });
        self.bodies.push(body);
        self.sigs
            .push((sig, self.outer.is_some_and(|(_, generic)| generic)));
        // Functions nested in a body are free functions.
        let saved = (self.within.take(), self.outer.take());
        if let Some(body) = body {
            self.nested += 1;
            self.visit_block(body);
            self.nested -= 1;
        }
        (self.within, self.outer) = saved;
    }

    fn add_uses(&mut self, tree: &UseTree, prefix: &mut Vec<String>) {
        let module = self.module.clone();
        let mut add = |alias: Option<String>, path: Vec<String>| {
            if alias.as_deref() != Some("_") {
                self.uses.push(UseDef {
                    module: module.clone(),
                    alias,
                    path,
                });
            }
        };
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.add_uses(&p.tree, prefix);
                prefix.pop();
            }
            UseTree::Name(n) if n.ident == "self" => {
                if let Some(last) = prefix.last() {
                    add(Some(last.clone()), prefix.clone());
                }
            }
            UseTree::Name(n) => {
                let name = n.ident.to_string();
                add(Some(name.clone()), [prefix.as_slice(), &[name]].concat());
            }
            UseTree::Rename(r) => {
                let path = [prefix.as_slice(), &[r.ident.to_string()]].concat();
                let path = if r.ident == "self" {
                    prefix.clone()
                } else {
                    path
                };
                add(Some(r.rename.to_string()), path);
            }
            UseTree::Glob(_) => add(None, prefix.clone()),
            UseTree::Group(g) => {
                for tree in &g.items {
                    self.add_uses(tree, prefix);
                }
            }
        }
    }

    fn add_adt<'f>(&mut self, name: &syn::Ident, fields: impl Iterator<Item = &'f syn::Field>) {
        let mut adt = AdtDef {
            name: name.to_string(),
            module: self.module.clone(),
            ..AdtDef::default()
        };
        for field in fields {
            if let Some(ident) = &field.ident {
                adt.fields.push((ident.to_string(), type_path(&field.ty)));
            }
        }
        self.adts.push(adt);
    }
}

impl<'a> Visit<'a> for Items<'a> {
    // Functions nested in a body are found among its statements, not in its expressions.
    fn visit_expr(&mut self, _: &'a syn::Expr) {}

    fn visit_item_fn(&mut self, item: &'a syn::ItemFn) {
        self.push(&item.sig, Some(&item.block));
    }

    fn visit_impl_item_fn(&mut self, item: &'a syn::ImplItemFn) {
        self.push(&item.sig, Some(&item.block));
    }

    fn visit_trait_item_fn(&mut self, item: &'a syn::TraitItemFn) {
        self.push(&item.sig, item.default.as_ref());
    }

    fn visit_item_impl(&mut self, item: &'a syn::ItemImpl) {
        let owner = type_path(&item.self_ty).and_then(|p| p.last().cloned());
        let generic = item.generics.type_params().next().is_some();
        let saved = (
            self.within.replace(owner),
            self.outer.replace((&item.generics, generic)),
        );
        visit::visit_item_impl(self, item);
        (self.within, self.outer) = saved;
    }

    fn visit_item_trait(&mut self, item: &'a syn::ItemTrait) {
        let saved = (
            self.within.replace(None),
            self.outer.replace((&item.generics, true)),
        );
        visit::visit_item_trait(self, item);
        (self.within, self.outer) = saved;
    }

    fn visit_item_mod(&mut self, item: &'a syn::ItemMod) {
        let name = item.ident.to_string();
        if item.content.is_none() {
            if self.nested == 0 {
                let path = item.attrs.iter().find_map(|attr| match &attr.meta {
                    syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }) => Some(s.value()),
                        _ => None,
                    },
                    _ => None,
                });
                self.mods.push(ModDecl {
                    module: self.module.clone(),
                    name,
                    path,
                });
            }
            return;
        }
        self.module.push(name);
        visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_item_use(&mut self, item: &'a syn::ItemUse) {
        self.add_uses(&item.tree, &mut Vec::new());
    }

    fn visit_item_struct(&mut self, item: &'a syn::ItemStruct) {
        self.add_adt(&item.ident, item.fields.iter());
    }

    fn visit_item_enum(&mut self, item: &'a syn::ItemEnum) {
        self.add_adt(
            &item.ident,
            item.variants.iter().flat_map(|v| v.fields.iter()),
        );
        let Some(adt) = self.adts.last_mut() else {
            return;
        };
        for variant in &item.variants {
            if let syn::Fields::Unnamed(fields) = &variant.fields {
                let types = fields.unnamed.iter().map(|f| type_path(&f.ty)).collect();
                adt.variants.push((variant.ident.to_string(), types));
            }
        }
    }
}

/// A type's path without generics, behind references and [`POINTERS`]
/// (`cuda::CudaNetwork` of `&mut Box<cuda::CudaNetwork>`).
pub(super) fn type_path(ty: &syn::Type) -> Option<TypePath> {
    match ty {
        syn::Type::Reference(r) => type_path(&r.elem),
        syn::Type::Paren(p) => type_path(&p.elem),
        syn::Type::Group(g) => type_path(&g.elem),
        syn::Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last()?;
            if POINTERS.iter().any(|ptr| last.ident == ptr) {
                if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
                    if let [syn::GenericArgument::Type(inner)] =
                        args.args.iter().collect::<Vec<_>>().as_slice()
                    {
                        return type_path(inner);
                    }
                }
            }
            Some(path_of(&p.path))
        }
        _ => None,
    }
}

/// A path's segments' names.
pub(super) fn path_of(path: &syn::Path) -> TypePath {
    path.segments.iter().map(|s| s.ident.to_string()).collect()
}
