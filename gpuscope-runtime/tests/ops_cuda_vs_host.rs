//! Every operation on CUDA against the same operation on the host, on random inputs:
//! outputs and autograd gradients agree within float tolerance.
//!
//! Without a GPU (or without the CUDA driver) each test prints `skipped: <reason>` and
//! passes.
#![cfg(feature = "cuda")]

mod common;

use common::{cuda, on_host_and, private_cuda};
use gpuscope_runtime::optim::{AdamW, Optimizer, Sgd};
use gpuscope_runtime::tensor::{DType, Generator};
use gpuscope_runtime::{Device, Tensor, TensorError, no_grad};

fn host() -> Device {
    Device::host().unwrap()
}

fn randn(shape: &[usize], seed: u64, dtype: DType) -> Tensor {
    Tensor::randn_with(shape, dtype, &mut Generator::new(seed), &host()).unwrap()
}

fn uniform(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let u = Tensor::rand_with(shape, DType::F64, &mut Generator::new(seed), &host()).unwrap();
    let v: Vec<f32> = u
        .to_vec::<f64>()
        .unwrap()
        .into_iter()
        .map(|x| (lo + (hi - lo) * x) as f32)
        .collect();
    Tensor::from_vec(v, shape, &host()).unwrap()
}

fn close(name: &str, what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{name}: {what}: lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let ok = (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())) || (x.is_nan() && y.is_nan());
        assert!(ok, "{name}: {what}[{i}]: host {x}, cuda {y}");
    }
}

/// Runs `f` on host copies and CUDA copies of `inputs` (float inputs require grad),
/// backpropagates `Σ w ⊙ f(x)` with the same random `w`, and compares outputs and
/// gradients.
fn compare(
    name: &str,
    dev: &Device,
    inputs: &[Tensor],
    f: impl Fn(&[Tensor]) -> Result<Tensor, TensorError>,
) {
    compare_tol(name, dev, inputs, 2e-4, f)
}

fn compare_tol(
    name: &str,
    dev: &Device,
    inputs: &[Tensor],
    tol: f64,
    f: impl Fn(&[Tensor]) -> Result<Tensor, TensorError>,
) {
    let ((hv, hg), (cv, cg)) = on_host_and(name, dev, inputs, f);
    close(name, "output", &hv, &cv, tol);
    for (i, (h, c)) in hg.iter().zip(&cg).enumerate() {
        match (h, c) {
            (Some(h), Some(c)) => close(name, &format!("grad {i}"), h, c, tol),
            (None, None) => {}
            _ => panic!("{name}: gradient {i} exists on one device only"),
        }
    }
}

#[test]
fn elementwise_and_broadcasting() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let (a, b) = (randn(&[37, 19], 1, f), uniform(&[37, 19], 2, 0.5, 2.0));
    let (row, col, s) = (
        uniform(&[19], 3, 0.5, 2.0),
        uniform(&[37, 1], 4, 0.5, 2.0),
        uniform(&[], 5, 0.5, 2.0),
    );
    compare("add", &dev, &[a.clone(), b.clone()], |x| x[0].add(&x[1]));
    compare("sub", &dev, &[a.clone(), b.clone()], |x| x[0].sub(&x[1]));
    compare("mul", &dev, &[a.clone(), b.clone()], |x| x[0].mul(&x[1]));
    compare("div", &dev, &[a.clone(), b.clone()], |x| x[0].div(&x[1]));
    compare("add row", &dev, &[a.clone(), row.clone()], |x| {
        x[0].add(&x[1])
    });
    compare("div row", &dev, &[a.clone(), row.clone()], |x| {
        x[0].div(&x[1])
    });
    compare("mul column", &dev, &[a.clone(), col.clone()], |x| {
        x[0].mul(&x[1])
    });
    compare("sub scalar tensor", &dev, &[a.clone(), s], |x| {
        x[0].sub(&x[1])
    });
    compare(
        "outer",
        &dev,
        &[randn(&[37, 1], 6, f), randn(&[1, 19], 7, f)],
        |x| x[0].mul(&x[1]),
    );
    compare(
        "4-D broadcast",
        &dev,
        &[randn(&[3, 4, 5, 6], 8, f), randn(&[4, 1, 6], 9, f)],
        |x| x[0].add(&x[1]),
    );
    compare("add_scalar", &dev, std::slice::from_ref(&a), |x| {
        x[0].add_scalar(0.75)
    });
    compare("mul_scalar", &dev, std::slice::from_ref(&a), |x| {
        x[0].mul_scalar(-1.25)
    });
    compare("neg", &dev, std::slice::from_ref(&a), |x| x[0].neg());
    // Large enough for many blocks and the grid-stride loop.
    let big = randn(&[1 << 22], 10, f);
    compare("relu (4M)", &dev, &[big], |x| x[0].relu());
}

