//! `item_in_hot_loop` (allow): `.item()` inside an inner loop.

use syn::Expr;

use crate::check::{Check, Trigger};
use crate::context::{Cx, Sink};
use crate::syntax::show;
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "item_in_hot_loop",
    default: Level::Allow,
    summary: "`.item()` in an inner loop synchronizes with the device on every iteration",
    docs: DOCS,
};

const DOCS: &str = r#"## `item_in_hot_loop`

Default level: **allow** (it costs time, not memory).

### What it does
Finds `.item()` (without arguments) inside an inner loop: a loop nested in another loop,
including `.for_each(|..| ..)` bodies.

### Why is this bad
Each call copies a value to the host and waits for the device to finish everything queued
before it, on every iteration of the innermost loop: the GPU idles while the host waits.

### Example
```rust
fn per_sample(model: &Model, batches: &[Vec<Tensor>]) -> Vec<f32> {
    let mut out = Vec::new();
    for batch in batches {
        for x in batch {
            out.push(model.forward(x).sum().item());
        }
    }
    out
}
```
Use instead:
```rust
fn per_sample(model: &Model, batches: &[Vec<Tensor>]) -> Vec<f32> {
    let mut out = Vec::new();
    for batch in batches {
        let sums: Vec<Tensor> = batch.iter().map(|x| model.forward(x).sum()).collect();
        out.extend(Tensor::stack(&sums).to_vec());
    }
    out
}
```

### Known problems
- Other host reads (`to_vec1`, `to_scalar`, `double_value`) are not reported.
"#;

/// The rule's checks.
pub(crate) struct ItemInHotLoop;

impl Check for ItemInHotLoop {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // An `.item()` call.
        Some(&[Trigger::Part("item")])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        let Expr::MethodCall(call) = e else { return };
        if call.method != "item" || !call.args.is_empty() || cx.loop_depth() < 2 {
            return;
        }
        let value = show(&call.receiver);
        sink.emit(
            &RULE,
            e,
            format!("`{value}.item()` in an inner loop copies to the host and waits for the device on every iteration"),
            "keep the values on the device (sum `.detach()`ed tensors) and call `.item()` once after the inner loop".to_owned(),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    const RULE: &str = "item_in_hot_loop";

    #[test]
    fn fires_in_inner_loops() {
        let src = r#"
fn f(data: &[Vec<Batch>], model: &Model) {
    for epoch in data {
        for batch in epoch {
            log(model.loss(batch).item());
        }
        epoch.iter().for_each(|b| log(model.loss(b).item()));
    }
}
"#;
        assert_eq!(hits(RULE, src), [(5, 17), (7, 39)]);
    }

    #[test]
    fn outer_loops_and_other_items_do_not_fire() {
        let src = r#"
fn f(data: &[Batch], model: &Model, map: &HashMap<u8, u8>) {
    for batch in data {
        log(model.loss(batch).item());
        for k in 0..3 {
            let v = map.item(k);
        }
    }
    let last = model.loss(&data[0]).item();
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
