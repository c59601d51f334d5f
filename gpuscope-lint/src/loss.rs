//! Which values hold a loss (a tensor carrying its autograd graph) and which are detached
//! numbers: the question [`graph_accumulation`](crate::rules) asks of what is accumulated.
//!
//! A binding is loss-like when its name contains `loss`, when it is bound from a loss-like
//! expression, or when `.backward()` is called on it somewhere in the function. Values passed
//! through `.item()`, `.detach()`, `.to_vec()`, `f32::from` or an `as` cast are detached, as are
//! literals and bindings whose type annotation is plain data (`f32`, `Vec<f64>`).

use syn::{BinOp, Expr, Type};

use crate::syntax::{SCALARS, callee_path, is_plain_type, strip};
use crate::visit::State;

/// What a value is, as far as the syntax tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// A plain number or other value with no graph.
    Detached,
    /// A tensor that carries a loss's autograd graph.
    Loss,
    /// Cannot tell.
    Unknown,
}

/// Methods whose result holds no graph: reads to the host, `detach`, sizes.
const DETACHING: &[&str] = &[
    "item",
    "detach",
    "detach_",
    "to_vec",
    "to_vec0",
    "to_vec1",
    "to_vec2",
    "to_vec3",
    "to_scalar",
    "into_scalar",
    "double_value",
    "f64_value",
    "int64_value",
    "to_string",
    "len",
    "numel",
    "is_empty",
];

/// Whether a binding's name says it holds a loss (`loss`, `val_loss`, `lossTotal`).
pub(crate) fn is_loss_name(name: &str) -> bool {
    contains_ignore_case(name, "loss")
}

/// Whether a function or method name says it computes a loss: it contains `loss` or
/// `cross_entropy`, or one of its `_`-separated words is `mse`, `nll` or `bce`.
pub(crate) fn is_loss_fn_name(name: &str) -> bool {
    is_loss_name(name)
        || contains_ignore_case(name, "cross_entropy")
        || name.split('_').any(|word| {
            ["mse", "nll", "bce"]
                .iter()
                .any(|w| word.eq_ignore_ascii_case(w))
        })
}

fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    haystack
        .as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// The class of a new binding called `name`, with an optional type annotation and initializer.
pub(crate) fn classify_binding(
    name: &str,
    ty: Option<&Type>,
    init: Option<&Expr>,
    st: &State<'_>,
) -> Class {
    if ty.is_some_and(is_plain_type) {
        return Class::Detached;
    }
    match init.map(|e| classify(e, st)) {
        Some(Class::Detached) => Class::Detached,
        Some(Class::Loss) => Class::Loss,
        _ if is_loss_name(name) => Class::Loss,
        _ => Class::Unknown,
    }
}

/// The class of the value of `e`.
pub(crate) fn classify(e: &Expr, st: &State<'_>) -> Class {
    match strip(e) {
        Expr::Lit(_) | Expr::Cast(_) => Class::Detached,
        Expr::Path(p) => match p.path.get_ident() {
            Some(ident) => st.binding_class(&ident.to_string()),
            None => Class::Unknown,
        },
        Expr::Field(f) => match &f.member {
            syn::Member::Named(name) if is_loss_name(&name.to_string()) => Class::Loss,
            _ => Class::Unknown,
        },
        Expr::MethodCall(m) => {
            let method = m.method.to_string();
            if DETACHING.contains(&method.as_str()) {
                return Class::Detached;
            }
            if is_loss_fn_name(&method) {
                return Class::Loss;
            }
            let receiver = classify(&m.receiver, st);
            if receiver == Class::Loss || m.args.iter().any(|a| classify(a, st) == Class::Loss) {
                Class::Loss
            } else if receiver == Class::Detached
                && m.args.iter().all(|a| classify(a, st) == Class::Detached)
            {
                Class::Detached
            } else {
                Class::Unknown
            }
        }
        Expr::Call(call) => {
            let Some(path) = callee_path(call) else {
                return Class::Unknown;
            };
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            match segments.as_slice() {
                [.., ty, conv]
                    if SCALARS.contains(&ty.as_str()) && (conv == "from" || conv == "try_from") =>
                {
                    Class::Detached
                }
                [.., name] if is_loss_fn_name(name) => Class::Loss,
                _ => Class::Unknown,
            }
        }
        Expr::Binary(b) => match b.op {
            BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_) | BinOp::Rem(_) => {
                match (classify(&b.left, st), classify(&b.right, st)) {
                    (Class::Loss, _) | (_, Class::Loss) => Class::Loss,
                    (Class::Detached, Class::Detached) => Class::Detached,
                    _ => Class::Unknown,
                }
            }
            BinOp::Eq(_)
            | BinOp::Ne(_)
            | BinOp::Lt(_)
            | BinOp::Le(_)
            | BinOp::Gt(_)
            | BinOp::Ge(_)
            | BinOp::And(_)
            | BinOp::Or(_) => Class::Detached,
            _ => Class::Unknown,
        },
        Expr::Unary(u) => classify(&u.expr, st),
        Expr::Try(t) => classify(&t.expr, st),
        Expr::Await(a) => classify(&a.base, st),
        _ => Class::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_names() {
        assert!(is_loss_name("loss"));
        assert!(is_loss_name("val_Loss"));
        assert!(!is_loss_name("lost"));
        assert!(is_loss_fn_name("cross_entropy_for_logits"));
        assert!(is_loss_fn_name("mse"));
        assert!(is_loss_fn_name("mse_loss"));
        assert!(is_loss_fn_name("nll"));
        assert!(!is_loss_fn_name("itemset"));
        assert!(!is_loss_fn_name("forward"));
    }
}
