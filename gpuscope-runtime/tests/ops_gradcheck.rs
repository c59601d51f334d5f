//! Gradient checks: every differentiable operation's backward step against central
//! finite differences, in f64 on the host.
//!
//! Each check reduces the operation's output to a scalar with fixed random weights
//! (`Σ w ⊙ f(x)`), so every output element's gradient matters, then compares the
//! autograd gradient of each input with `(L(x + h) - L(x - h)) / 2h` (the harness is
//! `tests/gradcheck/`, shared with `ops_transformer.rs`).

mod gradcheck;

use gpuscope_runtime::{Tensor, TensorError, no_grad};
use gradcheck::{away_from_zero, check, dev, randn, uniform};

#[test]
fn add_sub_mul_div_same_shape() {
    let (a, b) = (randn(&[3, 4], 1), uniform(&[3, 4], 2, 0.5, 2.0));
    check("add", &[a.clone(), b.clone()], |x| x[0].add(&x[1]));
    check("sub", &[a.clone(), b.clone()], |x| x[0].sub(&x[1]));
    check("mul", &[a.clone(), b.clone()], |x| x[0].mul(&x[1]));
    check("div", &[a, b], |x| x[0].div(&x[1]));
}

#[test]
fn broadcasting_row_column_and_scalar() {
    let a = randn(&[4, 3], 3);
    let row = uniform(&[3], 4, 0.5, 2.0);
    let col = uniform(&[4, 1], 5, 0.5, 2.0);
    let s = uniform(&[], 6, 0.5, 2.0);
    check("add row bias", &[a.clone(), row.clone()], |x| {
        x[0].add(&x[1])
    });
    check("sub row", &[a.clone(), row.clone()], |x| x[0].sub(&x[1]));
    check("mul row", &[a.clone(), row.clone()], |x| x[0].mul(&x[1]));
    check("div row", &[a.clone(), row.clone()], |x| x[0].div(&x[1]));
    check("row + matrix", &[row, a.clone()], |x| x[0].add(&x[1]));
    check("mul column", &[a.clone(), col.clone()], |x| x[0].mul(&x[1]));
    check("div column", &[a.clone(), col], |x| x[0].div(&x[1]));
    check("mul scalar tensor", &[a.clone(), s.clone()], |x| {
        x[0].mul(&x[1])
    });
    check(
        "outer [4,1] x [1,3]",
        &[randn(&[4, 1], 7), randn(&[1, 3], 8)],
        |x| x[0].mul(&x[1]),
    );
    check(
        "3-D + [3, 1]",
        &[randn(&[2, 3, 2], 9), randn(&[3, 1], 10)],
        |x| x[0].add(&x[1]),
    );
}

#[test]
fn scalar_ops() {
    let a = randn(&[5], 11);
    check("add_scalar", std::slice::from_ref(&a), |x| {
        x[0].add_scalar(2.5)
    });
    check("mul_scalar", std::slice::from_ref(&a), |x| {
        x[0].mul_scalar(-1.5)
    });
    check("neg", &[a], |x| x[0].neg());
}

#[test]
fn activations() {
    check("relu", &[away_from_zero(&[4, 5], 12)], |x| x[0].relu());
    check("gelu", &[randn(&[4, 5], 13)], |x| x[0].gelu());
    check("exp", &[randn(&[4, 5], 14)], |x| x[0].exp());
    check("log", &[uniform(&[4, 5], 15, 0.2, 3.0)], |x| x[0].log());
    check("sqrt", &[uniform(&[4, 5], 16, 0.2, 3.0)], |x| x[0].sqrt());
}

#[test]
fn reductions() {
    let a = randn(&[3, 4, 2], 17);
    check("sum", std::slice::from_ref(&a), |x| x[0].sum());
    check("mean", std::slice::from_ref(&a), |x| x[0].mean());
    for axis in [0isize, 1, 2, -1] {
        for keepdim in [false, true] {
            check(
                &format!("sum_axis({axis}, {keepdim})"),
                std::slice::from_ref(&a),
                |x| x[0].sum_axis(axis, keepdim),
            );
            check(
                &format!("mean_axis({axis}, {keepdim})"),
                std::slice::from_ref(&a),
                |x| x[0].mean_axis(axis, keepdim),
            );
        }
    }
}

#[test]
fn softmaxes() {
    let a = randn(&[4, 6], 18);
    check("softmax", std::slice::from_ref(&a), |x| x[0].softmax());
    check("log_softmax", std::slice::from_ref(&a), |x| {
        x[0].log_softmax()
    });
    check("softmax 3-D", &[randn(&[2, 3, 5], 19)], |x| x[0].softmax());
}

