//! [`Check`], the one small trait through which rules register: a rule is a unit struct
//! implementing it, listed in [`CHECKS`](crate::rules::CHECKS). The walker calls
//! [`Check::expr`] on every expression and [`Check::on_loop`] on every loop, handing over
//! the [`Cx`] (what is known there) and the [`Sink`] (where findings go). Rules know
//! neither the walker nor each other.

use proc_macro2::Span;
use syn::Expr;

use crate::Rule;
use crate::context::{Cx, Sink};

/// A lint rule's checks. Both hooks do nothing unless the rule overrides them.
pub(crate) trait Check: Sync {
    /// The rule's description (name, default level, docs).
    fn rule(&self) -> &'static Rule;

    /// Checks one expression (called for every expression, in source order, with the
    /// context of that place).
    fn expr(&self, _e: &Expr, _cx: &Cx<'_>, _sink: &mut Sink) {}

    /// Checks one loop (called when the walker enters it, before its body).
    fn on_loop(&self, _lp: &Loop<'_>, _cx: &Cx<'_>, _sink: &mut Sink) {}
}

/// A loop as the loop rules see it: the span of its head and its body.
pub(crate) struct Loop<'a> {
    /// First and last tokens of `for pat in expr`, `while cond`, `loop`, or the
    /// `for_each` of `.for_each(|..| ..)`.
    pub(crate) head: (Span, Span),
    pub(crate) body: LoopBody<'a>,
}

/// The body of a [`Loop`].
#[derive(Clone, Copy)]
pub(crate) enum LoopBody<'a> {
    Block(&'a syn::Block),
    /// The body of a closure passed to `for_each`.
    Expr(&'a Expr),
}
