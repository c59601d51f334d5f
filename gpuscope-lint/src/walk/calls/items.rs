//! The file's functions (nested ones where a body's statement declares them), and the
//! resolution of a call's name to one of them (`walk/calls/mod.rs` says which calls
//! resolve); the types of struct fields come from the file index (`FileIndex::adts`).

use rustc_hash::FxHashMap;

use syn::Block;

use crate::infer::Adt;
use syn::visit::{self, Visit};

/// A function of the file.
pub(super) struct FnItem<'a> {
    pub(super) name: String,
    /// Whether it is in an impl or a trait.
    pub(super) method: bool,
    /// The last segment of its impl's type (`Trainer` of `impl<B> Trainer<B>`).
    pub(super) owner: Option<String>,
    /// Its parameters whose type shows (`t: &mut Trainer`): name and type.
    pub(super) params: FxHashMap<String, String>,
    pub(super) body: Option<&'a Block>,
}

/// Collects the file's functions (nested ones included).
#[derive(Default)]
pub(super) struct Items<'a> {
    pub(super) fns: Vec<FnItem<'a>>,
    /// The impl or trait around: its type (none for a trait).
    within: Option<Option<String>>,
}

impl<'a> Items<'a> {
    fn push(&mut self, sig: &syn::Signature, body: Option<&'a Block>) {
        let mut params = FxHashMap::default();
        for input in &sig.inputs {
            if let syn::FnArg::Typed(arg) = input {
                if let (syn::Pat::Ident(p), Some(ty)) = (&*arg.pat, type_name(&arg.ty)) {
                    params.insert(p.ident.to_string(), ty);
                }
            }
        }
        self.fns.push(FnItem {
            name: sig.ident.to_string(),
            method: self.within.is_some(),
            owner: self.within.clone().flatten(),
            params,
            body,
        });
        // Functions nested in a body are free functions.
        let saved = self.within.take();
        if let Some(body) = body {
            self.visit_block(body);
        }
        self.within = saved;
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
        let saved = self.within.replace(type_name(&item.self_ty));
        visit::visit_item_impl(self, item);
        self.within = saved;
    }

    fn visit_item_trait(&mut self, item: &'a syn::ItemTrait) {
        let saved = self.within.replace(None);
        visit::visit_item_trait(self, item);
        self.within = saved;
    }
}

/// The last segment of a type's path, behind references (`Trainer` of `&mut Trainer<B>`).
pub(super) fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Reference(r) => type_name(&r.elem),
        syn::Type::Paren(p) => type_name(&p.elem),
        syn::Type::Group(g) => type_name(&g.elem),
        syn::Type::Path(p) if p.qself.is_none() => {
            p.path.segments.last().map(|s| s.ident.to_string())
        }
        _ => None,
    }
}

/// The file's functions by name.
pub(super) struct Table<'t, 'a> {
    pub(super) fns: &'t [FnItem<'a>],
    by_name: FxHashMap<&'t str, Vec<usize>>,
    adts: &'t FxHashMap<String, Adt>,
}

impl<'t, 'a> Table<'t, 'a> {
    pub(super) fn new(fns: &'t [FnItem<'a>], adts: &'t FxHashMap<String, Adt>) -> Self {
        let mut by_name: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
        for (i, f) in fns.iter().enumerate() {
            by_name.entry(f.name.as_str()).or_default().push(i);
        }
        Table { fns, by_name, adts }
    }

    /// The function a call `name(..)` makes: the file's only function of that name.
    pub(super) fn free(&self, name: &str) -> Option<usize> {
        match self.by_name.get(name)?.as_slice() {
            &[i] if !self.fns[i].method && self.fns[i].body.is_some() => Some(i),
            _ => None,
        }
    }

    /// The one method `name` of the impls of `owner`.
    pub(super) fn method_of(&self, owner: &str, name: &str) -> Option<usize> {
        self.one(name, |o| o == owner)
    }

    /// The one method `name` of the impls of a type named as `receiver` is (`Trainer` for
    /// `trainer`, `TrainingStep` for `training_step`).
    pub(super) fn method_named_like(&self, receiver: &str, name: &str) -> Option<usize> {
        let plain = |s: &str| s.replace('_', "").to_ascii_lowercase();
        let receiver = plain(receiver);
        self.one(name, |o| plain(o) == receiver)
    }

    fn one(&self, name: &str, owner: impl Fn(&str) -> bool) -> Option<usize> {
        let mut found = self.by_name.get(name)?.iter().copied().filter(|&i| {
            self.fns[i].owner.as_deref().is_some_and(&owner) && self.fns[i].body.is_some()
        });
        let first = found.next()?;
        found.next().is_none().then_some(first)
    }

    /// The type of field `field` of the file's struct `ty`.
    pub(super) fn field_type(&self, ty: &str, field: &str) -> Option<String> {
        let (_, ty) = self
            .adts
            .get(ty)?
            .fields
            .iter()
            .find(|(name, _)| name.as_deref() == Some(field))?;
        type_name(ty)
    }
}