#[test]
fn losses() {
    let logits = randn(&[5, 4], 20);
    let t64 = Tensor::from_slice(&[0i64, 3, 1, 1, 2], &[5], &dev()).unwrap();
    let t32 = Tensor::from_slice(&[2i32, 0, 0, 3, 1], &[5], &dev()).unwrap();
    check("cross_entropy i64", std::slice::from_ref(&logits), |x| {
        x[0].cross_entropy(&t64)
    });
    check("cross_entropy i32", std::slice::from_ref(&logits), |x| {
        x[0].cross_entropy(&t32)
    });
    check("nll_loss", std::slice::from_ref(&logits), |x| {
        x[0].log_softmax()?.nll_loss(&t64)
    });
    check("mse_loss", &[randn(&[3, 4], 21), randn(&[3, 4], 22)], |x| {
        x[0].mse_loss(&x[1])
    });
}

#[test]
fn matmuls() {
    let (a, b) = (randn(&[3, 4], 23), randn(&[4, 5], 24));
    check("matmul", &[a.clone(), b.clone()], |x| x[0].matmul(&x[1]));
    let (at, bt) = (randn(&[4, 3], 25), randn(&[5, 4], 26));
    check("matmul aᵀ b", &[at.clone(), b.clone()], |x| {
        x[0].matmul_t(&x[1], true, false)
    });
    check("matmul a bᵀ", &[a.clone(), bt.clone()], |x| {
        x[0].matmul_t(&x[1], false, true)
    });
    check("matmul aᵀ bᵀ", &[at, bt], |x| {
        x[0].matmul_t(&x[1], true, true)
    });
}

#[test]
fn shapes() {
    let a = randn(&[3, 4], 27);
    check("reshape", std::slice::from_ref(&a), |x| {
        x[0].reshape(&[2, 6])
    });
    check("transpose", std::slice::from_ref(&a), |x| x[0].transpose());
    check("reshape then matmul", &[a, randn(&[6, 2], 28)], |x| {
        x[0].reshape(&[2, 6])?.matmul_t(&x[1], false, false)
    });
}

#[test]
fn views() {
    let a = randn(&[3, 4], 40);
    check("t", std::slice::from_ref(&a), |x| x[0].t());
    check("transpose then contiguous", std::slice::from_ref(&a), |x| {
        x[0].t()?.contiguous()
    });
    check(
        "reshape of a transpose (a copy)",
        std::slice::from_ref(&a),
        |x| x[0].t()?.reshape(&[2, 6]),
    );
    check("view", std::slice::from_ref(&a), |x| x[0].view(&[6, 2]));
    let c = randn(&[2, 3, 4], 41);
    check("transpose_dims", std::slice::from_ref(&c), |x| {
        x[0].transpose_dims(0, -1)
    });
    check("permute then reshape", std::slice::from_ref(&c), |x| {
        x[0].permute(&[1, 2, 0])?.reshape(&[12, 2])
    });
    check("narrow", std::slice::from_ref(&c), |x| x[0].narrow(1, 1, 2));
    check("narrow of a transpose", std::slice::from_ref(&a), |x| {
        x[0].t()?.narrow(0, 1, 2)
    });
    // A leaf reached twice through views: its gradients (views) accumulate.
    check("t + t", std::slice::from_ref(&a), |x| {
        x[0].t()?.add(&x[0].t()?)
    });
    check("x + xᵀ", &[randn(&[3, 3], 42)], |x| x[0].add(&x[0].t()?));
}

#[test]
fn operations_on_views() {
    let a = randn(&[4, 3], 43); // read transposed: [3, 4]
    let b = uniform(&[3, 4], 44, 0.5, 2.0);
    let row = uniform(&[4], 45, 0.5, 2.0);
    check("mul (both views)", &[a.clone(), b.clone()], |x| {
        x[0].t()?.mul(&x[1].t()?.t()?)
    });
    check(
        "div by a view",
        &[b.clone(), uniform(&[4, 3], 46, 0.5, 2.0)],
        |x| x[0].div(&x[1].t()?),
    );
    check("view + row", &[a.clone(), row], |x| x[0].t()?.add(&x[1]));
    check("gelu of a view", std::slice::from_ref(&a), |x| {
        x[0].t()?.gelu()
    });
    check("exp of a view", std::slice::from_ref(&a), |x| {
        x[0].t()?.exp()
    });
    check("sum_axis of a view", std::slice::from_ref(&a), |x| {
        x[0].t()?.sum_axis(0, false)
    });
    check("softmax of a view", std::slice::from_ref(&a), |x| {
        x[0].t()?.softmax()
    });
    let targets = Tensor::from_slice(&[0i64, 3, 1], &[3], &dev()).unwrap();
    check("cross_entropy of a view", std::slice::from_ref(&a), |x| {
        x[0].t()?.cross_entropy(&targets)
    });
    check("mse_loss of views", &[a.clone(), randn(&[4, 3], 47)], |x| {
        x[0].t()?.mse_loss(&x[1].t()?)
    });
    // The gradient of a sum reaching it through a transpose (a view).
    check("sum_axis then transpose", &[randn(&[2, 3, 4], 48)], |x| {
        x[0].sum_axis(2, false)?.t()
    });
}