#[test]
fn activations() {
    let Some(dev) = cuda() else { return };
    let a = randn(&[64, 33], 11, DType::F32);
    compare("relu", &dev, std::slice::from_ref(&a), |x| x[0].relu());
    compare("gelu", &dev, std::slice::from_ref(&a), |x| x[0].gelu());
    compare("exp", &dev, std::slice::from_ref(&a), |x| x[0].exp());
    let p = uniform(&[64, 33], 12, 0.1, 4.0);
    compare("log", &dev, std::slice::from_ref(&p), |x| x[0].log());
    compare("sqrt", &dev, &[p], |x| x[0].sqrt());
}

#[test]
fn reductions_and_softmax() {
    let Some(dev) = cuda() else { return };
    let a = randn(&[7, 300, 5], 13, DType::F32);
    compare("sum", &dev, std::slice::from_ref(&a), |x| x[0].sum());
    compare("mean", &dev, std::slice::from_ref(&a), |x| x[0].mean());
    for axis in [0isize, 1, 2] {
        for keepdim in [false, true] {
            compare(
                &format!("sum_axis({axis}, {keepdim})"),
                &dev,
                std::slice::from_ref(&a),
                |x| x[0].sum_axis(axis, keepdim),
            );
            compare(
                &format!("mean_axis({axis}, {keepdim})"),
                &dev,
                std::slice::from_ref(&a),
                |x| x[0].mean_axis(axis, keepdim),
            );
        }
    }
    compare_tol(
        "sum of 1M",
        &dev,
        &[randn(&[1 << 20], 14, DType::F32)],
        1e-3,
        |x| x[0].sum(),
    );
    for cols in [1usize, 10, 255, 256, 257, 1000] {
        let s = randn(&[9, cols], 15, DType::F32).mul_scalar(3.0).unwrap();
        compare(
            &format!("softmax cols={cols}"),
            &dev,
            std::slice::from_ref(&s),
            |x| x[0].softmax(),
        );
        compare(&format!("log_softmax cols={cols}"), &dev, &[s], |x| {
            x[0].log_softmax()
        });
    }
}

#[test]
fn losses() {
    let Some(dev) = cuda() else { return };
    let logits = randn(&[300, 10], 16, DType::F32);
    let labels: Vec<i64> = (0..300).map(|i| (i * 7 % 10) as i64).collect();
    let t64 = Tensor::from_vec(labels.clone(), &[300], &host()).unwrap();
    let t32 = Tensor::from_vec(
        labels.iter().map(|&v| v as i32).collect::<Vec<_>>(),
        &[300],
        &host(),
    )
    .unwrap();
    compare(
        "cross_entropy i64",
        &dev,
        &[logits.clone(), t64.clone()],
        |x| x[0].cross_entropy(&x[1]),
    );
    compare("cross_entropy i32", &dev, &[logits.clone(), t32], |x| {
        x[0].cross_entropy(&x[1])
    });
    compare("nll_loss", &dev, &[logits, t64], |x| {
        x[0].log_softmax()?.nll_loss(&x[1])
    });
    compare(
        "mse_loss",
        &dev,
        &[
            randn(&[31, 7], 17, DType::F32),
            randn(&[31, 7], 18, DType::F32),
        ],
        |x| x[0].mse_loss(&x[1]),
    );
    // Targets out of range: `out_of_range_targets_*` below (on a device of their own).
}

/// Checks that `r` is the out-of-range report of `op` naming `row`, `target` and
/// `classes`.
fn expect_out_of_range<T: std::fmt::Debug>(
    r: Result<T, TensorError>,
    op: &str,
    row: usize,
    target: i64,
    classes: usize,
) -> String {
    match r {
        Err(TensorError::InvalidArgument { op: o, reason }) => {
            assert_eq!(o, op, "{reason}");
            for part in [
                format!("target {target} at row {row} "),
                format!("out of range for {classes} classes"),
                format!("in 0..{classes}"),
            ] {
                assert!(reason.contains(&part), "{part:?} missing: {reason}");
            }
            reason
        }
        other => panic!("expected {op}'s out-of-range report, got {other:?}"),
    }
}

