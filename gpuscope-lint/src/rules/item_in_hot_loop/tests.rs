//! `item_in_hot_loop`'s tests.

use crate::testing::hits;

mod calls;
mod files;

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

#[test]
fn other_libraries_reads_fire_where_the_file_uses_them() {
    let candle = r#"
use candle_core::Tensor;
fn f(epochs: usize, xs: &[Tensor], rows: &[Vec<f32>]) -> candle_core::Result<f32> {
    let mut total = 0.0;
    for _ in 0..epochs {
        for x in xs {
            total += x.sum_all()?.to_scalar::<f32>()?;
            let v = x.to_vec1::<f32>()?;
        }
        for r in rows {
            let copy = r.to_vec();
        }
    }
    Ok(total)
}
"#;
    assert_eq!(hits(RULE, candle), [(7, 22), (8, 21)]);
    let burn = r#"
use burn::tensor::Tensor;
fn f<B: Backend>(epochs: usize, xs: &[Tensor<B, 2>]) {
    for _ in 0..epochs {
        for x in xs {
            log(x.clone().sum().into_scalar());
        }
    }
}
"#;
    assert_eq!(hits(RULE, burn), [(6, 17)]);
    let tch = r#"
use tch::Tensor;
fn f(epochs: usize, xs: &[Tensor]) {
    for _ in 0..epochs {
        xs.iter().for_each(|x| log(x.sum(tch::Kind::Float).double_value(&[])));
    }
}
"#;
    assert_eq!(hits(RULE, tch), [(5, 36)]);
    let found = crate::testing::findings(RULE, tch);
    assert!(
        found[0]
            .message
            .starts_with("`x.sum(..).double_value(..)` in an inner loop"),
        "{}",
        found[0].message
    );
    let conversions = r#"
use tch::Tensor;
fn f(epochs: usize, xs: &[Tensor], ns: &[i32]) {
    for _ in 0..epochs {
        for x in xs {
            let a = f64::try_from(&x.sum(tch::Kind::Float)).unwrap();
            let v = Vec::<f32>::try_from(x).unwrap();
        }
        for n in ns {
            let b = f64::from(*n);
        }
    }
}
"#;
    assert_eq!(hits(RULE, conversions), [(6, 21), (7, 21)]);
    let found = crate::testing::findings(RULE, conversions);
    assert!(
        found[1].message.starts_with("`Vec::<..>::try_from(x)`"),
        "{}",
        found[1].message
    );
    // Only tch converts tensors that way.
    assert_eq!(
        hits(
            RULE,
            &conversions
                .replace("use tch::Tensor;", "use candle_core::Tensor;")
                .replace("tch::Kind::Float", "0")
        ),
        []
    );
    // candle's read is not a method of tch's tensors.
    let not_tch = tch.replace("double_value(&[])", "to_scalar::<f64>()");
    assert_eq!(hits(RULE, &not_tch), []);
}

#[test]
fn burn_to_data_of_a_field_of_unknown_type_is_a_read_by_its_typed_getter() {
    // `parts` comes from another file: its fields' types are not known here, but
    // `to_data().to_vec::<f32>()` is burn's `TensorData`, so `to_data()` reads a tensor.
    let src = r#"
use burn::tensor::Tensor;
use crate::loss::compute_losses;
fn f<B: Backend>(epochs: usize, batches: &[Batch], names: &Names) {
    for _ in 0..epochs {
        for b in batches {
            let parts = compute_losses::<B>(b);
            let a = parts.actor_loss.to_data().to_vec::<f32>().unwrap();
            let v = parts.value_loss.to_data().iter::<f32>().next();
            let t = parts.entropy.to_data().try_to_vec::<f32>().unwrap();
            let n = names.to_data().to_vec();
            let s = names.to_data().len();
        }
    }
    let last = compute_losses::<B>(&batches[0]).actor_loss.to_data().to_vec::<f32>();
}
"#;
    assert_eq!(hits(RULE, src), [(8, 21), (9, 21), (10, 21)]);
    let found = crate::testing::findings(RULE, src);
    assert!(
        found[0]
            .message
            .starts_with("`parts.actor_loss.to_data()` in an inner loop"),
        "{}",
        found[0].message
    );
    // A tensor known as one is reported once, at its `to_data()`.
    let typed = src.replace("parts.value_loss", "t").replace(
        "let parts = compute_losses::<B>(b);",
        "let parts = compute_losses::<B>(b); let t: Tensor<B, 1> = b.x();",
    );
    assert_eq!(hits(RULE, &typed), [(8, 21), (9, 21), (10, 21)]);
    // Only burn's tensors give a `TensorData`.
    let candle = src.replace("use burn::tensor::Tensor;", "use candle_core::Tensor;");
    assert_eq!(hits(RULE, &candle), []);
}

