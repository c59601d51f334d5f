//! Elementwise operations and broadcasting, activations, reductions and softmax,
//! losses, and out-of-range loss targets (errors on the host; reported at the next
//! read-back on CUDA).

use super::*;

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
