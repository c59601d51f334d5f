//! `backward_in_no_grad` (deny): `.backward()` where gradients are off.

use syn::Expr;

use crate::check::{Check, Trigger};
use crate::context::{Cx, NoGrad, Sink};
use crate::syntax::show;
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "backward_in_no_grad",
    default: Level::Deny,
    summary: "`.backward()` called where gradients are off (`#[no_grad]` fn, `no_grad(|| ..)` closure, no-grad guard)",
    docs: DOCS,
};

const DOCS: &str = r#"## `backward_in_no_grad`

Default level: **deny**.

### What it does
Finds `.backward()` called where gradients are off: in a `#[no_grad]` function, in a
closure passed to `no_grad(..)` (gpuscope, tch), or after a no-grad guard in the same block
(`let _g = GradModeGuard::no_grad();`, `let _g = tch::no_grad_guard();`). A closure passed
to `enable_grad(..)` / `with_grad(..)` turns gradients back on.

### Why is this bad
No autograd graph was recorded there, so the call fails or computes nothing, and the
activations the code meant to free by turning gradients off are what it meant to train on.

### Example
```rust
#[no_grad]
fn evaluate(model: &Model, x: &Tensor, y: &Tensor) -> f32 {
    let loss = model.forward(x).mse_loss(y);
    loss.backward();
    loss.item()
}
```
Use instead:
```rust
#[no_grad]
fn evaluate(model: &Model, x: &Tensor, y: &Tensor) -> f32 {
    let loss = model.forward(x).mse_loss(y);
    loss.item()
}
```

### Known problems
- A guard taken in a caller, or gradients turned off through a library call the tables do
  not know, are not seen.
"#;

/// The rule's checks.
pub(crate) struct BackwardInNoGrad;

impl Check for BackwardInNoGrad {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // A `.backward()` call.
        Some(&[Trigger::Part("backward")])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        let Expr::MethodCall(call) = e else { return };
        if call.method != "backward" {
            return;
        }
        let Some(no_grad) = cx.f.no_grad else { return };
        let place = match no_grad {
            NoGrad::Fn => "a `#[no_grad]` function",
            NoGrad::Closure => "a closure passed to `no_grad(..)`",
            NoGrad::Guard => "a block holding a no-grad guard",
        };
        let value = show(&call.receiver);
        sink.emit(
            &RULE,
            e,
            format!("`{value}.backward()` inside {place}: no autograd graph was recorded, so there is nothing to differentiate"),
            "compute the loss and call `.backward()` outside `no_grad` (or inside `enable_grad(|| ..)`); keep `no_grad` for evaluation".to_owned(),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{findings, hits};

    const RULE: &str = "backward_in_no_grad";

    #[test]
    fn fires_in_no_grad_fn_closure_and_guard() {
        let src = r#"
#[gpuscope::no_grad]
fn eval(model: &Model, x: &Tensor) {
    let loss = model.forward(x).mean();
    loss.backward();
}
fn train(model: &Model, x: &Tensor) {
    let out = gpuscope::no_grad(|| {
        let l = model.forward(x).sum();
        l.backward();
        l
    });
    {
        let _guard = tch::no_grad_guard();
        out.backward();
    }
}
"#;
        assert_eq!(hits(RULE, src), [(5, 5), (10, 9), (15, 9)]);
        let all = findings(RULE, src);
        assert!(
            all[0]
                .message
                .starts_with("`loss.backward()` inside a `#[no_grad]` function"),
            "{}",
            all[0].message
        );
        assert!(all[1].message.contains("a closure passed to `no_grad(..)`"));
        assert!(all[2].message.contains("no-grad guard"));
    }

    #[test]
    fn context_flag_from_the_macro_counts() {
        let item: syn::ItemFn = syn::parse_str("fn eval(l: Tensor) { l.backward(); }").unwrap();
        let ctx = crate::FnContext {
            no_grad: true,
            scoped: false,
        };
        let found = crate::lint_fn(&item, ctx, &crate::Levels::default());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rule, RULE);
        let found = crate::lint_fn(
            &item,
            crate::FnContext::default(),
            &crate::Levels::default(),
        );
        assert!(found.is_empty());
    }

    #[test]
    fn backward_outside_no_grad_is_fine() {
        let src = r#"
fn train(model: &Model, x: &Tensor) {
    let eval = no_grad(|| model.forward(x));
    let loss = model.forward(x).mean();
    loss.backward();
    {
        let _guard = no_grad_guard();
        let y = model.forward(x);
    }
    loss.backward();
}
#[no_grad]
fn eval(model: &Model, x: &Tensor) {
    let g = enable_grad(|| { let l = model.forward(x).sum(); l.backward(); l });
    fn helper(l: Tensor) { l.backward(); }
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn closure_given_to_something_else_is_fine() {
        let src = r#"
fn train(pool: &Pool, loss: Tensor) {
    pool.run(|| loss.backward());
    spawn(move || loss.backward());
    no_grad_stats(|| loss.backward());
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
