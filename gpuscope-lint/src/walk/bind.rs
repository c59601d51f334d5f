//! Binding names as the walk meets them: patterns matched against declared types and
//! initializers, names bound again (which forget what the old binding referred to), and
//! the places inside a `&mut` parameter that a binding reaches (`out.as_mut()`,
//! `slots.iter_mut()`), through which a store reaches the caller's memory.

use syn::{Expr, Pat, Type};

use super::Walker;
use crate::context::ParamPlace;
use crate::infer::Value;
use crate::syntax::{is_wrapper_path, pat_idents, path_names, strip};

/// Methods that give access to a place inside their receiver (its elements, its `Some`).
const PLACE_METHODS: &[&str] = &[
    "as_mut",
    "as_deref_mut",
    "iter_mut",
    "values_mut",
    "get_mut",
    "first_mut",
    "last_mut",
    "unwrap",
    "expect",
];

impl Walker<'_> {
    /// Binds the names of `pat`, with what a declared type or an initializer says; names
    /// bound inside a loop body are recorded as that loop's. Tuple patterns are matched
    /// element by element against tuple types and tuple initializers:
    /// `let (mut sum, mut n) = (0.0, 0);`.
    pub(super) fn bind_pat(&mut self, pat: &Pat, ty: Option<&Type>, init: Option<&Expr>) {
        let value = match (ty, init) {
            (Some(ty), init) => {
                let declared = self.cx.env.of_type(ty);
                match init {
                    Some(init) if declared.kind == crate::infer::Kind::Unknown => {
                        self.cx.env.infer(init)
                    }
                    _ => declared,
                }
            }
            (None, Some(init)) => self.cx.env.infer(init),
            (None, None) => Value::UNKNOWN,
        };
        self.bind_pat_value(pat, ty, init, value);
    }

    pub(super) fn bind_pat_value(
        &mut self,
        pat: &Pat,
        ty: Option<&Type>,
        init: Option<&Expr>,
        value: Value,
    ) {
        match pat {
            Pat::Type(t) => self.bind_pat(&t.pat, Some(&t.ty), init),
            Pat::Ident(p) if p.subpat.is_none() => {
                let mut value = value;
                if p.by_ref.is_some() {
                    value.borrowed = true;
                }
                self.bind(p.ident.to_string(), value);
            }
            Pat::Tuple(tuple) => {
                let types = match ty {
                    Some(Type::Tuple(t)) if t.elems.len() == tuple.elems.len() => Some(&t.elems),
                    _ => None,
                };
                let inits = match init.map(strip) {
                    Some(Expr::Tuple(t)) if t.elems.len() == tuple.elems.len() => Some(&t.elems),
                    _ => None,
                };
                for (i, elem) in tuple.elems.iter().enumerate() {
                    let (ty, init) = (types.map(|t| &t[i]), inits.map(|e| &e[i]));
                    if ty.is_some() || init.is_some() {
                        self.bind_pat(elem, ty, init);
                    } else {
                        let part = Value {
                            fresh: false,
                            name: None,
                            ..value.clone()
                        };
                        self.bind_pat_value(elem, None, None, part);
                    }
                }
            }
            _ => {
                let mut names = Vec::new();
                pat_idents(pat, &mut |ident| names.push(ident.to_string()));
                for name in names {
                    let part = Value {
                        fresh: false,
                        name: None,
                        ..value.clone()
                    };
                    self.bind(name, part);
                }
            }
        }
    }

    pub(super) fn bind(&mut self, name: String, value: Value) {
        self.cx.f.aliases.retain(|(alias, _)| *alias != name);
        self.cx.f.param_places.retain(|p| p.alias != name);
        if let Some(frame) = self.cx.f.loops.last_mut() {
            frame.names.insert(name.clone());
        }
        self.cx.env.bind(name, value);
    }

    /// Notes the names `pat` binds as places inside a `&mut` parameter when `init` reaches
    /// into one (`out.as_mut()`, `slots.iter_mut()`, `&mut slots[0]`, `slot_of(out)`), so
    /// that storing through them stores into the caller's memory.
    pub(super) fn note_param_places(&mut self, pat: &Pat, init: &Expr) {
        let Some((param, deref_only)) = self.param_place(init) else {
            return;
        };
        pat_idents(pat, &mut |ident| {
            self.cx.f.param_places.push(ParamPlace {
                alias: ident.to_string(),
                param: param.clone(),
                deref_only,
            });
        });
    }

    /// The `&mut` parameter (`&mut self` included) whose contents `e` reaches through
    /// `&mut`, indexing, fields, `?`, the accessors of [`PLACE_METHODS`] and calls that
    /// return a reference into an argument, if any; and whether only a store through `*`
    /// shows the place is one (a call of a function the file does not declare).
    fn param_place(&self, mut e: &Expr) -> Option<(String, bool)> {
        loop {
            e = match e {
                Expr::Paren(p) => &p.expr,
                Expr::Group(g) => &g.expr,
                Expr::Reference(r) if r.mutability.is_some() => &r.expr,
                Expr::Unary(syn::ExprUnary {
                    op: syn::UnOp::Deref(_),
                    expr,
                    ..
                }) => expr,
                Expr::Try(t) => &t.expr,
                Expr::Index(i) => &i.expr,
                Expr::Field(f) => &f.base,
                Expr::MethodCall(m) if PLACE_METHODS.iter().any(|p| m.method == p) => &m.receiver,
                // `self.slot_mut(i)` where the file declares `slot_mut` to return `&mut`.
                Expr::MethodCall(m)
                    if self.call_gives_place(&m.method.to_string()) == Some(false) =>
                {
                    &m.receiver
                }
                // `slot_of(out)`: a reference into the argument it borrows from.
                Expr::Call(call) => {
                    let Expr::Path(f) = strip(&call.func) else {
                        return None;
                    };
                    let segments = path_names(&f.path);
                    if is_wrapper_path(&segments) {
                        return None;
                    }
                    let unknown = self.call_gives_place(segments.last()?)?;
                    let (param, inner) = call.args.iter().find_map(|a| self.param_place(a))?;
                    return Some((param, unknown || inner));
                }
                Expr::Path(p) => {
                    let name = p.path.get_ident()?.to_string();
                    let param = self.cx.f.params.contains(&name)
                        && self.cx.env.binding(&name).is_some_and(|b| b.mutable);
                    return param.then_some((name, false));
                }
                _ => return None,
            };
        }
    }

    /// Whether a call of the function or method `name` can return a place inside its
    /// argument: `Some(false)` where the file declares it to return a `&mut` (alone or in
    /// an `Option` or `Result`), `Some(true)` where the file does not declare it (then only
    /// a store through `*` tells), `None` where it declares another return type.
    fn call_gives_place(&self, name: &str) -> Option<bool> {
        match self.cx.index().returns.get(name) {
            Some(Some(ty)) => mut_ref_in(ty).then_some(false),
            Some(None) => None,
            None => Some(true),
        }
    }
}

/// Whether `ty` is a `&mut`, or an `Option`, `Result` or other generic type over one.
fn mut_ref_in(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => r.mutability.is_some(),
        Type::Paren(p) => mut_ref_in(&p.elem),
        Type::Group(g) => mut_ref_in(&g.elem),
        Type::Path(p) => p.path.segments.last().is_some_and(|s| match &s.arguments {
            syn::PathArguments::AngleBracketed(a) => a.args.iter().any(|arg| match arg {
                syn::GenericArgument::Type(t) => mut_ref_in(t),
                _ => false,
            }),
            _ => false,
        }),
        _ => false,
    }
}
