//! What a file releases: the statics whose contents it releases (a scoped stack, a
//! bounded cache), and the types whose own methods release what their fields hold (a pool
//! that clears itself), so that `static_escape` does not take them for stores that grow until
//! the process exits.

use rustc_hash::FxHashSet;
use syn::visit::{self, Visit};

/// Methods that release what a container holds.
const RELEASING: &[&str] = &[
    "clear",
    "truncate",
    "pop",
    "pop_back",
    "pop_front",
    "remove",
    "take",
    "drain",
    "retain",
    "split_off",
    "swap_remove",
];

/// Finds the statics whose contents are released somewhere: a releasing method on a chain
/// rooted at the static, at a binding taken from it (`let mut g = X.lock().unwrap();`), or
/// at the parameter of `X.with(|v| ..)`; or an assignment through one (`*X.lock() = None`).
#[derive(Default)]
pub(super) struct Releases {
    pub(super) statics: FxHashSet<String>,
    /// Types of the file whose own methods release what a field holds
    /// (`self.pools.lock().unwrap().clear()`): a cache that bounds itself.
    pub(super) types: FxHashSet<String>,
    /// The type of the `impl` being visited.
    self_ty: Option<String>,
    /// Locals bound to what a field of `self` holds (`let mut pools = self.pools.lock()?;`,
    /// `if let Some(pool) = pools.get_mut(&key)`), in the current function.
    field_aliases: Vec<String>,
    /// Bindings and closure parameters standing for a static, in the current function.
    aliases: Vec<(String, String)>,
}

impl Releases {
    /// The static (SCREAMING_CASE, or an alias of one) at the root of `e`.
    fn static_of(&self, e: &syn::Expr) -> Option<String> {
        let root = crate::syntax::chain_root(e);
        let ident = crate::syntax::ident_of(root)?.to_string();
        if let Some((_, target)) = self.aliases.iter().rev().find(|(a, _)| *a == ident) {
            return Some(target.clone());
        }
        crate::syntax::is_screaming_case(&ident).then_some(ident)
    }
}

impl<'ast> Visit<'ast> for Releases {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let method = &call.method;
        if crate::syntax::ident_in(method, RELEASING) {
            if let Some(name) = self.static_of(&call.receiver) {
                self.statics.insert(name);
            }
            if let Some(ty) = &self.self_ty {
                if self.reaches_a_field_of_self(&call.receiver) {
                    self.types.insert(ty.clone());
                }
            }
        }
        if crate::syntax::ident_in(method, &["with", "with_borrow_mut", "with_borrow"]) {
            if let Some(name) = self.static_of(&call.receiver) {
                let before = self.aliases.len();
                for arg in &call.args {
                    if let syn::Expr::Closure(c) = arg {
                        for input in &c.inputs {
                            crate::syntax::pat_idents(input, &mut |i| {
                                self.aliases.push((i.to_string(), name.clone()))
                            });
                        }
                    }
                }
                visit::visit_expr_method_call(self, call);
                self.aliases.truncate(before);
                return;
            }
        }
        visit::visit_expr_method_call(self, call);
    }

    fn visit_expr_assign(&mut self, assign: &'ast syn::ExprAssign) {
        // `*X.lock().unwrap() = None;`, `X = Vec::new();`: emptied.
        let emptied = match crate::syntax::strip(&assign.right) {
            syn::Expr::Path(p) => p.path.is_ident("None"),
            syn::Expr::Call(call) => {
                call.args.is_empty()
                    && crate::syntax::callee_name(call)
                        .is_some_and(|n| n == "new" || n == "default")
            }
            _ => false,
        };
        if emptied {
            if let Some(name) = self.static_of(&assign.left) {
                self.statics.insert(name);
            }
        }
        visit::visit_expr_assign(self, assign);
    }

    fn visit_expr_let(&mut self, e: &'ast syn::ExprLet) {
        self.bind_field_alias(&e.pat, &e.expr);
        visit::visit_expr_let(self, e);
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        if let Some(init) = &local.init {
            self.bind_field_alias(&local.pat, &init.expr);
        }
        if let (syn::Pat::Ident(p), Some(init)) = (&local.pat, &local.init) {
            if let Some(name) = self.static_of(&init.expr) {
                self.aliases.push((p.ident.to_string(), name));
            }
        }
        visit::visit_local(self, local);
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.in_own_fn(|r| visit::visit_item_fn(r, item));
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.in_own_fn(|r| visit::visit_impl_item_fn(r, item));
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let ty = match &*item.self_ty {
            syn::Type::Path(p) if p.qself.is_none() => {
                p.path.segments.last().map(|s| s.ident.to_string())
            }
            _ => None,
        };
        let saved = std::mem::replace(&mut self.self_ty, ty);
        visit::visit_item_impl(self, item);
        self.self_ty = saved;
    }
}

impl Releases {
    /// Runs `visit` over a function of its own: the aliases of the function around it do
    /// not reach into it, nor do its own out of it.
    fn in_own_fn(&mut self, visit: impl FnOnce(&mut Self)) {
        let saved = std::mem::take(&mut self.aliases);
        let saved_fields = std::mem::take(&mut self.field_aliases);
        visit(self);
        self.aliases = saved;
        self.field_aliases = saved_fields;
    }

    /// Whether `e` reaches what a field of `self` holds: a chain through `self.field`
    /// (`self.pools.lock().unwrap()`), or rooted at a local bound to one.
    fn reaches_a_field_of_self(&self, e: &syn::Expr) -> bool {
        use crate::syntax::{chain_links, chain_root, ident_of};
        match ident_of(chain_root(e)) {
            Some(root) if root == "self" => {
                chain_links(e).any(|link| matches!(link, syn::Expr::Field(_)))
            }
            Some(root) => self.field_aliases.iter().any(|a| root == a),
            None => false,
        }
    }

    /// Notes the names `pat` binds as aliases of a field of `self` when `init` reaches one.
    fn bind_field_alias(&mut self, pat: &syn::Pat, init: &syn::Expr) {
        if self.self_ty.is_some() && self.reaches_a_field_of_self(init) {
            crate::syntax::pat_idents(pat, &mut |i| self.field_aliases.push(i.to_string()));
        }
    }
}