#[test]
fn out_of_range_targets_are_errors_on_the_host() {
    let dev = host();
    let logits = randn(&[3, 4], 19, DType::F32);
    let cases: [(Tensor, usize, i64); 2] = [
        (Tensor::from_slice(&[0i64, 4, 1], &[3], &dev).unwrap(), 1, 4),
        (
            Tensor::from_slice(&[0i32, 1, -1], &[3], &dev).unwrap(),
            2,
            -1,
        ),
    ];
    for (t, row, v) in &cases {
        for (op, r) in [
            ("cross_entropy", logits.cross_entropy(t)),
            ("nll_loss", logits.log_softmax().unwrap().nll_loss(t)),
        ] {
            // From the call itself.
            match r {
                Err(TensorError::InvalidArgument { op: o, reason }) => {
                    assert_eq!(o, op);
                    let part = format!("target {v} of row {row} is not a class index in 0..4");
                    assert!(reason.contains(&part), "{reason}");
                }
                other => panic!("{op}: expected an error, got {other:?}"),
            }
        }
    }
}

#[test]
fn out_of_range_targets_are_reported_at_the_next_read_back_on_cuda() {
    let Some(dev) = private_cuda() else { return };
    let logits_h = randn(&[6, 10], 19, DType::F32);
    let logits = logits_h.to_device(&dev).unwrap();
    let good_h = Tensor::from_slice(&[0i64, 3, 9, 1, 2, 7], &[6], &host()).unwrap();
    let good = good_h.to_device(&dev).unwrap();
    let expected = logits_h.cross_entropy(&good_h).unwrap().item().unwrap();

    // Too large (i64, cross_entropy): the call succeeds (it does not wait for the GPU);
    // the next read-back reports it.
    let bad = Tensor::from_slice(&[0i64, 3, 9, 1, 2, 12], &[6], &dev).unwrap();
    let loss = logits.cross_entropy(&bad).unwrap();
    expect_out_of_range(loss.item(), "cross_entropy", 5, 12, 10);
    // Reported once: the record is cleared, and the loss itself is NaN.
    assert!(loss.item().unwrap().is_nan());
    let l = logits.cross_entropy(&good).unwrap().item().unwrap();
    assert!((l - expected).abs() < 1e-5, "{l} vs {expected}");

    // Negative (i32, nll_loss), reported by `to_vec`.
    let bad32 = Tensor::from_slice(&[0i32, -3, 9, 1, 2, 7], &[6], &dev).unwrap();
    let loss = logits.log_softmax().unwrap().nll_loss(&bad32).unwrap();
    expect_out_of_range(loss.to_vec::<f32>(), "nll_loss", 1, -3, 10);
    assert!(loss.to_vec::<f32>().unwrap()[0].is_nan());

    // Several bad rows: one report (the first the GPU found), then nothing.
    let many = Tensor::from_slice(&[10i64, -1, 11, 1, 2, 7], &[6], &dev).unwrap();
    let loss = logits.cross_entropy(&many).unwrap();
    match loss.item() {
        Err(TensorError::InvalidArgument { op, reason }) => {
            assert_eq!(op, "cross_entropy");
            assert!(
                [
                    "target 10 at row 0",
                    "target -1 at row 1",
                    "target 11 at row 2"
                ]
                .iter()
                .any(|p| reason.contains(p)),
                "{reason}"
            );
        }
        other => panic!("expected a report, got {other:?}"),
    }
    assert!(loss.item().unwrap().is_nan());

    // A copy to another device waits too, and reports.
    let loss = logits.cross_entropy(&bad).unwrap();
    expect_out_of_range(loss.to_device(&host()), "cross_entropy", 5, 12, 10);
    assert!(
        logits
            .cross_entropy(&good)
            .unwrap()
            .to_device(&host())
            .unwrap()
            .item()
            .unwrap()
            .is_finite()
    );
}

