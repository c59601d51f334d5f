//! The rules, one file each. Every rule module has a `RULE` constant (name, default level,
//! summary) and a `check` function that the [walker](crate::visit) calls on every
//! expression (`check(expr, state, sink)`) or, for loop rules, on every loop
//! (`check_loop(loop, state, sink)`). [`RULES`] lists them all; adding a rule means adding
//! a file here, its `RULE` to [`RULES`] and its call to [`check_expr`] or [`check_loop`].

use proc_macro2::Span;
use syn::Expr;

use crate::Rule;
use crate::visit::{Sink, State};

mod backward_in_no_grad;
mod empty_cache_in_loop;
mod forget_tensor;
mod graph_accumulation;
mod item_in_hot_loop;
mod missing_zero_grad;
mod out_of_place_update;
mod retain_graph_in_loop;
mod static_escape;

/// Every rule, in the order diagnostics and `gpuscope lint --list-rules` show them.
///
/// ```
/// use gpuscope_lint::{Level, RULES};
///
/// let names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
/// assert_eq!(names[..3], ["forget_tensor", "static_escape", "backward_in_no_grad"]);
/// assert!(RULES.iter().all(|r| !r.summary.is_empty()));
/// assert_eq!(RULES.iter().filter(|r| r.default == Level::Deny).count(), 3);
/// ```
pub const RULES: &[Rule] = &[
    forget_tensor::RULE,
    static_escape::RULE,
    backward_in_no_grad::RULE,
    graph_accumulation::RULE,
    missing_zero_grad::RULE,
    empty_cache_in_loop::RULE,
    retain_graph_in_loop::RULE,
    out_of_place_update::RULE,
    item_in_hot_loop::RULE,
];

/// The rule named `name`, if there is one.
///
/// ```
/// assert_eq!(gpuscope_lint::rule("static_escape").map(|r| r.name), Some("static_escape"));
/// ```
pub fn rule(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.name == name)
}

/// A loop as the loop rules see it: the span of its head and its body.
pub(crate) struct Loop<'a> {
    /// `for pat in expr`, `while cond`, `loop`, or the `for_each` of `.for_each(|..| ..)`.
    pub(crate) span: Span,
    pub(crate) body: LoopBody<'a>,
}

/// The body of a [`Loop`].
#[derive(Clone, Copy)]
pub(crate) enum LoopBody<'a> {
    Block(&'a syn::Block),
    /// The body of a closure passed to `for_each`.
    Expr(&'a Expr),
}

/// Runs the expression rules on `e`.
pub(crate) fn check_expr(e: &Expr, st: &State<'_>, sink: &mut Sink<'_>) {
    match e {
        Expr::Call(_) => {
            forget_tensor::check(e, st, sink);
            empty_cache_in_loop::check(e, st, sink);
            retain_graph_in_loop::check(e, st, sink);
        }
        Expr::MethodCall(_) => {
            static_escape::check(e, st, sink);
            backward_in_no_grad::check(e, st, sink);
            graph_accumulation::check(e, st, sink);
            empty_cache_in_loop::check(e, st, sink);
            retain_graph_in_loop::check(e, st, sink);
            item_in_hot_loop::check(e, st, sink);
        }
        Expr::Assign(_) => {
            static_escape::check(e, st, sink);
            graph_accumulation::check(e, st, sink);
            out_of_place_update::check(e, st, sink);
        }
        Expr::Binary(_) => {
            static_escape::check(e, st, sink);
            graph_accumulation::check(e, st, sink);
        }
        _ => {}
    }
}

/// Runs the loop rules on `lp`.
pub(crate) fn check_loop(lp: &Loop<'_>, st: &State<'_>, sink: &mut Sink<'_>) {
    missing_zero_grad::check_loop(lp, st, sink);
}
