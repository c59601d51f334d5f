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

    /// Words of which a function must contain at least one (between its `fn` and its closing
    /// brace) for this rule to fire in it; `None` when the rule can fire anywhere (every
    /// file is then walked when it is enabled). `Keyword` words count anywhere in the file.
    ///
    /// Only identifiers count, not comments or string contents. A rule that fires on a call
    /// named `x` or on a binding whose name has the word `loss` declares `Part("x")` or
    /// `Part("loss")`: the words are a necessary condition, not a sufficient one. In debug
    /// builds `lint_source` walks every skipped file and function anyway and panics if a
    /// finding comes out, so the test suite and the fuzzer check that the words are complete.
    fn triggers(&self) -> Option<&'static [Trigger]> {
        None
    }

    /// Checks one expression (called for every expression, in source order, with the
    /// context of that place).
    fn expr(&self, _e: &Expr, _cx: &Cx<'_>, _sink: &mut Sink) {}

    /// Checks one loop (called when the walker enters it, before its body).
    fn on_loop(&self, _lp: &Loop<'_>, _cx: &Cx<'_>, _sink: &mut Sink) {}
}

/// A word a rule needs ([`Check::triggers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// An identifier containing this text (two bytes or more), in any ASCII case (written in
    /// lowercase here):
    /// `Part("loss")` matches `val_loss`, `LossFn` and `r#loss`.
    Part(&'static str),
    /// An identifier that is exactly this keyword: `Keyword("static")` matches the item
    /// `static X` (or one inside `thread_local!`), not the lifetime `'static`.
    Keyword(&'static str),
    /// An identifier in SCREAMING_CASE at the root of a place that can be stored into
    /// (`CACHE.lock()`, `CACHE[i] = ..`, `CACHE = ..`, `CACHE += ..`): a static declared in
    /// another file.
    ScreamingRoot,
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