#[test]
fn out_of_range_targets_in_the_backward_step_on_cuda() {
    let Some(dev) = private_cuda() else { return };
    let logits_h = randn(&[6, 10], 19, DType::F32);
    let good_h = Tensor::from_slice(&[0i64, 3, 9, 1, 2, 7], &[6], &host()).unwrap();
    let bad = Tensor::from_slice(&[0i64, 3, 9, 1, 2, 12], &[6], &dev).unwrap();
    // The host's gradient with row 5's target valid: rows 0..5 must match.
    let xh = logits_h.clone().set_requires_grad(true);
    xh.cross_entropy(&good_h).unwrap().backward().unwrap();
    let gh = xh.grad().unwrap().to_vec::<f32>().unwrap();

    // Forward and backward before any read-back: the forward's report comes first (the
    // backward's is dropped while the record is taken), at the gradient's read-back.
    let x = logits_h.to_device(&dev).unwrap().set_requires_grad(true);
    let loss = x.cross_entropy(&bad).unwrap();
    loss.backward().unwrap();
    let reason = expect_out_of_range(
        x.grad().unwrap().to_vec::<f32>(),
        "cross_entropy",
        5,
        12,
        10,
    );
    assert!(reason.contains("by the loss kernel"), "{reason}");
    // Then the gradient reads: row 5 is zero (nothing read out of bounds), the others
    // are the host's.
    let g = x.grad().unwrap().to_vec::<f32>().unwrap();
    assert!(g[50..].iter().all(|&v| v == 0.0), "{:?}", &g[50..]);
    close(
        "cross_entropy backward",
        "grad rows 0..5",
        &to_f64(&gh[..50]),
        &to_f64(&g[..50]),
        1e-4,
    );

    // The forward's report read first: the backward step reports again.
    let x = logits_h.to_device(&dev).unwrap().set_requires_grad(true);
    let loss = x.cross_entropy(&bad).unwrap();
    expect_out_of_range(loss.item(), "cross_entropy", 5, 12, 10);
    loss.backward().unwrap();
    let reason = expect_out_of_range(
        x.grad().unwrap().to_vec::<f32>(),
        "cross_entropy",
        5,
        12,
        10,
    );
    assert!(reason.contains("by the backward step"), "{reason}");
    assert!(x.grad().unwrap().to_vec::<f32>().is_ok());
}

fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

#[test]
fn matmuls_and_shapes() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let (a, b) = (randn(&[65, 130], 20, f), randn(&[130, 33], 21, f));
    let (at, bt) = (randn(&[130, 65], 22, f), randn(&[33, 130], 23, f));
    compare("matmul", &dev, &[a.clone(), b.clone()], |x| {
        x[0].matmul(&x[1])
    });
    compare("matmul aᵀ b", &dev, &[at.clone(), b.clone()], |x| {
        x[0].matmul_t(&x[1], true, false)
    });
    compare("matmul a bᵀ", &dev, &[a.clone(), bt.clone()], |x| {
        x[0].matmul_t(&x[1], false, true)
    });
    compare("matmul aᵀ bᵀ", &dev, &[at, bt], |x| {
        x[0].matmul_t(&x[1], true, true)
    });
    compare(
        "matvec-like",
        &dev,
        &[randn(&[1, 130], 24, f), b.clone()],
        |x| x[0].matmul(&x[1]),
    );
    compare("reshape", &dev, std::slice::from_ref(&a), |x| {
        x[0].reshape(&[130, 65])
    });
    compare("transpose", &dev, &[a], |x| x[0].transpose());
}

#[test]
fn f64_on_cuda() {
    let Some(dev) = cuda() else { return };
    let d = DType::F64;
    let (a, b) = (randn(&[20, 30], 25, d), randn(&[30, 10], 26, d));
    let t = Tensor::from_vec(
        (0..20).map(|i| (i % 10) as i64).collect::<Vec<_>>(),
        &[20],
        &host(),
    )
    .unwrap();
    compare_tol("mlp f64", &dev, &[a, b, t], 1e-10, |x| {
        x[0].matmul(&x[1])?.gelu()?.cross_entropy(&x[2])
    });
}

