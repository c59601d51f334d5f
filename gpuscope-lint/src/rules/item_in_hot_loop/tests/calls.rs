//! `item_in_hot_loop`'s tests of reads that loops of the callers in the file repeat
//! (`walk/calls/`).

use super::RULE;
use crate::testing::{findings, hits};

#[test]
fn a_read_in_a_helper_that_an_inner_loop_calls_fires_at_the_read() {
    let src = r#"
use candle_core::Tensor;
struct Trainer { model: Model }
impl Trainer {
    fn train_on_batch(&mut self, x: &Tensor) -> candle_core::Result<f32> {
        let loss = self.model.loss(x)?;
        let l = loss.to_vec0::<f32>()?;
        Ok(l)
    }
    fn train(&mut self, epochs: usize, batches: &[Tensor]) -> candle_core::Result<()> {
        for _ in 0..epochs {
            for x in batches {
                self.train_on_batch(x)?;
            }
        }
        Ok(())
    }
}
fn clip_gradients(grads: &Grads, params: &[Var]) -> candle_core::Result<f32> {
    let mut total = 0.0;
    for p in params {
        total += grads.get(p).sqr()?.sum_all()?.to_scalar::<f32>()?;
    }
    Ok(total)
}
fn run(steps: usize, grads: &Grads, params: &[Var]) -> candle_core::Result<()> {
    for _ in 0..steps {
        clip_gradients(grads, params)?;
    }
    Ok(())
}
"#;
    assert_eq!(hits(RULE, src), [(7, 17), (22, 18)]);
    let found = findings(RULE, src);
    assert_eq!(
        found[0].message,
        "`loss.to_vec0()` runs in an inner loop through `self.train_on_batch(..)` (line 13): it copies to the host and waits for the device on every iteration"
    );
    let note = found[0].note.as_deref().unwrap();
    assert!(
        note.contains("in `train`") && note.contains("inside 2 loops"),
        "{note}"
    );
    let note = found[1].note.as_deref().unwrap();
    assert!(
        note.contains("line 28") && note.contains("inside 1 loop "),
        "{note}"
    );
}

#[test]
fn loops_add_up_along_a_chain_of_calls_and_a_guard_still_bounds() {
    let src = r#"
use candle_core::Tensor;
fn read(x: &Tensor) -> f32 {
    x.to_scalar::<f32>().unwrap()
}
fn step(x: &Tensor) -> f32 {
    read(x)
}
fn epoch(xs: &[Tensor]) {
    for x in xs {
        step(x);
    }
}
fn train(n: usize, xs: &[Tensor]) {
    for _ in 0..n {
        epoch(xs);
    }
    for i in 0..n {
        for x in xs {
            if i == 0 {
                first(x);
            }
        }
    }
}
fn first(x: &Tensor) -> f32 {
    x.to_scalar::<f32>().unwrap()
}
"#;
    assert_eq!(hits(RULE, src), [(4, 5)]);
    let note = findings(RULE, src)[0].note.clone().unwrap();
    assert_eq!(
        note,
        "`read(..)` at line 7 (in `step`) calls this function, and `step` is itself called inside 2 loops that repeat it"
    );
}

#[test]
fn a_helper_called_once_or_in_one_loop_with_a_top_level_read_does_not_fire() {
    let src = r#"
use candle_core::Tensor;
fn read(x: &Tensor) -> f32 {
    x.to_scalar::<f32>().unwrap()
}
fn once(x: &Tensor) -> f32 {
    read(x)
}
fn per_epoch(n: usize, x: &Tensor) {
    for _ in 0..n {
        read(x);
    }
}
fn no_loop(x: &Tensor) {
    let _ = read(x);
}
"#;
    assert_eq!(hits(RULE, src), []);
}

#[test]
fn a_helper_reading_a_tensor_on_the_cpu_does_not_fire() {
    let src = r#"
use candle_core::{Device, Tensor};
fn score(rows: &[f32]) -> f32 {
    let t = Tensor::new(rows, &Device::Cpu).unwrap();
    t.sum_all().unwrap().to_scalar::<f32>().unwrap()
}
fn f(epochs: usize, data: &[Vec<f32>]) {
    for _ in 0..epochs {
        for rows in data {
            score(rows);
        }
    }
}
"#;
    assert_eq!(hits(RULE, src), []);
}

