//! `graph_accumulation` (warn): a loss (a tensor carrying its autograd graph) added or pushed
//! into an accumulator that outlives the loop iterations of a training loop.

use syn::{BinOp, Expr};

use crate::check::{Check, Trigger};
use crate::context::{Cx, Sink};
use crate::infer::{Graph, Kind};
use crate::syntax::{chain_root, ident_of, same_place, show, strip, unwrapped};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "graph_accumulation",
    default: Level::Warn,
    summary: "a loss added or pushed into an accumulator across training iterations keeps every iteration's graph",
    docs: DOCS,
};

const DOCS: &str = r#"## `graph_accumulation`

Default level: **warn**.

### What it does
Finds a loss accumulated inside a loop into something that outlives the loop's iterations,
in every spelling: `total = total + loss`, `total += &loss`, `total = total.add(&loss)?`,
`total.add_(&loss)`, `losses.push(loss)`, `losses.extend([loss])`. A value is a loss when
it comes from a loss function (`cross_entropy`, `mse_loss`, ...), when `.backward()` is
called on it, or when its name says so and its type is not known to be host data; `.item()`,
`.detach()`, `.to_vec1()`, `into_scalar()`, `as` casts and the like make it a number.

It fires when the loop trains (its body calls `backward` or an optimizer step), or when the
accumulator is only read back afterwards (`len()`, `item()`) or not used at all. A loss summed
over the tokens of one sequence in an inner loop without `backward`, and then
differentiated or returned, is one graph per step as intended, and does not fire; nor does
an accumulator of host data (`let mut total = 0.0;`, `Vec<f32>`) or code under `no_grad`.
A loop over models whose optimizer steps all go through its element (`for critic in &mut
critics { ..; critic.opt.backward_step(&loss)?; losses.push(loss); }`, or burn's
`agent.model = agent.optim.step(lr, agent.model.clone(), grads)`) runs once per model,
not once per batch: it is not a training loop here, and one loss per model, returned or
passed on, does not fire (kept across an outer loop over batches, they do).

### Why is this bad
Each iteration's loss holds its whole autograd graph: every activation saved for backward.
Keeping the losses keeps every graph alive, so memory grows with each iteration until the
loop ends, or out of memory.

### Example
```rust
fn train(model: &Model, opt: &mut Sgd, data: &[Batch]) -> Tensor {
    let mut total_loss = Tensor::zeros(&[]);
    for batch in data {
        opt.zero_grad();
        let loss = model.forward(&batch.x).cross_entropy(&batch.y);
        loss.backward();
        opt.step();
        total_loss += &loss;
    }
    total_loss
}
```
Use instead:
```rust
fn train(model: &Model, opt: &mut Sgd, data: &[Batch]) -> f64 {
    let mut total_loss = 0.0;
    for batch in data {
        opt.zero_grad();
        let loss = model.forward(&batch.x).cross_entropy(&batch.y);
        loss.backward();
        opt.step();
        total_loss += loss.item();
    }
    total_loss
}
```

### Known problems
- A loss whose name and origin say nothing (`let out = f(x);` with `f` from another file) is
  not recognised.
- An evaluation loop that sums losses without `no_grad` and returns the sum is not reported
  (it cannot be told from a sequence loss built on purpose).
"#;

/// How the value is accumulated.
enum Form {
    /// `acc += v`, `acc = acc + v`, `acc = acc.add(&v)?`, `acc.add_(&v)`.
    Add,
    /// `acc.push(v)`.
    Push,
    /// `acc.extend(vs)`, `acc.append(vs)`.
    Extend,
}

/// The rule's checks.
pub(crate) struct GraphAccumulation;

impl Check for GraphAccumulation {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // A value carrying a loss: named for one (`loss`, `losses`), made by a loss function
        // (`loss`, `mse`, `nll`, `bce`, `cross_entropy`, `kl_div`) or `.backward()`ed.
        Some(&[
            Trigger::Part("loss"),
            Trigger::Part("backward"),
            Trigger::Part("mse"),
            Trigger::Part("nll"),
            Trigger::Part("bce"),
            Trigger::Part("entropy"),
            Trigger::Part("kl"),
        ])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        // Under no_grad no graph is recorded, so nothing is kept alive.
        if !cx.in_loop() || cx.f.no_grad.is_some() {
            return;
        }
        let Some((acc, value, form)) = accumulation(e) else {
            return;
        };
        let value_is = cx.value(value);
        if value_is.graph != Graph::Loss || cx.value(acc).kind == Kind::Host {
            return;
        }
        // The accumulator must outlive the iteration and be able to hold a graph.
        if let Some(ident) = ident_of(chain_root(acc)) {
            let name = ident.to_string();
            if ident == "self" {
                // A field outlives the function: only a value known to be a tensor counts.
                if value_is.kind != Kind::Device {
                    return;
                }
            } else {
                if cx.env.binding(&name).is_some_and(|v| v.kind == Kind::Host) {
                    return;
                }
                let outlived = cx.loops_outlived_by(&name);
                if outlived.is_empty() {
                    return;
                }
                let trains = outlived.iter().any(|l| l.trains);
                if !trains && cx.f.graph_used.contains(&name) {
                    return;
                }
            }
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
            Form::Extend => {
                "store numbers: call `.item()` (or `.detach()`) on each loss before adding it"
                    .to_owned()
            }
        };
        sink.emit(
            &RULE,
            e,
            format!("`{acc_text}` accumulates `{value_text}` across loop iterations, keeping every iteration's autograd graph alive"),
            help,
            None,
        );
    }
}