#[test]
fn in_place_ops() {
    let Some(dev) = cuda() else { return };
    let a = randn(&[40, 12], 27, DType::F32);
    let b = randn(&[40, 12], 28, DType::F32);
    let row = randn(&[12], 29, DType::F32);
    let both = |f: &dyn Fn(&Tensor, &Tensor, &Tensor)| {
        let (ha, hb, hr) = (
            a.deep_clone().unwrap(),
            b.deep_clone().unwrap(),
            row.deep_clone().unwrap(),
        );
        let (ca, cb, cr) = (
            a.to_device(&dev).unwrap(),
            b.to_device(&dev).unwrap(),
            row.to_device(&dev).unwrap(),
        );
        f(&ha, &hb, &hr);
        f(&ca, &cb, &cr);
        (ha.to_f64_vec().unwrap(), ca.to_f64_vec().unwrap())
    };
    type InPlace = Box<dyn Fn(&Tensor, &Tensor, &Tensor)>;
    let cases: Vec<(&str, InPlace)> = vec![
        ("add_", Box::new(|a, b, _| a.add_(b).unwrap())),
        ("sub_ row", Box::new(|a, _, r| a.sub_(r).unwrap())),
        ("mul_", Box::new(|a, b, _| a.mul_(b).unwrap())),
        (
            "mul_scalar_",
            Box::new(|a, _, _| a.mul_scalar_(0.3).unwrap()),
        ),
        (
            "add_scalar_",
            Box::new(|a, _, _| a.add_scalar_(-2.0).unwrap()),
        ),
        (
            "add_scaled_",
            Box::new(|a, b, _| a.add_scaled_(b, -0.7).unwrap()),
        ),
        (
            "add_scaled_ self",
            Box::new(|a, _, _| a.add_scaled_(a, 0.5).unwrap()),
        ),
        ("add_ self", Box::new(|a, _, _| a.add_(a).unwrap())),
        ("zero_", Box::new(|a, _, _| a.zero_().unwrap())),
        ("fill_", Box::new(|a, _, _| a.fill_(3.5).unwrap())),
    ];
    for (name, f) in cases {
        let (h, c) = both(f.as_ref());
        close(name, "result", &h, &c, 1e-5);
    }
}

#[test]
fn optimizers() {
    let Some(dev) = cuda() else { return };
    for adam in [false, true] {
        let run = |on: &Device| {
            let p = randn(&[50, 20], 30, DType::F32)
                .to_device(on)
                .unwrap()
                .set_requires_grad(true);
            let mut opt: Box<dyn Optimizer> = if adam {
                Box::new(AdamW::new(vec![p.clone()], 0.01))
            } else {
                Box::new(
                    Sgd::new(vec![p.clone()], 0.05)
                        .momentum(0.9)
                        .weight_decay(1e-3)
                        .nesterov(true),
                )
            };
            for step in 0..5 {
                let g = randn(&[50, 20], 31 + step, DType::F32)
                    .to_device(on)
                    .unwrap();
                p.set_grad(Some(g));
                opt.step().unwrap();
            }
            p.to_f64_vec().unwrap()
        };
        close(
            if adam { "adamw" } else { "sgd" },
            "parameters",
            &run(&host()),
            &run(&dev),
            1e-5,
        );
    }
}

#[test]
fn training_steps_are_steady_on_cuda() {
    // A device of its own: the other tests use the shared one in parallel.
    let Some(dev) = private_cuda() else { return };
    let mut g = Generator::new(32);
    let w1 = no_grad(|| Tensor::randn_with(&[2, 64], DType::F32, &mut g, &dev).unwrap())
        .set_requires_grad(true);
    let w2 = no_grad(|| {
        Tensor::randn_with(&[64, 10], DType::F32, &mut g, &dev)
            .unwrap()
            .mul_scalar(0.1)
            .unwrap()
    })
    .set_requires_grad(true);
    let b1 = Tensor::zeros(&[64], &dev).unwrap().set_requires_grad(true);
    let mut opt = AdamW::new(vec![w1.clone(), b1.clone(), w2.clone()], 1e-2);
    let x = randn(&[128, 2], 33, DType::F32).to_device(&dev).unwrap();
    let y = Tensor::from_vec(
        (0..128).map(|i| (i % 10) as i64).collect::<Vec<_>>(),
        &[128],
        &dev,
    )
    .unwrap();
    let mut warm = None;
    let mut first = None;
    let mut last = 0.0;
    for step in 0..30 {
        let loss = x
            .matmul(&w1)
            .unwrap()
            .add(&b1)
            .unwrap()
            .relu()
            .unwrap()
            .matmul(&w2)
            .unwrap()
            .cross_entropy(&y)
            .unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        opt.zero_grad();
        last = loss.item().unwrap();
        first.get_or_insert(last);
        drop(loss);
        let st = dev.allocator().stats();
        let now = (st.num_device_alloc, st.allocated_bytes.all.current);
        if step == 1 {
            warm = Some(now);
        } else if let Some(w) = warm {
            assert_eq!(
                now, w,
                "step {step}: device allocations / allocated bytes changed after warm-up"
            );
        }
    }
    let first = first.unwrap_or(0.0);
    assert!(last < first, "loss {first} -> {last}");
}