#[test]
fn recursion_terminates_and_names_defined_twice_are_not_resolved() {
    let src = r#"
use candle_core::Tensor;
fn walk(x: &Tensor, n: usize) -> f32 {
    let v = x.to_scalar::<f32>().unwrap();
    for _ in 0..n {
        walk(x, n - 1);
        other(x, n);
    }
    v
}
fn other(x: &Tensor, n: usize) {
    for _ in 0..n {
        walk(x, n);
    }
}
mod a {
    pub fn log(x: &Tensor) -> f32 { x.to_scalar::<f32>().unwrap() }
}
mod b {
    pub fn log(x: &Tensor) -> f32 { x.to_scalar::<f32>().unwrap() }
}
fn g(n: usize, xs: &[Tensor]) {
    for _ in 0..n {
        for x in xs {
            log(x);
        }
    }
}
"#;
    // `walk` and `other` call each other in a loop each: two loops repeat `walk`'s read.
    assert_eq!(hits(RULE, src), [(4, 13)]);
}

#[test]
fn trait_methods_are_not_resolved_through_other_receivers() {
    let src = r#"
use candle_core::Tensor;
struct Net;
impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let _ = x.to_scalar::<f32>();
        x.clone()
    }
}
struct Scorer;
impl Scorer {
    fn score(&self, x: &Tensor) -> f32 {
        x.to_scalar::<f32>().unwrap()
    }
}
fn f(n: usize, xs: &[Tensor], layer: &Linear, s: &Scorer) {
    for _ in 0..n {
        for x in xs {
            layer.forward(x);
        }
        s.score(&xs[0]);
    }
}
fn g(n: usize, xs: &[Tensor], s: &Scorer) {
    for _ in 0..n {
        xs.iter().for_each(|x| {
            s.score(x);
        });
    }
}
"#;
    assert_eq!(hits(RULE, src), [(13, 9)]);
}

#[test]
fn an_allow_at_the_read_silences_the_read_through_a_call() {
    let src = r#"
use candle_core::Tensor;
#[gpuscope::lints::allow(item_in_hot_loop)]
fn read(x: &Tensor) -> f32 {
    x.to_scalar::<f32>().unwrap()
}
fn train(n: usize, xs: &[Tensor]) {
    for _ in 0..n {
        for x in xs {
            read(x);
        }
    }
}
"#;
    assert_eq!(hits(RULE, src), []);
}