#[test]
fn reads_of_tensors_on_the_cpu_wait_for_no_device() {
    // Embeddings copied back to the host and compared pairwise on the CPU (as an
    // embedding crate's examples do): no device to wait for.
    let src = r#"
use candle_core::{Device, Tensor};
fn test_device() -> Device {
    Device::Cpu
}
fn f(rows: Vec<f32>, n: usize, d: usize, w: &Tensor) -> candle_core::Result<f32> {
    let embeddings = Tensor::from_vec(rows.clone(), (n, d), &Device::Cpu)?;
    let device = Device::Cpu;
    let local = Tensor::new(rows.as_slice(), &device)?.reshape((n, d))?;
    let helper = Tensor::new(rows.as_slice(), &test_device())?;
    let mut total = 0.0;
    for i in 0..n {
        let e_i = embeddings.get(i)?;
        for j in (i + 1)..n {
            let e_j = embeddings.get(j)?;
            total += (&e_i * &e_j)?.sum_all()?.to_scalar::<f32>()?;
            total += local.get(j)?.sum_all()?.to_scalar::<f32>()?;
            total += (helper.get(j)? * 2.0)?.to_vec0::<f32>()?;
            total += (&e_j * w)?.sum_all()?.to_scalar::<f32>()?;
        }
    }
    Ok(total)
}
"#;
    // Only the product with `w`, a parameter that may be elsewhere, is reported.
    assert_eq!(hits(RULE, src), [(19, 22)]);
    // The same loops on the model's device wait for it at every read.
    let gpu = src
        .replace("&Device::Cpu)", "&Device::new_cuda(0)?)")
        .replace(
            "let device = Device::Cpu;",
            "let device = Device::new_cuda(0)?;",
        )
        .replace("    Device::Cpu\n", "    Device::new_cuda(0).unwrap()\n");
    assert_eq!(hits(RULE, &gpu), [(16, 22), (17, 22), (18, 22), (19, 22)]);
    // A move to the CPU in the read's own expression is the copy the read waits for;
    // a copy made once before the loops is read there for free.
    let moved = r#"
use candle_core::{Device, Tensor};
fn f(xs: &[Tensor], n: usize) -> candle_core::Result<()> {
    let host = xs[0].to_device(&Device::Cpu)?;
    for x in xs {
        for i in 0..n {
            let a = x.get(i)?.to_device(&Device::Cpu)?.to_vec1::<f32>()?;
            let b = host.get(i)?.to_vec1::<f32>()?;
        }
    }
    Ok(())
}
"#;
    assert_eq!(hits(RULE, moved), [(7, 21)]);
    // tch's `(Kind, Device::Cpu)` constants: its conversions and reads likewise.
    let tch = r#"
use tch::{kind::FLOAT_CPU, Kind, Tensor};
fn f(steps: usize, envs: usize, rewards: &Tensor) {
    let sums = Tensor::zeros([envs as i64], FLOAT_CPU);
    for _ in 0..steps {
        for e in 0..envs {
            let a = f64::try_from(sums.get(e as i64)).unwrap();
            let b = sums.sum(Kind::Float).double_value(&[]);
            let c = f64::try_from(rewards.get(e as i64)).unwrap();
        }
    }
}
"#;
    assert_eq!(hits(RULE, tch), [(9, 21)]);
    // `Device::Cpu` is candle's and tch's: in a file on burn it names nothing known.
    let burn = r#"
use burn::tensor::Tensor;
fn f<B: Backend>(epochs: usize, xs: &[Tensor<B, 1>]) {
    for _ in 0..epochs {
        for x in xs {
            let y = x.clone().to_device(&Device::Cpu);
            log(y.into_scalar());
        }
    }
}
"#;
    assert_eq!(hits(RULE, burn), [(7, 17)]);
}