#[test]
fn strided_copies() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let a = randn(&[37, 19], 40, f);
    let c = randn(&[6, 7, 8, 9], 41, f);
    compare(
        "contiguous of a transpose",
        &dev,
        std::slice::from_ref(&a),
        |x| x[0].t()?.contiguous(),
    );
    compare(
        "reshape of a transpose",
        &dev,
        std::slice::from_ref(&a),
        |x| x[0].t()?.reshape(&[19 * 37]),
    );
    compare("permuted 4-D", &dev, std::slice::from_ref(&c), |x| {
        x[0].permute(&[3, 1, 0, 2])?.contiguous()
    });
    compare(
        "narrowed (an offset)",
        &dev,
        std::slice::from_ref(&c),
        |x| x[0].narrow(2, 3, 4)?.contiguous(),
    );
    compare(
        "narrowed and transposed",
        &dev,
        std::slice::from_ref(&a),
        |x| x[0].narrow(0, 5, 20)?.t()?.narrow(0, 2, 10)?.contiguous(),
    );
    // Many blocks, and the grid-stride loop.
    compare(
        "transpose of 2048x1024",
        &dev,
        &[randn(&[2048, 1024], 42, f)],
        |x| x[0].t()?.contiguous(),
    );
    // More merged dimensions than one launch takes (9, reversed): one launch per index
    // of the outermost.
    let rev: Vec<usize> = (0..9).rev().collect();
    compare(
        "reversed 9-D",
        &dev,
        &[randn(&[2, 3, 2, 2, 3, 2, 2, 2, 3], 43, f)],
        |x| x[0].permute(&rev)?.contiguous(),
    );
    // Every element size (1, 2, 4, 8 bytes) gathered on CUDA, read back in order.
    let h: Vec<half::f16> = (0..210u8).map(|v| half::f16::from_f64(v.into())).collect();
    let per_dtype = [
        Tensor::from_vec((0..210i64).collect::<Vec<_>>(), &[5, 6, 7], &host()),
        Tensor::from_vec((0..210i32).collect::<Vec<_>>(), &[5, 6, 7], &host()),
        Tensor::from_vec((0..210u8).collect::<Vec<_>>(), &[5, 6, 7], &host()),
        Tensor::from_vec(h, &[5, 6, 7], &host()),
        Ok(randn(&[5, 6, 7], 44, DType::F64)),
    ];
    for t in per_dtype {
        let t = t.unwrap();
        let on_host = t.permute(&[2, 0, 1]).unwrap().to_f64_vec().unwrap();
        let d = t.to_device(&dev).unwrap();
        let v = d.permute(&[2, 0, 1]).unwrap();
        assert_eq!(v.to_f64_vec().unwrap(), on_host, "{}", t.dtype());
        let dense = v.contiguous().unwrap();
        assert!(dense.is_contiguous());
        assert_eq!(dense.to_f64_vec().unwrap(), on_host, "{}", t.dtype());
        // Back to the host from the view: gathered on CUDA, then copied.
        let back = v.to_device(&host()).unwrap();
        assert_eq!(back.to_f64_vec().unwrap(), on_host, "{}", t.dtype());
        // Scatter: zero a narrowed view of an integer or float tensor on each device.
        let (hz, cz) = (t.deep_clone().unwrap(), t.to_device(&dev).unwrap());
        for z in [&hz, &cz] {
            z.narrow(1, 1, 3)
                .unwrap()
                .transpose_dims(0, 2)
                .unwrap()
                .zero_()
                .unwrap();
        }
        assert_eq!(
            hz.to_f64_vec().unwrap(),
            cz.to_f64_vec().unwrap(),
            "{}",
            t.dtype()
        );
    }
}