/// Methods adding their argument to their receiver and returning the sum.
const ADDS: &[&str] = &["add", "broadcast_add"];

/// Methods adding their argument into their receiver in place.
const ADDS_IN_PLACE: &[&str] = &["add_", "add_assign"];

/// Methods storing their argument into their receiver.
const PUSHES: &[&str] = &["push", "push_back", "push_front"];

/// Methods storing the elements of their argument into their receiver.
const EXTENDS: &[&str] = &["extend", "append"];

/// `(accumulator, value, form)` when `e` adds or pushes a value into an accumulator.
fn accumulation(e: &Expr) -> Option<(&Expr, &Expr, Form)> {
    match e {
        Expr::Binary(b) if matches!(b.op, BinOp::AddAssign(_)) => {
            Some((&b.left, &b.right, Form::Add))
        }
        Expr::Assign(a) => match unwrapped(&a.right) {
            Expr::Binary(b) if matches!(b.op, BinOp::Add(_)) => {
                if same_place(&b.left, &a.left) {
                    Some((&a.left, &b.right, Form::Add))
                } else if same_place(&b.right, &a.left) {
                    Some((&a.left, &b.left, Form::Add))
                } else {
                    None
                }
            }
            Expr::MethodCall(m) if ADDS.iter().any(|add| m.method == add) && m.args.len() == 1 => {
                if same_place(unwrapped(&m.receiver), &a.left) {
                    Some((&a.left, &m.args[0], Form::Add))
                } else if same_place(unwrapped(&m.args[0]), &a.left) {
                    Some((&a.left, &m.receiver, Form::Add))
                } else {
                    None
                }
            }
            _ => None,
        },
        Expr::MethodCall(m) if m.args.len() == 1 && ADDS_IN_PLACE.iter().any(|a| m.method == a) => {
            Some((&m.receiver, &m.args[0], Form::Add))
        }
        Expr::MethodCall(m) if m.args.len() == 1 && PUSHES.iter().any(|p| m.method == p) => {
            Some((&m.receiver, &m.args[0], Form::Push))
        }
        Expr::MethodCall(m) if m.args.len() == 1 && EXTENDS.iter().any(|p| m.method == p) => {
            Some((&m.receiver, &m.args[0], Form::Extend))
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
        let out: StepOutput = self.step();
        self.total = self.total + out.loss;
        break;
    }
}
struct StepOutput { loss: Tensor, n: usize }
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

    #[test]
    fn every_spelling_of_an_accumulation_fires() {
        let src = r#"
use gpuscope::{Tensor, TensorError};
fn train(model: &Model, opt: &mut Sgd, data: &[Tensor]) -> Result<Vec<Tensor>, TensorError> {
    let mut running = Tensor::zeros(&[1], &dev)?;
    let mut sum = Tensor::zeros(&[1], &dev)?;
    let mut kept = Vec::new();
    let mut all = Vec::new();
    for x in data {
        let loss = model.forward(x)?.mse_loss(x)?;
        loss.backward()?;
        opt.step()?;
        opt.zero_grad();
        running = running.add(&loss)?;
        sum = loss.add(&sum).unwrap();
        sum.add_(&loss)?;
        kept.extend([loss.clone()]);
        all.push_back(loss);
    }
    Ok(kept)
}
"#;
        assert_eq!(
            hits(RULE, src),
            [(13, 9), (14, 9), (15, 9), (16, 9), (17, 9)]
        );
        assert!(
            findings(RULE, src)[0]
                .message
                .starts_with("`running` accumulates `loss`")
        );
    }

    #[test]
    fn a_sequence_loss_built_without_backward_is_one_graph() {
        let src = r#"
fn seq_loss(model: &Model, tokens: &[i64]) -> Tensor {
    let mut loss = Tensor::from(0f32);
    for &t in tokens {
        let out = model.step(t);
        loss = loss + out.nll_loss(&target(t));
    }
    loss
}
fn layer_losses(features: Vec<(Tensor, Tensor)>) -> Tensor {
    let mut loss_tensors = Vec::new();
    for (p, t) in features {
        let loss = (p - t).powf(2.0).sum();
        loss_tensors.push(loss);
    }
    Tensor::stack(&loss_tensors, 0).sum()
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn losses_only_counted_afterwards_fire_without_backward() {
        let src = r#"
fn evaluate(model: &Model, data: &[Batch]) -> usize {
    let mut kept = Vec::new();
    for batch in data {
        kept.push(model.loss(batch));
    }
    kept.len()
}
"#;
        assert_eq!(hits(RULE, src), [(5, 9)]);
    }

    #[test]
    fn burn_steps_through_the_element_s_module_run_once_per_model() {
        let src = r#"
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::{Tensor, backend::AutodiffBackend};
fn update_agents<B: AutodiffBackend>(agents: &mut [Agent<B>], x: &Tensor<B, 2>, lr: f64) -> Vec<Tensor<B, 1>> {
    let mut losses = Vec::new();
    for agent in agents.iter_mut() {
        let loss = agent.model.forward(x.clone()).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &agent.model);
        agent.model = agent.optim.step(lr, agent.model.clone(), grads);
        losses.push(loss);
    }
    losses
}
fn train<B: AutodiffBackend>(mut model: Model<B>, optim: &mut Adam<B>, data: &[Tensor<B, 2>], lr: f64) -> Vec<Tensor<B, 1>> {
    let mut history = Vec::new();
    for x in data {
        let loss = model.forward(x.clone()).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(lr, model, grads);
        history.push(loss);
    }
    history
}
"#;
        // Each agent's own model steps once; the batches of one model pile up their graphs.
        assert_eq!(hits(RULE, src), [(20, 9)]);
    }

    #[test]
    fn a_loop_stepping_each_elements_own_optimizer_runs_once_per_model() {
        let src = r#"
use candle_core::Tensor;
fn optimize_critics(&mut self, x: &Tensor, y: &Tensor) -> candle_core::Result<Vec<Tensor>> {
    let mut losses = Vec::with_capacity(self.critics.len());
    for critic in &mut self.critics {
        let loss = candle_nn::loss::mse(&critic.forward(x)?, y)?;
        critic.optimizer_mut().backward_step(&loss)?;
        losses.push(loss);
    }
    let mut twin = Vec::new();
    for (net, opt) in self.nets.iter().zip(self.opts.iter_mut()) {
        let loss = candle_nn::loss::mse(&net.forward(x)?, y)?;
        opt.backward_step(&loss)?;
        twin.push(loss);
    }
    self.twin = twin;
    Ok(losses)
}
fn train(&mut self, data: &[(Tensor, Tensor)]) -> candle_core::Result<Vec<Tensor>> {
    let mut history = Vec::new();
    for (x, y) in data {
        for critic in &mut self.critics {
            let loss = candle_nn::loss::mse(&critic.forward(x)?, y)?;
            critic.opt.backward_step(&loss)?;
            history.push(loss);
        }
        let loss = self.actor_loss(x)?;
        self.actor_opt.backward_step(&loss)?;
        history.push(loss);
    }
    let mut per_batch = Vec::new();
    for batch in data {
        let loss = self.loss(batch)?;
        batch.0.backward_step(&loss)?;
        self.opt.backward_step(&loss)?;
        per_batch.push(loss);
    }
    history.extend(per_batch);
    Ok(history)
}
"#;
        // Kept across the batches of the outer loop, or by a loop that also steps a shared
        // optimizer per batch, the losses still pile up.
        assert_eq!(hits(RULE, src), [(25, 13), (29, 9), (36, 9)]);
        let tch = r#"
use tch::Tensor;
fn update(agents: &mut [Agent], obs: &Tensor) -> Vec<Tensor> {
    let mut losses = Vec::new();
    for agent in agents.iter_mut() {
        let loss = agent.net.forward(obs).mse_loss(obs, tch::Reduction::Mean);
        agent.opt.zero_grad();
        loss.backward();
        agent.opt.step();
        losses.push(loss);
    }
    let mut cells = Vec::new();
    for cell in agents.iter_mut() {
        let loss = cell.forward(obs).mse_loss(obs, tch::Reduction::Mean);
        loss.backward();
        cell.step();
        cells.push(loss);
    }
    losses.extend(cells);
    losses
}
"#;
        // `cell.step()` on the element itself may be a recurrent cell's step.
        assert_eq!(hits(RULE, tch), [(17, 9)]);
    }

    #[test]
    fn strings_paths_and_gradients_are_not_losses() {
        let src = r#"
fn list(root: &Path, entries: &[Entry], grads_in: Vec<Tensor>) -> Vec<String> {
    let mut files = Vec::new();
    let mut grads = Vec::new();
    let mut lossy = Vec::new();
    for entry in entries {
        let relative = entry.path().strip_prefix(root).unwrap();
        files.push(relative.to_string_lossy().replace('\\', "/"));
        lossy.push(entry.name().to_string_lossy());
    }
    for (x, out) in grads_in.iter().zip(outs) {
        let g = out.backward();
        grads.push(x.grad(&g).unwrap());
        opt.step();
    }
    files
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
