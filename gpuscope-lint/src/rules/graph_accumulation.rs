//! `graph_accumulation` (warn): inside a loop, a loss (a tensor carrying its autograd graph)
//! is added into, or pushed onto, something that outlives the iteration:
//! `total = total + loss`, `total += loss` / `&loss`, `losses.push(loss)`. Every
//! iteration's graph then stays alive. See [`crate::loss`] for what counts as a loss;
//! `.item()`, `.detach()`, `.to_vec()`, `f32::from` and `as` casts make the value a number.
//! An accumulator bound inside the same loop body, or declared as plain data
//! (`let mut total = 0.0;`, `Vec<f32>`), does not fire; neither does code under `no_grad`,
//! where no graph is recorded.

use syn::spanned::Spanned;
use syn::{BinOp, Expr};

use crate::loss::{Class, classify};
use crate::syntax::{chain_root, ident_of, same_place, show, strip};
use crate::visit::{Sink, State};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "graph_accumulation",
    default: Level::Warn,
    summary: "a loss added or pushed into an accumulator across loop iterations keeps every iteration's graph",
};

/// How the value is accumulated.
enum Form {
    /// `acc += v`, `acc = acc + v`.
    Add,
    /// `acc.push(v)`.
    Push,
}

pub(crate) fn check(e: &Expr, st: &State<'_>, sink: &mut Sink<'_>) {
    // Under no_grad no graph is recorded, so nothing is kept alive.
    if !st.in_loop() || st.f.no_grad.is_some() {
        return;
    }
    let Some((acc, value, form)) = accumulation(e) else {
        return;
    };
    // The accumulator must outlive the iteration and be able to hold a tensor.
    if let Some(ident) = ident_of(chain_root(acc)) {
        let name = ident.to_string();
        if st.is_loop_local(&name) || st.binding_class(&name) == Class::Detached {
            return;
        }
    }
    if classify(value, st) != Class::Loss {
        return;
    }
    let acc_text = show(acc);
    let value_text = show(strip(value));
    let help = match form {
        Form::Add => format!(
            "accumulate a number: `{acc_text} += {value_text}.item()` (or add `{value_text}.detach()`)"
        ),
        Form::Push => format!(
            "store a number: `{acc_text}.push({value_text}.item())` (or push `{value_text}.detach()`)"
        ),
    };
    sink.emit(
        &RULE,
        e.span(),
        format!("`{acc_text}` accumulates `{value_text}` across loop iterations, keeping every iteration's autograd graph alive"),
        help,
    );
}