#[test]
fn binary_operations_on_views() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let (a, b) = (randn(&[37, 19], 45, f), randn(&[19, 37], 46, f));
    compare("add of a view", &dev, &[a.clone(), b.clone()], |x| {
        x[0].t()?.add(&x[1])
    });
    compare(
        "div by a view",
        &dev,
        &[b.clone(), uniform(&[37, 19], 47, 0.5, 2.0)],
        |x| x[0].div(&x[1].t()?),
    );
    compare(
        "broadcast on a view",
        &dev,
        &[a.clone(), uniform(&[37], 48, 0.5, 2.0)],
        |x| x[0].t()?.mul(&x[1]),
    );
    compare("narrowed operands", &dev, &[a.clone(), b.clone()], |x| {
        x[0].narrow(0, 4, 19)?.sub(&x[1].narrow(1, 2, 19)?)
    });
    // More than 4 merged dimensions for the broadcast kernel: gathered first.
    compare(
        "reversed 6-D add",
        &dev,
        &[
            randn(&[2, 3, 2, 3, 2, 3], 49, f),
            randn(&[3, 2, 3, 2, 3, 2], 50, f),
        ],
        |x| x[0].permute(&[5, 4, 3, 2, 1, 0])?.add(&x[1]),
    );
    // Gathered inputs: unary, reductions, softmax, losses.
    compare("gelu of a view", &dev, std::slice::from_ref(&a), |x| {
        x[0].t()?.gelu()
    });
    compare("sum_axis of a view", &dev, std::slice::from_ref(&a), |x| {
        x[0].t()?.sum_axis(1, false)
    });
    compare("softmax of a view", &dev, std::slice::from_ref(&a), |x| {
        x[0].t()?.softmax()
    });
    let t = Tensor::from_vec(
        (0..19).map(|i| (i % 7) as i64).collect::<Vec<_>>(),
        &[19],
        &host(),
    )
    .unwrap();
    compare(
        "cross_entropy of a view",
        &dev,
        &[a.narrow(0, 0, 7).unwrap(), t],
        |x| x[0].t()?.cross_entropy(&x[1]),
    );
}

#[test]
fn matmuls_with_views() {
    let Some(dev) = cuda() else { return };
    let f = DType::F32;
    let (a, b) = (randn(&[65, 130], 51, f), randn(&[130, 33], 52, f));
    let (at, w) = (randn(&[130, 65], 53, f), randn(&[33, 130], 54, f));
    compare("x @ wᵀ (view)", &dev, &[a.clone(), w.clone()], |x| {
        x[0].matmul(&x[1].t()?)
    });
    compare("xᵀ (view) @ b", &dev, &[at.clone(), b.clone()], |x| {
        x[0].t()?.matmul(&x[1])
    });
    compare("both views", &dev, &[at.clone(), w.clone()], |x| {
        x[0].t()?.matmul(&x[1].t()?)
    });
    compare("views and flags", &dev, &[a.clone(), w.clone()], |x| {
        x[0].t()?.matmul_t(&x[1].t()?, true, false)
    });
    // Leading dimensions larger than a row: narrowed operands, one of them transposed.
    compare(
        "narrowed operands",
        &dev,
        &[randn(&[70, 140], 55, f), randn(&[40, 150], 56, f)],
        |x| {
            x[0].narrow(0, 3, 65)?
                .narrow(1, 5, 130)?
                .matmul(&x[1].narrow(1, 10, 130)?.narrow(0, 2, 33)?.t()?)
        },
    );
    // A single row of a transposed matrix (column-major, any leading dimension), and a
    // narrowed column.
    compare("row of a transpose", &dev, &[b.clone(), b.clone()], |x| {
        x[0].t()?.narrow(0, 3, 1)?.matmul(&x[1])
    });
    compare("narrowed column", &dev, &[a.clone(), b.clone()], |x| {
        x[0].matmul(&x[1].narrow(1, 4, 1)?)
    });
    compare_tol(
        "f64 views",
        &dev,
        &[
            randn(&[20, 30], 57, DType::F64),
            randn(&[10, 30], 58, DType::F64),
        ],
        1e-10,
        |x| x[0].matmul(&x[1].t()?)?.t(),
    );
}

