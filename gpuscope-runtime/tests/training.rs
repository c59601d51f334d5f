//! Training end to end on the host: an MLP classifier on generated Gaussian blobs, with
//! the memory promises checked through the allocator's statistics.
//!
//! Each test has a device of its own (its own allocator), so the statistics it reads
//! are its own even when tests run in parallel.

use std::sync::Arc;

use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::optim::{AdamW, Optimizer, Sgd, fit_batch_size};
use gpuscope_runtime::scope::{LeakPolicy, ScopeGuard, ScopeOptions, set_tracking};
use gpuscope_runtime::tensor::{DType, Generator};
use gpuscope_runtime::{Device, Tensor, TensorError, no_grad};

const CLASSES: usize = 10;

fn private_device() -> Device {
    Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap()
}

fn allocated(dev: &Device) -> i64 {
    dev.allocator().stats().allocated_bytes.all.current
}

/// An f32 tensor's values as an f64 tensor of the same shape.
fn to_f64(t: &Tensor, dev: &Device) -> Tensor {
    let v: Vec<f64> = t
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect();
    Tensor::from_vec(v, t.shape(), dev).unwrap()
}

/// Asserts that each `got[p][i]` is `factor · want[p][i]`, up to 1e-12 of `want[p][i]`
/// (of 1 below 1); `what` names the comparison.
fn assert_scaled(got: &[Vec<f64>], want: &[Vec<f64>], factor: f64, what: &str) {
    for (g, w) in got.iter().zip(want) {
        for (a, b) in g.iter().zip(w) {
            assert!(
                (a - factor * b).abs() <= 1e-12 * b.abs().max(1.0),
                "{what}: {a} is not {factor} times {b}"
            );
        }
    }
}

/// Asserts that `got` is within 1e-12 of `want`, element by element; `what` names the
/// computation.
fn assert_near(got: &[f64], want: &[f64], what: &str) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{what}: {g} against {w}");
    }
}

/// Ten Gaussian blobs in the plane: centres on a circle of radius 4, spread 0.45.
struct Blobs {
    x: Vec<f32>,
    y: Vec<i64>,
}

impl Blobs {
    fn new(n: usize, seed: u64) -> Blobs {
        let mut g = Generator::new(seed);
        let mut x = Vec::with_capacity(2 * n);
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let c = i % CLASSES;
            let angle = c as f64 * std::f64::consts::TAU / CLASSES as f64;
            x.push((4.0 * angle.cos() + 0.45 * g.normal()) as f32);
            x.push((4.0 * angle.sin() + 0.45 * g.normal()) as f32);
            y.push(c as i64);
        }
        Blobs { x, y }
    }

    fn len(&self) -> usize {
        self.y.len()
    }

    /// Rows `start..start+b` (wrapping), as tensors.
    fn batch(&self, start: usize, b: usize, dev: &Device) -> (Tensor, Tensor) {
        let idx: Vec<usize> = (0..b).map(|i| (start + i) % self.len()).collect();
        let x: Vec<f32> = idx
            .iter()
            .flat_map(|&i| [self.x[2 * i], self.x[2 * i + 1]])
            .collect();
        let y: Vec<i64> = idx.iter().map(|&i| self.y[i]).collect();
        (
            Tensor::from_vec(x, &[b, 2], dev).unwrap(),
            Tensor::from_vec(y, &[b], dev).unwrap(),
        )
    }
}

/// A 2 → hidden → hidden → 10 MLP with GELU.
struct Mlp {
    params: Vec<Tensor>,
}

