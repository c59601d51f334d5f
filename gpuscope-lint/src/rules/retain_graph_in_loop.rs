//! `retain_graph_in_loop` (warn): a backward call that keeps the graph inside a loop.

use syn::{Expr, Lit, Member};

use crate::check::{Check, Trigger};
use crate::context::{Cx, Sink};
use crate::syntax::callee_name;
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "retain_graph_in_loop",
    default: Level::Warn,
    summary: "a backward call that retains the graph inside a loop keeps each iteration's activations",
    docs: DOCS,
};

const DOCS: &str = r#"## `retain_graph_in_loop`

Default level: **warn**.

### What it does
Finds, inside a loop, a backward call that keeps the graph (`retain_graph`): a call whose
name contains `backward` with a `true` argument (`Tensor::run_backward(&[&loss], &[], true,
false)`, `loss.backward_with(true)`), an argument `retain_graph = true` / `keep_graph: true` /
`create_graph: true`, or an options builder `.retain_graph(true)`.

### Why is this bad
A retained graph keeps its saved activations. In a loop that usually means each
iteration's graph lives on: PyTorch's "backward through the graph a second time"
workaround, which grows memory with every iteration.

### Example
```rust
fn train(model: &Model, data: &[Batch], x: &Tensor) {
    for batch in data {
        let loss = model.loss(batch);
        Tensor::run_backward(&[&loss], &[x], true, false);
    }
}
```
Use instead:
```rust
fn train(model: &Model, data: &[Batch], x: &Tensor) {
    for batch in data {
        let loss = model.loss(batch);
        Tensor::run_backward(&[&loss], &[x], false, false);
    }
}
```

### Known problems
- A flag held in a variable (`retain_graph = keep`) is not read.
"#;

const RETAIN_NAMES: [&str; 3] = ["retain_graph", "keep_graph", "create_graph"];

/// The rule's checks.
pub(crate) struct RetainGraphInLoop;

impl Check for RetainGraphInLoop {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // A call whose name contains `backward`.
        Some(&[Trigger::Part("backward")])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        if !cx.in_loop() {
            return;
        }
        let (name, args) = match e {
            Expr::MethodCall(m) => (m.method.to_string(), &m.args),
            Expr::Call(c) => match callee_name(c) {
                Some(name) => (name.to_string(), &c.args),
                None => return,
            },
            _ => return,
        };
        if !name.contains("backward") || !args.iter().any(retains) {
            return;
        }
        sink.emit(
            &RULE,
            e,
            format!("`{name}` retains the autograd graph inside a loop: each iteration's saved activations can stay alive"),
            "retain the graph only for a second backward over the same graph; otherwise sum the losses and call `.backward()` once, and `.detach()` values carried into the next iteration".to_owned(),
            None,
        );
    }
}

/// Whether a backward call's argument asks to keep the graph.
fn retains(arg: &Expr) -> bool {
    match arg {
        Expr::Lit(l) => matches!(&l.lit, Lit::Bool(b) if b.value),
        Expr::Assign(a) => is_retain_name(&a.left) && retains(&a.right),
        Expr::Struct(s) => s.fields.iter().any(|f| {
            matches!(&f.member, Member::Named(n) if RETAIN_NAMES.iter().any(|r| n == r))
                && retains(&f.expr)
        }),
        Expr::MethodCall(m) => {
            (RETAIN_NAMES.iter().any(|r| m.method == r) && m.args.iter().any(retains))
                || retains(&m.receiver)
        }
        Expr::Reference(r) => retains(&r.expr),
        Expr::Paren(p) => retains(&p.expr),
        _ => false,
    }
}

fn is_retain_name(e: &Expr) -> bool {
    matches!(e, Expr::Path(p) if p.path.get_ident().is_some_and(|i| RETAIN_NAMES.iter().any(|r| i == r)))
}

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    const RULE: &str = "retain_graph_in_loop";

    #[test]
    fn fires_on_retaining_backward_calls_in_loops() {
        let src = r#"
fn train(model: &Model, data: &[Batch], x: &Tensor) {
    for batch in data {
        let loss = model.loss(batch);
        Tensor::run_backward(&[&loss], &[x], true, false);
        loss.backward_with(retain_graph = true);
        loss.backward_opts(BackwardOptions { retain_graph: true, ..Default::default() });
        loss.backward_with_options(&BackwardOptions::new().retain_graph(true));
    }
}
"#;
        assert_eq!(hits(RULE, src), [(5, 9), (6, 9), (7, 9), (8, 9)]);
    }

    #[test]
    fn plain_backward_false_flags_and_outside_loops_do_not_fire() {
        let src = r#"
fn train(model: &Model, data: &[Batch], x: &Tensor) {
    let first = model.loss(&data[0]);
    first.backward_with(retain_graph = true);
    for batch in data {
        let loss = model.loss(batch);
        loss.backward();
        Tensor::run_backward(&[&loss], &[x], false, false);
        loss.backward_opts(BackwardOptions { retain_graph: false, ..Default::default() });
        model.forward_with(true);
    }
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