#[test]
fn matmul_of_a_transposed_view_copies_nothing_on_cuda() {
    // A device of its own: the other tests allocate on the shared one in parallel.
    let Some(dev) = private_cuda() else { return };
    let x = randn(&[64, 128], 59, DType::F32).to_device(&dev).unwrap();
    let w = randn(&[256, 128], 60, DType::F32).to_device(&dev).unwrap();
    let expected = x.matmul_t(&w, false, true).unwrap().to_f64_vec().unwrap();
    let before = dev.allocator().stats().allocation.all.allocated;
    let y = x.matmul(&w.t().unwrap()).unwrap();
    assert_eq!(
        dev.allocator().stats().allocation.all.allocated - before,
        1,
        "only the output is allocated"
    );
    close(
        "x @ w.t()",
        "output",
        &expected,
        &y.to_f64_vec().unwrap(),
        1e-5,
    );
}

#[test]
fn in_place_on_views() {
    let Some(dev) = cuda() else { return };
    let a = randn(&[40, 12], 61, DType::F32);
    let b = randn(&[12, 40], 62, DType::F32);
    let row = randn(&[40], 63, DType::F32);
    // Runs `f` on copies of (a, b, row) on both devices; compares all of `a`'s storage.
    let both = |f: &dyn Fn(&Tensor, &Tensor, &Tensor) -> Result<(), TensorError>| {
        let h = [&a, &b, &row].map(|t| t.deep_clone().unwrap());
        let c = [&a, &b, &row].map(|t| t.to_device(&dev).unwrap());
        f(&h[0], &h[1], &h[2]).unwrap();
        f(&c[0], &c[1], &c[2]).unwrap();
        (h[0].to_f64_vec().unwrap(), c[0].to_f64_vec().unwrap())
    };
    type InPlace = Box<dyn Fn(&Tensor, &Tensor, &Tensor) -> Result<(), TensorError>>;
    let cases: Vec<(&str, InPlace)> = vec![
        ("add_", Box::new(|a, b, _| a.t()?.add_(b))),
        ("sub_ row", Box::new(|a, _, r| a.t()?.sub_(r))),
        ("mul_ by a view", Box::new(|a, b, _| a.mul_(&b.t()?))),
        ("mul_scalar_", Box::new(|a, _, _| a.t()?.mul_scalar_(0.3))),
        (
            "add_scalar_",
            Box::new(|a, _, _| a.narrow(1, 2, 5)?.add_scalar_(-2.0)),
        ),
        (
            "add_scaled_",
            Box::new(|a, b, _| a.t()?.add_scaled_(b, -0.7)),
        ),
        (
            "add_scaled_ self",
            Box::new(|a, _, _| {
                let v = a.t()?;
                v.add_scaled_(&v, 0.5)
            }),
        ),
        (
            "add_ self",
            Box::new(|a, _, _| {
                let v = a.t()?;
                v.add_(&v)
            }),
        ),
        (
            "add_ own transpose",
            Box::new(|a, _, _| {
                let s = a.narrow(0, 3, 12)?;
                s.add_(&s.t()?)
            }),
        ),
        ("zero_", Box::new(|a, _, _| a.t()?.narrow(0, 1, 4)?.zero_())),
        (
            "fill_",
            Box::new(|a, _, _| a.narrow(1, 7, 3)?.t()?.fill_(3.5)),
        ),
        ("copy_from", Box::new(|a, b, _| a.t()?.copy_from(b))),
    ];
    for (name, f) in cases {
        let (h, c) = both(f.as_ref());
        close(name, "result", &h, &c, 1e-5);
    }
}

#[test]
fn cuda_view_refuses_non_contiguous_tensors() {
    use cudarc::driver::{DevicePtr, DeviceSlice};
    let Some(dev) = cuda() else { return };
    let t = Tensor::zeros(&[4, 8], &dev).unwrap();
    let rows = t.narrow(0, 1, 2).unwrap(); // contiguous, 8 elements in
    let view = rows.cuda_view::<f32>().unwrap();
    assert_eq!(view.len(), 16);
    let stream = view.stream().clone();
    let (p, sync) = view.device_ptr(&stream);
    assert_eq!(
        p,
        t.addr().0 + 8 * 4,
        "the view starts at the storage offset"
    );
    drop(sync);
    for v in [t.t().unwrap(), t.narrow(1, 2, 3).unwrap()] {
        match v.cuda_view::<f32>() {
            Err(TensorError::InvalidArgument { op, reason }) => {
                assert_eq!(op, "cuda_view");
                assert!(reason.contains("contiguous()"), "{reason}");
            }
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
    }
    assert!(
        t.t()
            .unwrap()
            .contiguous()
            .unwrap()
            .cuda_view::<f32>()
            .is_ok()
    );
}