#[test]
fn the_calls_are_found_where_only_functions_with_trigger_words_are_walked() {
    let src = "use candle_core::Tensor;\nfn read(x: &Tensor) -> f32 {\n    x.to_scalar::<f32>().unwrap()\n}\nfn train(n: usize, xs: &[Tensor]) {\n    for _ in 0..n {\n        for x in xs {\n            read(x);\n        }\n    }\n}\n";
    let mut levels = crate::Levels::default();
    levels.set(RULE, crate::Level::Warn).unwrap();
    let found = crate::lint_source(src, &levels).unwrap();
    let at: Vec<_> = found.iter().map(|d| (d.rule, d.start.line)).collect();
    assert_eq!(at, [(RULE, 3)]);
    assert!(
        crate::lint_source(src, &crate::Levels::default())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_read_in_a_nested_loop_of_a_called_helper_keeps_its_own_message() {
    let src = r#"
use candle_core::Tensor;
fn read(xs: &[Vec<Tensor>]) {
    for row in xs {
        for x in row {
            let _ = x.to_scalar::<f32>();
        }
    }
}
fn train(n: usize, xs: &[Vec<Tensor>]) {
    for _ in 0..n {
        read(xs);
    }
}
"#;
    let found = findings(RULE, src);
    assert_eq!(found.len(), 1);
    assert!(found[0].note.is_none());
    assert!(found[0].message.contains("in an inner loop copies"));
}

#[test]
fn a_read_under_a_debug_switch_is_not_repeated_by_the_callers_loops() {
    let src = r#"
use candle_core::Tensor;
const DEBUG: bool = false;
fn step(x: &Tensor) -> candle_core::Result<Tensor> {
    let y = x.exp()?;
    if DEBUG && y.dims().len() == 1 {
        println!("{:?}", y.to_vec1::<f32>()?);
    }
    if DEBUG && let Ok(v) = y.to_vec1::<f32>() {
        println!("{v:?}");
    }
    if tracing::enabled!(tracing::Level::DEBUG) {
        println!("{}", y.sum_all()?.to_scalar::<f32>()?);
    }
    Ok(y)
}
fn train(n: usize, xs: &[Tensor]) -> candle_core::Result<()> {
    for _ in 0..n {
        for x in xs {
            step(x)?;
        }
    }
    Ok(())
}
"#;
    assert_eq!(hits(RULE, src), []);
}

#[test]
fn a_read_in_a_block_that_breaks_out_of_its_loop_runs_once_per_run_of_it() {
    // candle-bhop's shape: the L-BFGS loop logs the loss in the arm that `break`s out of it
    // once converged, so the read runs once per run of the loop (once per basin-hopping
    // step, in the caller's loop), not once per iteration; and a call in such a block does
    // not repeat with that loop either. The arm that goes on stepping still reads every
    // iteration, and so does a block that only `continue`s, or `continue`s before its
    // `break`.
    let src = r#"
use candle_core::Tensor;
fn lbfgs(opt: &mut Lbfgs, loss: Tensor, steps: usize) -> candle_core::Result<f32> {
    let mut loss = loss;
    for _ in 0..steps {
        match opt.backward_step(&loss)? {
            Outcome::Converged(new_loss) => {
                log(new_loss.to_scalar::<f32>()?);
                loss = new_loss;
                break;
            }
            Outcome::Stepped(new_loss) => {
                let l = new_loss.to_scalar::<f32>()?;
                loss = new_loss;
            }
        }
    }
    Ok(0.0)
}
fn hop(opt: &mut Lbfgs, loss: &Tensor, hops: usize, steps: usize) -> candle_core::Result<()> {
    for _ in 0..hops {
        lbfgs(opt, loss.clone(), steps)?;
    }
    Ok(())
}
fn first_finite(xs: &[Vec<Tensor>]) -> candle_core::Result<f32> {
    let mut total = 0.0;
    for row in xs {
        for x in row {
            if x.is_finite() {
                total += x.to_scalar::<f32>()?;
                break;
            }
        }
        for x in row {
            if x.skip() {
                total += x.to_scalar::<f32>()?;
                continue;
            }
        }
        for x in row {
            report(x)?;
            break;
        }
    }
    Ok(total)
}
fn report(x: &Tensor) -> candle_core::Result<f32> {
    x.to_scalar::<f32>()
}
fn refill(rounds: usize, model: &Model) -> candle_core::Result<()> {
    for _ in 0..rounds {
        loop {
            let fresh = model.play()?.to_scalar::<f32>()?;
            if fresh < 0.5 {
                continue;
            }
            break;
        }
    }
    Ok(())
}
"#;
    // A loop body that `continue`s before its `break` may run again.
    assert_eq!(hits(RULE, src), [(13, 25), (37, 26), (54, 25)]);
}

#[test]
fn the_rest_of_a_block_that_returns_unless_debugging_runs_only_while_debugging() {
    // qwen3-tts-rs's shape: a helper that logs tensor statistics returns first unless
    // tracing's debug level is on, so its reads run only while debugging, however often
    // the decoder's loops call it; so does the rest of a loop body after `if !DEBUG {
    // continue; }`. A branch that does work on its way out (a profiler's `return f();`)
    // is no such exit, and neither is a switch that is not negated.
    let src = r#"
use candle_core::Tensor;
fn debug_tensor(name: &str, t: &Tensor) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    if let Ok(mean) = t.mean_all().and_then(|m| m.to_scalar::<f32>()) {
        tracing::debug!(stage = name, mean = mean);
    }
}
fn mean(t: &Tensor) -> candle_core::Result<f32> {
    if !enabled() {
        return finish(t);
    }
    let out = t.mean_all()?.to_scalar::<f32>();
    out
}
fn quiet(t: &Tensor) -> candle_core::Result<f32> {
    if DEBUG {
        return Ok(0.0);
    }
    t.mean_all()?.to_scalar::<f32>()
}
fn rows(xs: &[Tensor]) -> candle_core::Result<()> {
    for x in xs {
        if !DEBUG {
            continue;
        }
        let m = x.to_scalar::<f32>()?;
    }
    Ok(())
}
fn decode(blocks: &[Block], frames: &[Tensor]) -> candle_core::Result<()> {
    for x in frames {
        for block in blocks {
            let h = block.forward(x)?;
            debug_tensor("block", &h);
            mean(&h)?;
            quiet(&h)?;
        }
        rows(frames)?;
    }
    Ok(())
}
"#;
    assert_eq!(hits(RULE, src), [(15, 15), (22, 5)]);
}

#[test]
fn a_guard_that_never_holds_holds_code_that_never_runs() {
    // Reinforcement_Learning_DQN_in_Rust_using_Burn's shape: a debug print switched off by
    // comparing a counter that counts up from zero with `-1`, in a per-sample loop of an
    // update that the training loops call. A counter that starts below zero may reach
    // `-1`: that guard lets one iteration through, and its callers' loops repeat it.
    let src = r#"
use candle_core::Tensor;
fn update(batch: &[Tensor]) -> candle_core::Result<()> {
    let mut index = 0;
    let mut shifted = -3;
    for t in batch {
        if index == -1 {
            println!("state {}", t.to_scalar::<f32>()?);
        }
        if shifted == -1 {
            println!("state {}", t.to_scalar::<f32>()?);
        }
        index += 1;
        shifted += 1;
    }
    Ok(())
}
fn train(episodes: usize, batches: &[Vec<Tensor>]) -> candle_core::Result<()> {
    for _ in 0..episodes {
        for batch in batches {
            update(batch)?;
        }
    }
    Ok(())
}
"#;
    assert_eq!(hits(RULE, src), [(11, 34)]);
}

#[test]
fn a_generic_helper_called_where_the_caller_runs_on_a_cpu_backend_does_not_fire() {
    // minimalRL-rs's shape: an episode loop in a function that names only burn's `NdArray`
    // (its model `QNet<Autodiff<NdArray>>`) calls a method of `impl<B> QNet<B> where B:
    // Backend` that reads the greedy action every step: through that call the method runs
    // on the CPU. The same call from a function on `Wgpu` fires, and so does a helper that
    // is generic over no backend (its tensors are its own, wherever it makes them).
    let src = r#"
use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::backend::ndarray::NdArrayDevice;
use burn::tensor::{Int, Tensor, backend::Backend};
struct QNet<B: Backend> { fc: Linear<B> }
impl<B> QNet<B>
where
    B: Backend,
{
    fn sample_action(&self, obs: Tensor<B, 1>) -> usize {
        let best: Tensor<B, 1, Int> = self.fc.forward(obs).argmax(0);
        best.into_scalar() as usize
    }
}
fn greedy(scores: &Tensor<Wgpu, 1>) -> f32 {
    scores.clone().max().into_scalar()
}
fn run_session(episodes: usize) {
    let device = NdArrayDevice::default();
    let q_net: QNet<Autodiff<NdArray>> = QNet::new(&device);
    for _ in 0..episodes {
        while !done() {
            let a = q_net.sample_action(observe(&device));
            greedy(&scores());
        }
    }
}
fn run_on_the_gpu(episodes: usize, q_net: &QNet<Autodiff<Wgpu>>) {
    for _ in 0..episodes {
        while !done() {
            let a = q_net.sample_action(observe_gpu());
        }
    }
}
"#;
    assert_eq!(hits(RULE, src), [(12, 9), (16, 5)]);
    let found = findings(RULE, src);
    let note = found[0].note.as_deref().unwrap();
    assert!(note.contains("in `run_on_the_gpu`"), "{note}");
    // Without the GPU caller, the generic method stays silent.
    let cpu_only = src.replace(
        "            let a = q_net.sample_action(observe_gpu());\n",
        "",
    );
    assert_eq!(hits(RULE, &cpu_only), [(16, 5)]);
}