#[test]
fn gpuscope_to_vec_needs_a_turbofish_or_a_tensor() {
    let src = r#"
use gpuscope::Tensor;
fn f(epochs: usize, xs: &[Tensor], names: &[String]) {
    for _ in 0..epochs {
        for x in xs {
            let a = x.to_vec::<f32>();
            let t = Tensor::zeros(&[2], &dev).unwrap();
            let b: Vec<f32> = t.to_vec().unwrap();
            let c = names.to_vec();
        }
    }
}
"#;
    assert_eq!(hits(RULE, src), [(6, 21), (8, 31)]);
}

#[test]
fn the_triggers_cover_every_librarys_reads() {
    use crate::check::{Check, Trigger};
    let parts: Vec<&str> = super::ItemInHotLoop
        .triggers()
        .unwrap()
        .iter()
        .map(|t| match t {
            Trigger::Part(p) => *p,
            other => panic!("{other:?}"),
        })
        .collect();
    for framework in crate::frameworks::ALL {
        for read in framework.device_reads {
            assert!(
                parts.iter().any(|p| read.contains(p)),
                "{}: `{read}` has no trigger",
                framework.name
            );
        }
    }
}

#[test]
fn reads_on_burns_cpu_backend_wait_for_no_device() {
    // A test that plays games on burn's `NdArray` backend, declared in the function (as an
    // RL crate's evaluation test does) or for the module, reads host memory: no device to
    // wait for.
    let src = r#"
use burn::backend::{Autodiff, NdArray};
use burn::tensor::Tensor;
type TestBackend = NdArray<f32>;
fn local_alias(games: usize, steps: usize) {
    type B = NdArray<f32>;
    let device = Default::default();
    let model = load_model::<B>(&device);
    for _ in 0..games {
        for _ in 0..steps {
            let a: i64 = sample(model.forward(obs(&device)), &device).into_scalar();
        }
    }
}
fn module_alias(n: usize) {
    let x: Tensor<TestBackend, 2> = Tensor::zeros([n, n], &Default::default());
    for i in 0..n {
        for j in 0..n {
            let v = cell(&x, i, j).to_data().to_vec::<f32>();
        }
    }
}
fn autodiff(n: usize) {
    type AB = Autodiff<NdArray>;
    let model = load_model::<AB>(&Default::default());
    for i in 0..n {
        for j in 0..n {
            let l = model.loss(i, j).into_scalar();
        }
    }
}
fn generic<B: Backend>(model: &Model<B>, n: usize) {
    for i in 0..n {
        for j in 0..n {
            let l = model.loss(i, j).into_scalar();
        }
    }
}
fn on_both(n: usize) {
    type B = NdArray<f32>;
    let cpu = load_model::<B>(&Default::default());
    let gpu = load_model::<burn::backend::Wgpu>(&Default::default());
    for i in 0..n {
        for j in 0..n {
            let l = gpu.loss(i, j).into_scalar();
        }
    }
}
"#;
    // The generic function's backend may be a GPU, and so may `on_both`'s.
    assert_eq!(hits(RULE, src), [(35, 21), (45, 21)]);
    // The same functions on a GPU backend wait at every read.
    let gpu = src.replace("NdArray<f32>", "Wgpu").replace(
        "use burn::backend::{Autodiff, NdArray};",
        "use burn::backend::{Autodiff, NdArray, Wgpu};",
    );
    let gpu = gpu.replace("Autodiff<NdArray>", "Autodiff<Wgpu>");
    assert_eq!(
        hits(RULE, &gpu),
        [(11, 26), (19, 21), (28, 21), (35, 21), (45, 21)]
    );
    // An alias declared twice, once of a GPU backend, is not known to be the CPU's; nor
    // is a method of an impl generic over its backend.
    let twice = format!("{src}\nmod gpu {{ type TestBackend = burn::backend::Cuda; }}\n");
    assert_eq!(hits(RULE, &twice), [(19, 21), (35, 21), (45, 21)]);
    let in_impl = r#"
use burn::backend::NdArray;
impl<B: Backend> Runner<B> {
    fn run(&self, n: usize) {
        let probe = load_model::<NdArray>(&Default::default());
        for i in 0..n {
            for j in 0..n {
                let l = self.model.loss(i, j).into_scalar();
            }
        }
    }
}
"#;
    assert_eq!(hits(RULE, in_impl), [(8, 25)]);
}