#[test]
fn matmul_with_views() {
    let (x, w) = (randn(&[3, 4], 49), randn(&[5, 4], 50));
    check("x @ wᵀ (view)", &[x.clone(), w.clone()], |x| {
        x[0].matmul(&x[1].t()?)
    });
    check("xᵀ (view) @ x", std::slice::from_ref(&x), |x| {
        x[0].t()?.matmul(&x[0])
    });
    check("views with flags", &[x.clone(), w.clone()], |x| {
        x[0].t()?.matmul_t(&x[1].t()?, true, false)
    });
    // Narrowed operands: a leading dimension larger than a row.
    check(
        "narrowed @ narrowedᵀ",
        &[randn(&[4, 7], 51), randn(&[6, 5], 52)],
        |x| x[0].narrow(1, 2, 4)?.matmul(&x[1].narrow(1, 1, 4)?.t()?),
    );
    let targets = Tensor::from_slice(&[1i64, 0, 2], &[3], &dev()).unwrap();
    check(
        "linear layer through a transposed weight",
        &[x, w, randn(&[5], 53)],
        |x| {
            x[0].matmul(&x[1].t()?)?
                .add(&x[2])?
                .narrow(1, 0, 3)?
                .cross_entropy(&targets)
        },
    );
}

#[test]
fn composites_reuse_and_branches() {
    // The same input used twice, and two branches that meet again.
    check("x * x", &[randn(&[4], 29)], |x| x[0].mul(&x[0]));
    check("branches", &[randn(&[3, 3], 30)], |x| {
        let a = x[0].gelu()?;
        let b = x[0].exp()?;
        a.mul(&b)?.add(&x[0])
    });
    // A two-layer MLP with a cross-entropy loss.
    let targets = Tensor::from_slice(&[1i64, 0, 2, 2], &[4], &dev()).unwrap();
    check(
        "mlp",
        &[
            randn(&[4, 3], 31),
            randn(&[3, 5], 32),
            randn(&[5], 33),
            randn(&[5, 3], 34),
            randn(&[3], 35),
        ],
        |x| {
            let h = x[0].matmul(&x[1])?.add(&x[2])?.gelu()?;
            h.matmul(&x[3])?.add(&x[4])?.cross_entropy(&targets)
        },
    );
}

#[test]
fn no_grad_records_nothing() {
    let w = randn(&[3], 36).set_requires_grad(true);
    let y = no_grad(|| w.mul_scalar(2.0).unwrap().sum().unwrap());
    assert!(!y.requires_grad());
    assert!(y.is_leaf());
    assert!(matches!(y.backward(), Err(TensorError::Autograd(_))));
    let z = w.mul_scalar(2.0).unwrap().sum().unwrap();
    assert_eq!(z.grad_fn_name(), Some("sum"));
    assert!(w.mul_scalar(2.0).unwrap().detach().is_leaf());
}

#[test]
fn gradients_accumulate_across_backward_calls() {
    let w = randn(&[3], 37).set_requires_grad(true);
    w.mul_scalar(2.0)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    let grad = w.grad().unwrap();
    w.mul_scalar(3.0)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    assert!(
        w.grad().unwrap().same_storage(&grad),
        "accumulated in place"
    );
    assert_eq!(grad.to_vec::<f64>().unwrap(), vec![5.0; 3]);
}

#[test]
fn second_backward_is_an_error() {
    let w = randn(&[3], 38).set_requires_grad(true);
    let loss = w.exp().unwrap().sum().unwrap();
    loss.backward().unwrap();
    let err = loss.backward().unwrap_err();
    assert!(err.to_string().contains("second time"), "{err}");
}

#[test]
fn in_place_on_a_tensor_that_requires_grad_is_refused() {
    let w = randn(&[3], 39).set_requires_grad(true);
    assert!(matches!(w.add_scalar_(1.0), Err(TensorError::Autograd(_))));
    no_grad(|| w.add_scalar_(1.0)).unwrap();
}
