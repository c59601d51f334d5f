//! Loops in the walk: each `for`, `while` and `loop` pushes a [`LoopFrame`] (the names its
//! element binds, whether its body trains, its counters) for the walk of its body, and
//! every registered check sees the loop (`Check::on_loop`) before its body is walked.

use rustc_hash::FxHashSet;
use syn::Pat;
use syn::visit::Visit;

use crate::check::{Loop, LoopBody};
use crate::context::{LoopFrame, span_range};
use crate::fn_facts::{trains, trains_expr};
use crate::infer::Value;
use crate::rules::CHECKS;
use crate::syntax::pat_idents;

use super::{Walker, bounded};

impl Walker<'_> {
    pub(super) fn walk_for(&mut self, e: &syn::ExprForLoop) {
        // The iterator is evaluated once, before the loop.
        self.visit_expr(&e.expr);
        let element = element_of(self.cx.env.infer(&e.expr));
        let (start, _) = span_range(&e.for_token);
        let (_, end) = span_range(&e.expr);
        self.walk_loop(
            (start, end),
            Some((&e.pat, element)),
            &[],
            LoopBody::Block(&e.body),
            bounded::counters(Some(&e.pat), Some(&e.expr), &e.body),
            |w| {
                w.note_param_places(&e.pat, &e.expr);
                w.visit_block(&e.body);
            },
        );
    }

    pub(super) fn walk_while(&mut self, e: &syn::ExprWhile) {
        let (start, _) = span_range(&e.while_token);
        let (_, end) = span_range(&e.cond);
        let counters = bounded::counters(None, None, &e.body);
        self.walk_loop(
            (start, end),
            None,
            &[],
            LoopBody::Block(&e.body),
            counters,
            |w| {
                w.visit_expr(&e.cond);
                w.visit_block(&e.body);
            },
        );
    }

    pub(super) fn walk_plain_loop(&mut self, e: &syn::ExprLoop) {
        let head = span_range(&e.loop_token);
        let counters = bounded::counters(None, None, &e.body);
        self.walk_loop(head, None, &[], LoopBody::Block(&e.body), counters, |w| {
            w.visit_block(&e.body)
        });
    }

    pub(super) fn walk_loop(
        &mut self,
        head: (proc_macro2::Span, proc_macro2::Span),
        pat: Option<(&Pat, Value)>,
        inputs: &[&Pat],
        body: LoopBody<'_>,
        counters: FxHashSet<String>,
        walk: impl FnOnce(&mut Self),
    ) {
        let mut element = FxHashSet::default();
        for pat in pat.iter().map(|(p, _)| *p).chain(inputs.iter().copied()) {
            pat_idents(pat, &mut |ident| {
                element.insert(ident.to_string());
            });
        }
        let trains = match body {
            LoopBody::Block(block) => trains(block, &element),
            LoopBody::Expr(e) => trains_expr(e, &element),
        };
        self.cx.f.loops.push(LoopFrame {
            names: FxHashSet::default(),
            element,
            trains,
            counters,
            bounded: 0,
        });
        if let Some((pat, element)) = pat {
            self.bind_pat_value(pat, None, None, element);
        }
        let lp = Loop { head, body };
        for (index, check) in CHECKS.iter().enumerate() {
            if self.sink.enabled_at(index) {
                check.on_loop(&lp, &self.cx, &mut self.sink);
            }
        }
        walk(self);
        self.cx.f.loops.pop();
    }
}

/// What the element bound by `for pat in iter` is: what the iterated value holds, never
/// fresh (it was made before the loop).
pub(super) fn element_of(iterated: Value) -> Value {
    Value {
        fresh: false,
        name: None,
        graph: crate::infer::Graph::Unknown,
        ..iterated
    }
}
