//! `missing_zero_grad` (warn): a training loop that runs `backward()` and an optimizer
//! step but never clears gradients, with a library whose gradients accumulate.

use syn::Expr;
use syn::visit::{self, Visit};

use crate::check::{Check, Loop, LoopBody, Trigger};
use crate::context::{Cx, Sink};
use crate::frameworks::{Gradients, Used};
use crate::syntax::unwrapped;
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "missing_zero_grad",
    default: Level::Warn,
    summary: "a loop calls `.backward()` and `.step()` but never `.zero_grad()`: gradients accumulate",
    docs: DOCS,
};

const DOCS: &str = r#"## `missing_zero_grad`

Default level: **warn**.

### What it does
Finds a loop whose body (nested blocks and closures included) calls `.backward()` and an
optimizer step (`opt.step()`) but never clears gradients (`zero_grad`, any `zero_grad*`
method or function, `backward_step`, the clearing calls of the library's table), in code
whose library accumulates gradients (gpuscope, tch, neuronika, or no library named).

Libraries that return gradients as a value (candle's `GradStore`, burn's `Gradients`,
dfdx's `Gradients`) never fire, and neither does a loop where `backward()`'s result is kept
(`let grads = loss.backward();`) or where the step takes arguments (`opt.step(&grads)`,
`optim.step(lr, model, grads)`): nothing accumulates there. When a nested loop does the
backward and the step itself, the nested loop is the one checked.

### Why is this bad
With PyTorch's semantics `backward()` adds into each parameter's gradient. Without clearing,
every step applies the sum of all gradients so far: training diverges, and the gradient
buffers stay allocated for the whole run.

### Example
```rust
fn train(model: &Model, opt: &mut Sgd, data: &[Batch]) {
    for batch in data {
        let loss = model.loss(batch);
        loss.backward();
        opt.step();
    }
}
```
Use instead:
```rust
fn train(model: &Model, opt: &mut Sgd, data: &[Batch]) {
    for batch in data {
        opt.zero_grad();
        let loss = model.loss(batch);
        loss.backward();
        opt.step();
    }
}
```

### Known problems
- Clearing done by a helper function of another name (`reset(&mut model)`) is not seen: allow
  the rule on that function.
- A loop that accumulates gradients over micro-batches on purpose and clears them after the
  loop is reported only if the step is inside the loop.
"#;

/// The rule's checks.
pub(crate) struct MissingZeroGrad;

impl Check for MissingZeroGrad {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // A loop calling `.backward()`.
        Some(&[Trigger::Part("backward")])
    }

    fn on_loop(&self, lp: &Loop<'_>, cx: &Cx<'_>, sink: &mut Sink) {
        if !sink.enabled(&RULE) || cx.used().gradients() != Gradients::Accumulate {
            return;
        }
        let mut scan = Scan::new(cx.used());
        match lp.body {
            LoopBody::Block(block) => scan.visit_block(block),
            LoopBody::Expr(e) => scan.visit_expr(e),
        }
        let s = scan.found;
        if s.backward && s.step && !s.zero_grad && !s.nested_trains && !s.returned {
            let libraries: Vec<&str> = cx.used().iter().map(|f| f.name).collect();
            let note = (!libraries.is_empty()).then(|| {
                format!(
                    "with {}, `backward()` adds into the gradients that the step reads",
                    libraries.join(" and ")
                )
            });
            sink.emit_spans(
                &RULE,
                lp.head,
                "this loop calls `.backward()` and `.step()` but never `.zero_grad()`: gradients add up across iterations".to_owned(),
                "call `optimizer.zero_grad()` in every iteration, before `.backward()`".to_owned(),
                note,
            );
        }
    }
}

/// What a loop body calls.
#[derive(Clone, Copy, Default)]
struct Found {
    /// A `backward` call whose result is dropped.
    backward: bool,
    /// An optimizer step without arguments.
    step: bool,
    zero_grad: bool,
    /// Gradients are handled as values: `backward()`'s result is kept, or a step takes
    /// arguments.
    returned: bool,
    /// A nested loop calls both `.backward()` and `.step()` (it is checked on its own).
    nested_trains: bool,
}

struct Scan<'u> {
    used: &'u Used,
    found: Found,
}

impl<'u> Scan<'u> {
    fn new(used: &'u Used) -> Self {
        Scan {
            used,
            found: Found::default(),
        }
    }

    fn nested(&mut self, walk: impl FnOnce(&mut Scan<'u>)) {
        let mut inner = Scan::new(self.used);
        walk(&mut inner);
        let (f, i) = (&mut self.found, inner.found);
        f.nested_trains |= i.nested_trains || (i.backward && i.step);
        f.backward |= i.backward;
        f.step |= i.step;
        f.zero_grad |= i.zero_grad;
        f.returned |= i.returned;
    }

    /// A call of `name` with `args` arguments, its result kept (`kept`) or dropped.
    fn call(&mut self, name: &str, args: usize, kept: bool) {
        if self.used.clears_grads(name) {
            self.found.zero_grad = true;
        } else if name == "backward" {
            if kept {
                self.found.returned = true;
            } else {
                self.found.backward = true;
            }
        } else if self.used.is_step(name) {
            if args == 0 {
                self.found.step = true;
            } else {
                self.found.returned = true;
            }
        }
    }

    /// Visits `e`, whose value is used (bound, passed, assigned) rather than dropped.
    fn kept(&mut self, e: &Expr) {
        if let Expr::MethodCall(m) = unwrapped(e) {
            if m.method == "backward" {
                self.found.returned = true;
            }
        }
        self.visit_expr(e);
    }
}

impl<'ast> Visit<'ast> for Scan<'_> {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        self.call(&call.method.to_string(), call.args.len(), false);
        if call.method == "for_each" || call.method == "try_for_each" {
            self.visit_expr(&call.receiver);
            self.nested(|inner| call.args.iter().for_each(|a| inner.visit_expr(a)));
        } else {
            self.visit_expr(&call.receiver);
            call.args.iter().for_each(|a| self.kept(a));
        }
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let Expr::Path(p) = &*call.func {
            if let Some(last) = p.path.segments.last() {
                self.call(&last.ident.to_string(), call.args.len(), false);
            }
        }
        call.args.iter().for_each(|a| self.kept(a));
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        if let Some(init) = &local.init {
            // `let _ = loss.backward();` drops the result.
            if matches!(local.pat, syn::Pat::Wild(_)) {
                self.visit_expr(&init.expr);
            } else {
                self.kept(&init.expr);
            }
        }
    }

    fn visit_expr_assign(&mut self, assign: &'ast syn::ExprAssign) {
        self.kept(&assign.right);
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