/// `(accumulator, value, form)` when `e` adds or pushes a value into an accumulator.
fn accumulation(e: &Expr) -> Option<(&Expr, &Expr, Form)> {
    match e {
        Expr::Binary(b) if matches!(b.op, BinOp::AddAssign(_)) => {
            Some((&b.left, &b.right, Form::Add))
        }
        Expr::Assign(a) => match strip(&a.right) {
            Expr::Binary(b) if matches!(b.op, BinOp::Add(_)) => {
                if same_place(&b.left, &a.left) {
                    Some((&a.left, &b.right, Form::Add))
                } else if same_place(&b.right, &a.left) {
                    Some((&a.left, &b.left, Form::Add))
                } else {
                    None
                }
            }
            Expr::MethodCall(m)
                if m.method == "add" && m.args.len() == 1 && same_place(&m.receiver, &a.left) =>
            {
                Some((&a.left, &m.args[0], Form::Add))
            }
            _ => None,
        },
        Expr::MethodCall(m)
            if (m.method == "push" || m.method == "push_back") && m.args.len() == 1 =>
        {
            Some((&m.receiver, &m.args[0], Form::Push))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{findings, hits};

    const RULE: &str = "graph_accumulation";

    #[test]
    fn fires_on_add_assign_add_and_push() {
        let src = r#"
fn train(model: &Model, data: &[Batch]) {
    let mut total_loss = Tensor::zeros(&[]);
    let mut losses = Vec::new();
    let mut sum = Tensor::zeros(&[]);
    for batch in data {
        let loss = model.forward(&batch.x).cross_entropy(&batch.y);
        total_loss += &loss;
        total_loss = total_loss + loss.clone();
        losses.push(loss.shallow_clone());
        let l = criterion(&batch.x);
        sum += l;
        l.backward();
    }
}
"#;
        assert_eq!(hits(RULE, src), [(8, 9), (9, 9), (10, 9), (12, 9)]);
        let f = &findings(RULE, src)[0];
        assert_eq!(
            f.message,
            "`total_loss` accumulates `loss` across loop iterations, keeping every iteration's autograd graph alive"
        );
        assert_eq!(
            f.help,
            "accumulate a number: `total_loss += loss.item()` (or add `loss.detach()`)"
        );
    }

    #[test]
    fn fires_on_loss_function_calls_and_fields_in_while_and_loop() {
        let src = r#"
fn train(&mut self, xs: &[Tensor]) {
    let mut i = 0;
    while i < xs.len() {
        self.history.push(nn::mse_loss(&xs[i], &self.target));
        i += 1;
    }
    loop {
        let out = self.step();
        self.total = self.total + out.loss;
        break;
    }
}
"#;
        assert_eq!(hits(RULE, src), [(5, 9), (10, 9)]);
    }

    #[test]
    fn detached_values_do_not_fire() {
        let src = r#"
fn train(model: &Model, data: &[Batch]) -> Tensor {
    let mut total = 0.0;
    let mut total_loss = Tensor::zeros(&[]);
    let mut losses = Vec::new();
    let mut seen: Vec<f32> = Vec::new();
    for batch in data {
        let loss = model.loss(batch);
        total += loss.item();
        total_loss += loss.detach();
        losses.push(loss.detach());
        losses.push(loss.to_vec());
        losses.push(f32::from(&loss));
        losses.push(loss.double_value(&[]) as f32);
        seen.push(loss.item());
        total += loss;
        let value = loss.item();
        total_loss += value;
        loss.backward();
    }
    total_loss
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn tuple_bindings_are_classified_element_by_element() {
        let src = r#"
fn train(model: &Model, data: &[Batch]) -> f64 {
    let (mut loss_sum, mut seen) = (0.0, 0usize);
    let (mut graph_loss, mut n): (Tensor, usize) = (Tensor::zeros(&[]), 0);
    for batch in data {
        let (loss, hits) = model.step(batch);
        loss_sum += loss * batch.len() as f64;
        seen += hits;
        graph_loss += loss;
    }
    loss_sum
}
"#;
        assert_eq!(hits(RULE, src), [(9, 9)]);
        assert!(
            findings(RULE, src)[0]
                .message
                .starts_with("`graph_loss` accumulates `loss`")
        );
    }

    #[test]
    fn no_grad_code_keeps_no_graph() {
        let src = r#"
#[no_grad]
fn evaluate(model: &Model, data: &[Batch]) -> Tensor {
    let mut total_loss = Tensor::zeros(&[]);
    for batch in data {
        total_loss += model.loss(batch);
    }
    let sums = no_grad(|| {
        let mut losses = Vec::new();
        for batch in data { losses.push(model.loss(batch)); }
        losses
    });
    total_loss
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn accumulators_reset_each_iteration_or_outside_loops_do_not_fire() {
        let src = r#"
fn f(model: &Model, data: &[Batch], extra: Tensor) -> Tensor {
    let mut total_loss = model.loss(&data[0]);
    total_loss += extra;
    for batch in data {
        let mut step_loss = model.loss(batch);
        step_loss += model.reg_loss();
        let mut parts = Vec::new();
        parts.push(model.loss(batch));
        let x = model.forward(batch);
        activations.push(x);
    }
    total_loss
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