impl Mlp {
    fn new(hidden: usize, dtype: DType, dev: &Device, seed: u64) -> Mlp {
        let mut g = Generator::new(seed);
        let mut params = Vec::new();
        for (fan_in, fan_out) in [(2, hidden), (hidden, hidden), (hidden, CLASSES)] {
            let w = no_grad(|| {
                Tensor::randn_with(&[fan_in, fan_out], dtype, &mut g, dev)
                    .unwrap()
                    .mul_scalar((2.0 / fan_in as f64).sqrt())
                    .unwrap()
            });
            params.push(w.set_requires_grad(true));
            params.push(
                Tensor::full_dtype(&[fan_out], 0.0, dtype, dev)
                    .unwrap()
                    .set_requires_grad(true),
            );
        }
        Mlp { params }
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor, TensorError> {
        let p = &self.params;
        let h = x.matmul(&p[0])?.add(&p[1])?.gelu()?;
        let h = h.matmul(&p[2])?.add(&p[3])?.gelu()?;
        h.matmul(&p[4])?.add(&p[5])
    }

    /// The cross-entropy of the model's logits for `x` against the classes `y`.
    fn loss(&self, x: &Tensor, y: &Tensor) -> Tensor {
        self.forward(x).unwrap().cross_entropy(y).unwrap()
    }

    /// Every parameter's gradient, as f64 values.
    fn grads_f64(&self) -> Vec<Vec<f64>> {
        self.params
            .iter()
            .map(|p| p.grad().unwrap().to_vec::<f64>().unwrap())
            .collect()
    }

    fn accuracy(&self, data: &Blobs, dev: &Device) -> f64 {
        no_grad(|| {
            let (x, y) = data.batch(0, data.len(), dev);
            let logits = self.forward(&x).unwrap().to_vec::<f32>().unwrap();
            let y = y.to_vec::<i64>().unwrap();
            let correct = logits
                .chunks_exact(CLASSES)
                .zip(&y)
                .filter(|(row, t)| {
                    let best = row
                        .iter()
                        .enumerate()
                        .fold(0, |b, (i, v)| if *v > row[b] { i } else { b });
                    best as i64 == **t
                })
                .count();
            correct as f64 / y.len() as f64
        })
    }
}

/// One training step inside a scope that denies leaks; returns the loss.
fn train_step(model: &Mlp, opt: &mut impl Optimizer, x: &Tensor, y: &Tensor) -> f64 {
    let _scope = ScopeGuard::enter(ScopeOptions::new("train_step").leaks(LeakPolicy::Deny));
    let loss = model.loss(x, y);
    loss.backward().unwrap();
    opt.step().unwrap();
    opt.zero_grad();
    loss.item().unwrap()
}

#[test]
fn two_hundred_steps_are_steady_and_learn() {
    set_tracking(true);
    let dev = private_device();
    let train = Blobs::new(2000, 1);
    let test = Blobs::new(500, 2);
    let model = Mlp::new(32, DType::F32, &dev, 3);
    let mut opt = Sgd::new(model.params.clone(), 0.02).momentum(0.9);
    let batch = 32;
    let mut losses = Vec::new();
    let mut after_first = None;
    let mut device_allocs_after_warmup = None;
    for step in 0..200 {
        let (x, y) = train.batch(step * batch, batch, &dev);
        losses.push(train_step(&model, &mut opt, &x, &y));
        drop((x, y));
        let now = allocated(&dev);
        match after_first {
            None => after_first = Some(now),
            Some(first) => assert_eq!(
                now, first,
                "allocated bytes after step {step} differ from after step 0"
            ),
        }
        let device_allocs = dev.allocator().stats().num_device_alloc;
        if step == 1 {
            device_allocs_after_warmup = Some(device_allocs);
        } else if let Some(warm) = device_allocs_after_warmup {
            assert_eq!(
                device_allocs, warm,
                "step {step} allocated device memory after warm-up"
            );
        }
    }
    let head: f64 = losses[..10].iter().sum::<f64>() / 10.0;
    let tail: f64 = losses[190..].iter().sum::<f64>() / 10.0;
    assert!(tail < 0.25 * head, "loss went from {head:.4} to {tail:.4}");
    let acc = model.accuracy(&test, &dev);
    assert!(acc > 0.95, "test accuracy {acc:.3} is not above 0.95");
}

#[test]
fn adamw_trains_too_and_allocates_nothing_after_warmup() {
    set_tracking(true);
    let dev = private_device();
    let train = Blobs::new(1000, 4);
    let model = Mlp::new(32, DType::F32, &dev, 5);
    let mut opt = AdamW::new(model.params.clone(), 0.01);
    let mut first_loss = 0.0;
    let mut last_loss = 0.0;
    let mut warm = None;
    for step in 0..100 {
        let (x, y) = train.batch(step * 32, 32, &dev);
        let l = train_step(&model, &mut opt, &x, &y);
        if step == 0 {
            first_loss = l;
        }
        last_loss = l;
        if step == 1 {
            warm = Some((dev.allocator().stats().num_device_alloc, allocated(&dev)));
        } else if let Some((allocs, bytes)) = warm {
            assert_eq!(
                dev.allocator().stats().num_device_alloc,
                allocs,
                "step {step} allocated device memory"
            );
            assert_eq!(
                allocated(&dev),
                bytes,
                "allocated bytes after step {step} differ from after step 1"
            );
        }
    }
    assert!(
        last_loss < 0.5 * first_loss,
        "AdamW: loss {first_loss:.4} -> {last_loss:.4}"
    );
}

#[test]
fn backward_frees_the_graph() {
    let dev = private_device();
    let data = Blobs::new(64, 6);
    let model = Mlp::new(16, DType::F32, &dev, 7);
    let (x, y) = data.batch(0, 64, &dev);
    let before = allocated(&dev);

    // A graph that is never walked is freed with its output.
    let loss = model.loss(&x, &y);
    assert!(allocated(&dev) > before);
    drop(loss);
    assert_eq!(allocated(&dev), before, "an unwalked graph kept memory");

    // After backward the graph holds nothing: only the loss itself and the grads remain.
    let loss = model.loss(&x, &y);
    loss.backward().unwrap();
    let with_loss = allocated(&dev);
    drop(loss);
    let after = allocated(&dev);
    assert!(
        with_loss - after <= 512,
        "the walked graph still holds {} bytes",
        with_loss - after
    );
    // The allocator rounds small blocks to 512 bytes.
    let grad_bytes: i64 = model
        .params
        .iter()
        .map(|p| p.grad().unwrap().nbytes().div_ceil(512) as i64 * 512)
        .sum();
    assert_eq!(
        after,
        before + grad_bytes,
        "after backward + dropping the loss == before forward + grads"
    );
    Sgd::new(model.params.clone(), 0.1).zero_grad();
    assert_eq!(allocated(&dev), before);
}

#[test]
fn evaluation_under_no_grad_peaks_lower() {
    let dev = private_device();
    let data = Blobs::new(256, 8);
    let model = Mlp::new(64, DType::F32, &dev, 9);
    let (x, y) = data.batch(0, 256, &dev);
    let base = allocated(&dev);

    dev.allocator().reset_peak_stats();
    let loss = model.loss(&x, &y).item().unwrap();
    let peak_grad = dev.allocator().stats().allocated_bytes.all.peak - base;

    dev.allocator().reset_peak_stats();
    let loss_ng = no_grad(|| model.loss(&x, &y).item().unwrap());
    let peak_no_grad = dev.allocator().stats().allocated_bytes.all.peak - base;

    assert_eq!(loss, loss_ng);
    assert!(
        peak_no_grad < peak_grad,
        "no_grad peak {peak_no_grad} B is not below the grad-mode peak {peak_grad} B"
    );
    assert_eq!(allocated(&dev), base);
}

#[test]
fn skipping_zero_grad_doubles_gradients() {
    let dev = private_device();
    let data = Blobs::new(32, 10);
    let model = Mlp::new(16, DType::F64, &dev, 11);
    let (x, y) = data.batch(0, 32, &dev);
    let x = to_f64(&x, &dev);
    model.loss(&x, &y).backward().unwrap();
    let once = model.grads_f64();
    model.loss(&x, &y).backward().unwrap();
    assert_scaled(&model.grads_f64(), &once, 2.0, "two backward passes");
}

#[test]
fn gradient_accumulation_matches_the_full_batch() {
    let dev = private_device();
    let data = Blobs::new(64, 12);
    let model = Mlp::new(16, DType::F64, &dev, 13);
    let (x, y) = data.batch(0, 64, &dev);
    let x = to_f64(&x, &dev);
    model.loss(&x, &y).backward().unwrap();
    let full = model.grads_f64();
    let mut opt = Sgd::new(model.params.clone(), 0.1);
    opt.zero_grad();

    let k = 4;
    for i in 0..k {
        let (xb, yb) = data.batch(i * 16, 16, &dev);
        let xb = to_f64(&xb, &dev);
        let loss = model.loss(&xb, &yb).mul_scalar(1.0 / k as f64).unwrap();
        loss.backward().unwrap();
    }
    assert_scaled(
        &model.grads_f64(),
        &full,
        1.0,
        "accumulated against full-batch",
    );
}

#[test]
fn optimizer_steps_allocate_nothing_after_the_first() {
    let dev = private_device();
    let model = Mlp::new(16, DType::F32, &dev, 14);
    for p in &model.params {
        p.set_grad(Some(no_grad(|| {
            Tensor::ones(p.shape(), &dev)
                .unwrap()
                .mul_scalar(0.01)
                .unwrap()
        })));
    }
    let sgd = Sgd::new(model.params.clone(), 0.1)
        .momentum(0.9)
        .weight_decay(1e-4)
        .nesterov(true);
    let adamw = AdamW::new(model.params.clone(), 1e-3);
    let opts: Vec<Box<dyn Optimizer>> = vec![Box::new(sgd), Box::new(adamw)];
    for mut opt in opts {
        opt.step().unwrap();
        let st = dev.allocator().stats();
        let (allocs, bytes) = (st.allocation.all.allocated, st.allocated_bytes.all.current);
        for _ in 0..10 {
            opt.step().unwrap();
        }
        let st = dev.allocator().stats();
        assert_eq!(
            st.allocation.all.allocated, allocs,
            "a step after the first allocated"
        );
        assert_eq!(st.allocated_bytes.all.current, bytes);
    }
}

#[test]
fn sgd_and_adamw_match_hand_computations() {
    let dev = Device::host().unwrap();
    let p = Tensor::from_slice(&[1.0f64, -2.0], &[2], &dev)
        .unwrap()
        .set_requires_grad(true);
    let g = Tensor::from_slice(&[0.5f64, 0.25], &[2], &dev).unwrap();
    // SGD, momentum 0.9, weight decay 0.1, lr 0.1, two steps with the same gradient.
    let mut sgd = Sgd::new(vec![p.clone()], 0.1)
        .momentum(0.9)
        .weight_decay(0.1);
    let (mut pv, mut buf) = (vec![1.0f64, -2.0], vec![0.0f64; 2]);
    for step in 0..2 {
        p.set_grad(Some(g.deep_clone().unwrap()));
        sgd.step().unwrap();
        for i in 0..2 {
            let d = [0.5, 0.25][i] + 0.1 * pv[i];
            buf[i] = if step == 0 { d } else { 0.9 * buf[i] + d };
            pv[i] -= 0.1 * buf[i];
        }
    }
    assert_near(&p.to_vec::<f64>().unwrap(), &pv, "sgd");
    // AdamW, three steps.
    let q = Tensor::from_slice(&[1.0f64, -2.0], &[2], &dev)
        .unwrap()
        .set_requires_grad(true);
    let mut adamw = AdamW::new(vec![q.clone()], 0.01).weight_decay(0.1);
    let (mut qv, mut m, mut v) = (vec![1.0f64, -2.0], [0.0f64; 2], [0.0f64; 2]);
    for t in 1..=3 {
        q.set_grad(Some(g.deep_clone().unwrap()));
        adamw.step().unwrap();
        for i in 0..2 {
            let gi = [0.5, 0.25][i];
            qv[i] *= 1.0 - 0.01 * 0.1;
            m[i] = 0.9 * m[i] + 0.1 * gi;
            v[i] = 0.999 * v[i] + 0.001 * gi * gi;
            let mh = m[i] / (1.0 - 0.9f64.powi(t));
            let vh = v[i] / (1.0 - 0.999f64.powi(t));
            qv[i] -= 0.01 * mh / (vh.sqrt() + 1e-8);
        }
    }
    assert_near(&q.to_vec::<f64>().unwrap(), &qv, "adamw");
}

#[test]
fn fit_batch_size_finds_the_largest_and_leaves_nothing_behind() {
    let dev = private_device();
    let model = Mlp::new(64, DType::F32, &dev, 15);
    let data = Blobs::new(4096, 16);
    let mut opt = Sgd::new(model.params.clone(), 0.01);
    dev.allocator().set_memory_limit(Some(4 << 20));
    let base = allocated(&dev);
    let failures = std::cell::Cell::new(0);
    let mut step = |b: usize| -> Result<(), TensorError> {
        assert_eq!(
            allocated(&dev),
            base,
            "memory left behind before trying batch {b}"
        );
        let r = (|| {
            let (x, y) = data.batch(0, b, &dev);
            let loss = model.forward(&x)?.cross_entropy(&y)?;
            loss.backward()?;
            opt.step()
        })();
        opt.zero_grad();
        if r.is_err() {
            failures.set(failures.get() + 1);
        }
        r
    };
    let fit = fit_batch_size(4096, &mut step).unwrap();
    assert!(failures.get() > 0, "the cap never bit: {fit:?}");
    assert!(fit.batch_size > 16 && fit.batch_size < 4096, "{fit:?}");
    assert!(step(fit.batch_size).is_ok());
    let err = step(fit.batch_size + 1).unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    assert_eq!(allocated(&dev), base);
}

#[test]
fn fit_batch_size_reports_other_errors() {
    let r = fit_batch_size(8, |b| {
        if b > 2 {
            Err(TensorError::InvalidArgument {
                op: "test",
                reason: "not memory".into(),
            })
        } else {
            Ok(())
        }
    });
    assert!(matches!(r, Err(TensorError::InvalidArgument { .. })));
}

#[test]
fn a_graph_can_leave_its_scope_with_its_saved_tensors() {
    set_tracking(true);
    let dev = private_device();
    let data = Blobs::new(32, 17);
    let model = Mlp::new(16, DType::F32, &dev, 18);
    let (x, y) = data.batch(0, 32, &dev);
    let before = allocated(&dev);
    let loss = {
        let scope = ScopeGuard::enter(ScopeOptions::new("forward").leaks(LeakPolicy::Deny));
        let loss = model.loss(&x, &y);
        scope.escape(&loss);
        let mut saved = 0;
        loss.for_each_graph_tensor(&mut |t| {
            gpuscope_runtime::keep(t);
            saved += 1;
        });
        // matmul (2 each), bias add (none), gelu (input), log_softmax (output).
        assert!(saved >= 8, "only {saved} saved tensors listed");
        loss
    }; // deny: nothing is reported, the graph left with the loss
    loss.backward().unwrap();
    let mut left = 0;
    loss.for_each_graph_tensor(&mut |_| left += 1);
    assert_eq!(left, 0, "backward freed the graph");
    drop(loss);
    Sgd::new(model.params.clone(), 0.1).zero_grad();
    assert_eq!(allocated(&dev), before);
}
