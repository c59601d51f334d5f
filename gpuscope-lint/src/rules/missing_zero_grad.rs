//! `missing_zero_grad` (warn): a loop whose body (nested blocks and closures included)
//! calls `.backward()` and `.step()` but never `.zero_grad()` (or any `zero_grad*` method or
//! function, on the optimizer or the model, before or after `backward`): gradients add up
//! across iterations. `backward_step(..)`, which zeroes, steps and backs off in one call,
//! counts as zeroing. When a nested loop does the backward and step itself, the nested loop
//! is the one checked.

use syn::Expr;
use syn::visit::{self, Visit};

use super::{Loop, LoopBody};
use crate::visit::{Sink, State};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "missing_zero_grad",
    default: Level::Warn,
    summary: "a loop calls `.backward()` and `.step()` but never `.zero_grad()`: gradients accumulate",
};

pub(crate) fn check_loop(lp: &Loop<'_>, _st: &State<'_>, sink: &mut Sink<'_>) {
    if !sink.enabled(&RULE) {
        return;
    }
    let mut scan = Scan::default();
    match lp.body {
        LoopBody::Block(block) => scan.visit_block(block),
        LoopBody::Expr(e) => scan.visit_expr(e),
    }
    if scan.backward && scan.step && !scan.zero_grad && !scan.nested_trains {
        sink.emit(
            &RULE,
            lp.span,
            "this loop calls `.backward()` and `.step()` but never `.zero_grad()`: gradients add up across iterations".to_owned(),
            "call `optimizer.zero_grad()` in every iteration, before `.backward()`"
                .to_owned(),
        );
    }
}

/// What a loop body calls.
#[derive(Default)]
struct Scan {
    backward: bool,
    step: bool,
    zero_grad: bool,
    /// A nested loop calls both `.backward()` and `.step()` (it is checked on its own).
    nested_trains: bool,
}

impl Scan {
    fn nested(&mut self, walk: impl FnOnce(&mut Scan)) {
        let mut inner = Scan::default();
        walk(&mut inner);
        self.nested_trains |= inner.nested_trains || (inner.backward && inner.step);
        self.backward |= inner.backward;
        self.step |= inner.step;
        self.zero_grad |= inner.zero_grad;
    }

    fn name(&mut self, name: &str) {
        match name {
            "backward" => self.backward = true,
            "step" => self.step = true,
            "backward_step" | "backward_step_clip" | "backward_step_clip_norm" => {
                self.zero_grad = true
            }
            _ if name.starts_with("zero_grad") => self.zero_grad = true,
            _ => {}
        }
    }
}

impl<'ast> Visit<'ast> for Scan {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        self.name(&call.method.to_string());
        if call.method == "for_each" || call.method == "try_for_each" {
            self.visit_expr(&call.receiver);
            self.nested(|inner| call.args.iter().for_each(|a| inner.visit_expr(a)));
        } else {
            visit::visit_expr_method_call(self, call);
        }
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let Expr::Path(p) = &*call.func {
            if let Some(last) = p.path.segments.last() {
                self.name(&last.ident.to_string());
            }
        }
        visit::visit_expr_call(self, call);
    }

    fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
        self.visit_expr(&e.expr);
        self.nested(|inner| inner.visit_block(&e.body));
    }

    fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
        self.nested(|inner| visit::visit_expr_while(inner, e));
    }

    fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
        self.nested(|inner| visit::visit_expr_loop(inner, e));
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

#[cfg(test)]
mod tests {
    use crate::testing::{findings, hits};

    const RULE: &str = "missing_zero_grad";

    #[test]
    fn fires_on_loops_without_zero_grad() {
        let src = r#"
fn train(model: &Model, opt: &mut Sgd, data: &[Batch]) {
    opt.zero_grad();
    for batch in data.iter().take(10) {
        let loss = model.loss(batch);
        loss.backward();
        opt.step();
    }
    let mut i = 0;
    while i < 10 {
        if i % 2 == 0 { model.loss(&data[i]).backward(); }
        opt.step();
        i += 1;
    }
    data.iter().for_each(|b| { model.loss(b).backward(); opt.step(); });
}
"#;
        assert_eq!(hits(RULE, src), [(4, 5), (10, 5), (15, 17)]);
        let f = &findings(RULE, src)[0];
        assert!(f.message.contains("never `.zero_grad()`"));
        assert!(f.help.contains("optimizer.zero_grad()"));
    }

    #[test]
    fn nested_training_loop_is_reported_once() {
        let src = r#"
fn train(model: &Model, opt: &mut Sgd, epochs: usize, data: &[Batch]) {
    for epoch in 0..epochs {
        opt.zero_grad();
        for batch in data {
            model.loss(batch).backward();
            opt.step();
        }
    }
}
"#;
        assert_eq!(hits(RULE, src), [(5, 9)]);
    }

    #[test]
    fn zero_grad_anywhere_in_the_body_is_fine() {
        let src = r#"
fn train(model: &mut Model, opt: &mut Sgd, data: &[Batch]) {
    for batch in data {
        opt.zero_grad();
        model.loss(batch).backward();
        opt.step();
    }
    for batch in data {
        model.loss(batch).backward();
        opt.step();
        model.zero_grad();
    }
    for (i, batch) in data.iter().enumerate() {
        model.loss(batch).backward();
        if i % 4 == 3 {
            opt.step();
            opt.zero_grad_set_to_none();
        }
    }
    for batch in data {
        for micro in batch.split(4) {
            model.loss(&micro).backward();
        }
        opt.step();
        zero_grad(&mut model.params);
    }
    for batch in data {
        opt.backward_step(&model.loss(batch));
    }
    for batch in data {
        model.loss(batch).backward();
    }
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
