//! Binding names as the walk meets them: patterns matched against declared types and
//! initializers, names bound again (which forget what the old binding referred to), and
//! the places inside a `&mut` parameter that a binding reaches (`out.as_mut()`,
//! `slots.iter_mut()`), through which a store reaches the caller's memory.

use syn::{Expr, Pat, Type};

use super::Walker;
use crate::infer::Value;
use crate::syntax::{pat_idents, strip};

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
        self.cx.f.param_places.retain(|(alias, _)| *alias != name);
        if let Some(frame) = self.cx.f.loops.last_mut() {
            frame.names.insert(name.clone());
        }
        self.cx.env.bind(name, value);
    }

    /// Notes the names `pat` binds as places inside a `&mut` parameter when `init` reaches
    /// into one (`out.as_mut()`, `slots.iter_mut()`, `&mut slots[0]`), so that storing
    /// through them stores into the caller's memory.
    pub(super) fn note_param_places(&mut self, pat: &Pat, init: &Expr) {
        let Some(param) = self.param_place(init) else {
            return;
        };
        pat_idents(pat, &mut |ident| {
            self.cx
                .f
                .param_places
                .push((ident.to_string(), param.clone()));
        });
    }

    /// The `&mut` parameter (`&mut self` included) whose contents `e` reaches through
    /// `&mut`, indexing, fields, `?` and the accessors of [`PLACE_METHODS`], if any.
    fn param_place(&self, mut e: &Expr) -> Option<String> {
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
                Expr::Path(p) => {
                    let name = p.path.get_ident()?.to_string();
                    let param = self.cx.f.params.contains(&name)
                        && self.cx.env.binding(&name).is_some_and(|b| b.mutable);
                    return param.then_some(name);
                }
                _ => return None,
            };
        }
    }
}