#[test]
fn a_guard_letting_a_bounded_number_of_iterations_through_does_not_repeat() {
    // A speech generator logs the first six tokens' audio: `total < 6` with `total` counting
    // the inner loop's iterations lets six of them through in all.
    let src = r#"
use candle_core::Tensor;
const FIRST: usize = 3;
fn f(model: &Model, x: &Tensor, epochs: usize, batches: &[Tensor], limit: usize) -> candle_core::Result<()> {
    let mut total = 0usize;
    let mut seen = 0usize;
    loop {
        for t in 0..model.window() {
            let y = model.step(x)?;
            if total < 6 {
                log(y.flatten_all()?.to_vec1::<f32>()?);
            }
            if t == 0 {
                log(y.to_vec1::<f32>()?);
            }
            if model.verbose() && FIRST > t {
                log(y.to_vec1::<f32>()?);
            }
            if total % 50 == 0 {
                log(y.to_vec1::<f32>()?);
            }
            if total < limit {
                log(y.to_vec1::<f32>()?);
            }
            if seen < 6 {
                log(y.to_vec1::<f32>()?);
            }
            if y.dims()[0] < 6 {
                log(y.to_vec1::<f32>()?);
            }
            if total < 1000 {
                log(y.to_vec1::<f32>()?);
            }
            total += 1;
            if model.done() {
                seen += 1;
            }
        }
        if model.finished() {
            break;
        }
    }
    for e in 0..epochs {
        for (i, b) in batches.iter().enumerate() {
            if i < 2 {
                log(model.loss(b)?.to_scalar::<f32>()?);
            }
            if e == 0 {
                log(model.loss(b)?.to_scalar::<f32>()?);
            }
            let mut n = 0;
            n += 1;
            if n < 2 {
                log(model.loss(b)?.to_scalar::<f32>()?);
            }
        }
    }
    Ok(())
}
"#;
    // Reported: every 50th token (still repeating), a bound that is not a constant, a count
    // that does not advance every iteration, a value that counts nothing, a bound too large
    // for a diagnostic of the first few (a thousand reads), a counter that starts afresh
    // each iteration.
    assert_eq!(
        hits(RULE, src),
        [(20, 21), (23, 21), (26, 21), (29, 21), (32, 21), (54, 21)]
    );
    // Without the guards, every read repeats.
    let unguarded = src
        .replace("if total < 6 {", "{")
        .replace("if t == 0 {", "{");
    assert_eq!(
        hits(RULE, &unguarded),
        [
            (11, 21),
            (14, 21),
            (20, 21),
            (23, 21),
            (26, 21),
            (29, 21),
            (32, 21),
            (54, 21)
        ]
    );
}

#[test]
fn reads_in_the_arguments_of_format_and_logging_macros_fire() {
    // skynet's `println!("Loss: {} ..", loss.double_value(&[]), ..)` every batch on CUDA.
    let src = r#"
fn train(xs: &[Tensor], epochs: usize) -> candle_core::Result<()> {
    for epoch in 0..epochs {
        for x in xs {
            let loss = x.exp()?.sum_all()?;
            println!("{epoch} {}", loss.to_scalar::<f32>()?);
            tracing::info!(target: "train", loss = %loss.to_scalar::<f32>()?, "step");
            assert!(loss.to_scalar::<f32>()? > 0.0, "{}", loss.to_scalar::<f32>()?);
            if loss.dims().is_empty() {
                panic!("{}", loss.to_scalar::<f32>()?);
            }
        }
    }
    Ok(())
}
"#;
    assert_eq!(hits(RULE, src), [(6, 36), (7, 53), (8, 21)]);
}

#[test]
fn reads_in_debug_logging_are_not_repeated_by_the_callers_loops() {
    let src = r#"
fn step(x: &Tensor) -> candle_core::Result<Tensor> {
    let y = x.exp()?;
    log::debug!("{}", y.sum_all()?.to_scalar::<f32>()?);
    debug_assert!(y.sum_all()?.to_scalar::<f32>()? > 0.0);
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
