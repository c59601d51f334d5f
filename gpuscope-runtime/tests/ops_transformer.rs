//! Gradient checks of the transformer operations (exact GELU, bias + GELU, layer norm,
//! linear, batched matmul, the causal softmax, causal attention, embedding with a tied
//! head, checkpointing, backward hooks) against central finite differences on the host:
//! in f64 for every operation, and in f32 at float32 tolerances for layer norm and the
//! softmaxes. Plus the forward values against plain compositions of older operations.

mod gradcheck;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpuscope_runtime::autograd::{checkpoint, on_backward};
use gpuscope_runtime::{Tensor, TensorError};
use gradcheck::{check, check_f32, dev, randn, uniform};

fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())),
            "{what}[{i}]: {x} against {y}"
        );
    }
}

#[test]
fn gelu_erf_and_bias_gelu() {
    check(
        "gelu_erf",
        &[randn(&[4, 5], 1).mul_scalar(2.0).unwrap()],
        |x| x[0].gelu_erf(),
    );
    check("bias_gelu", &[randn(&[3, 2, 5], 2), randn(&[5], 3)], |x| {
        x[0].bias_gelu(&x[1])
    });
    // The fused op is the composition.
    let (x, b) = (randn(&[6, 7], 4), randn(&[7], 5));
    let fused = x.bias_gelu(&b).unwrap().to_vec::<f64>().unwrap();
    let plain = x
        .add(&b)
        .unwrap()
        .gelu_erf()
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    close(&fused, &plain, 1e-15, "bias_gelu");
}

#[test]
fn layer_norm_f64_and_f32() {
    let x = randn(&[2, 3, 6], 6)
        .mul_scalar(3.0)
        .unwrap()
        .add_scalar(1.0)
        .unwrap();
    let (w, b) = (uniform(&[6], 7, 0.5, 1.5), randn(&[6], 8));
    check("layer_norm", &[x.clone(), w.clone(), b.clone()], |t| {
        t[0].layer_norm(&t[1], &t[2], 1e-5)
    });
    check_f32(
        "layer_norm",
        &[x.clone(), w.clone(), b.clone()],
        2e-5,
        2e-4,
        |t| t[0].layer_norm(&t[1], &t[2], 1e-5),
    );
    // Against the definition written with older operations.
    let y = x.layer_norm(&w, &b, 1e-5).unwrap().to_vec::<f64>().unwrap();
    let mean = x.mean_axis(-1, true).unwrap();
    let d = x.sub(&mean).unwrap();
    let var = d.mul(&d).unwrap().mean_axis(-1, true).unwrap();
    let want = d
        .div(&var.add_scalar(1e-5).unwrap().sqrt().unwrap())
        .unwrap()
        .mul(&w)
        .unwrap()
        .add(&b)
        .unwrap();
    close(&y, &want.to_vec::<f64>().unwrap(), 1e-12, "layer_norm");
}

#[test]
fn linear_with_and_without_bias() {
    let (x, w, b) = (randn(&[2, 3, 4], 9), randn(&[5, 4], 10), randn(&[5], 11));
    check("linear", &[x.clone(), w.clone(), b.clone()], |t| {
        t[0].linear(&t[1], Some(&t[2]))
    });
    check("linear, no bias", &[x.clone(), w.clone()], |t| {
        t[0].linear(&t[1], None)
    });
    let y = x.linear(&w, Some(&b)).unwrap().to_vec::<f64>().unwrap();
    let want = x
        .reshape(&[6, 4])
        .unwrap()
        .matmul_t(&w, false, true)
        .unwrap()
        .add(&b)
        .unwrap();
    close(&y, &want.to_vec::<f64>().unwrap(), 1e-14, "linear");
    assert!(x.linear(&randn(&[5, 3], 12), None).is_err());
}

#[test]
fn batched_matmul_every_transpose() {
    let a = randn(&[2, 3, 4, 5], 13);
    let b = randn(&[2, 3, 5, 2], 14);
    check("bmm", &[a.clone(), b.clone()], |t| t[0].bmm(&t[1]));
    let at = randn(&[2, 3, 5, 4], 15);
    let bt = randn(&[2, 3, 2, 5], 16);
    check("bmm aᵀ b", &[at.clone(), b.clone()], |t| {
        t[0].bmm_t(&t[1], true, false)
    });
    check("bmm a bᵀ", &[a.clone(), bt.clone()], |t| {
        t[0].bmm_t(&t[1], false, true)
    });
    check("bmm aᵀ bᵀ", &[at, bt], |t| {
        t[0].bmm_t(&t[1], true, true)
    });
    // Matrix by matrix, the 2-D product.
    let c = a.bmm(&b).unwrap().to_vec::<f64>().unwrap();
    let (a2, b2) = (
        a.reshape(&[6, 4, 5]).unwrap(),
        b.reshape(&[6, 5, 2]).unwrap(),
    );
    for i in 0..6 {
        let ai = a2.narrow(0, i, 1).unwrap().reshape(&[4, 5]).unwrap();
        let bi = b2.narrow(0, i, 1).unwrap().reshape(&[5, 2]).unwrap();
        close(
            &c[i * 8..(i + 1) * 8],
            &ai.matmul(&bi).unwrap().to_vec::<f64>().unwrap(),
            1e-14,
            "bmm",
        );
    }
    // Views are gathered; mismatched batches are errors.
    check(
        "bmm of a permuted view",
        &[randn(&[4, 2, 3], 17), randn(&[2, 4, 3], 18)],
        |t| t[0].permute(&[1, 0, 2])?.bmm_t(&t[1], false, true),
    );
    assert!(a.bmm(&randn(&[2, 2, 5, 2], 19)).is_err());
    assert!(a.bmm(&randn(&[2, 3, 4, 2], 20)).is_err());
}

#[test]
fn causal_softmax_f64_and_f32() {
    let s = randn(&[2, 3, 5, 5], 21).mul_scalar(2.0).unwrap();
    check("causal_softmax", std::slice::from_ref(&s), |t| {
        t[0].causal_softmax(0.7)
    });
    check_f32(
        "causal_softmax",
        std::slice::from_ref(&s),
        1e-5,
        1e-4,
        |t| t[0].causal_softmax(0.7),
    );
    check_f32("softmax", std::slice::from_ref(&s), 1e-5, 1e-4, |t| {
        t[0].softmax()
    });
    check_f32("log_softmax", std::slice::from_ref(&s), 1e-5, 1e-4, |t| {
        t[0].log_softmax()
    });
    // Fewer queries than keys: the last positions of the sequence.
    check("causal_softmax q < k", &[randn(&[3, 2, 5], 22)], |t| {
        t[0].causal_softmax(1.0)
    });
    // Against a mask of -inf and the plain softmax.
    let p = s.causal_softmax(0.7).unwrap().to_vec::<f64>().unwrap();
    let mut masked = s.mul_scalar(0.7).unwrap().to_vec::<f64>().unwrap();
    for (i, v) in masked.iter_mut().enumerate() {
        let (row, col) = ((i / 5) % 5, i % 5);
        if col > row {
            *v = f64::NEG_INFINITY;
        }
    }
    let want = Tensor::from_vec(masked, s.shape(), &dev())
        .unwrap()
        .softmax()
        .unwrap();
    close(&p, &want.to_vec::<f64>().unwrap(), 1e-14, "causal_softmax");
    assert!(randn(&[5, 3], 23).causal_softmax(1.0).is_err());
}

/// Causal attention written with the older operations: permute, bmm, the masked
/// softmax.
fn attention_reference(qkv: &Tensor, heads: usize) -> Result<Tensor, TensorError> {
    let (b, t, c3) = (qkv.shape()[0], qkv.shape()[1], qkv.shape()[2]);
    let (c, d) = (c3 / 3, c3 / 3 / heads);
    let p = qkv
        .reshape(&[b, t, 3, heads, d])?
        .permute(&[2, 0, 3, 1, 4])?;
    let pick =
        |i: usize| -> Result<Tensor, TensorError> { p.narrow(0, i, 1)?.reshape(&[b, heads, t, d]) };
    let (q, k, v) = (pick(0)?, pick(1)?, pick(2)?);
    let att = q
        .bmm_t(&k, false, true)?
        .causal_softmax(1.0 / (d as f64).sqrt())?;
    att.bmm(&v)?.permute(&[0, 2, 1, 3])?.reshape(&[b, t, c])
}

#[test]
fn causal_attention_matches_its_composition_and_differentiates() {
    let qkv = randn(&[2, 4, 12], 24);
    for heads in [1, 2, 4] {
        let y = qkv
            .causal_attention(heads)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let want = attention_reference(&qkv, heads)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        close(&y, &want, 1e-13, &format!("attention, {heads} heads"));
        check(
            &format!("causal_attention, {heads} heads"),
            std::slice::from_ref(&qkv),
            |t| t[0].causal_attention(heads),
        );
    }
    let err = qkv.causal_attention(3).unwrap_err().to_string();
    assert!(
        err.contains("3 heads do not divide the 4 channels"),
        "{err}"
    );
    assert!(randn(&[2, 4, 10], 25).causal_attention(1).is_err());
    // The node keeps the heads' q, k, v and the attention matrix; backward frees both.
    let leaf = qkv.deep_clone().unwrap().set_requires_grad(true);
    let y = leaf.causal_attention(2).unwrap();
    let mut kept = Vec::new();
    y.for_each_graph_tensor(&mut |t| kept.push(t.shape().to_vec()));
    assert_eq!(kept, vec![vec![3, 2, 2, 4, 2], vec![2, 2, 4, 4]]);
    y.sum().unwrap().backward().unwrap();
    let mut left = 0;
    y.for_each_graph_tensor(&mut |_| left += 1);
    assert_eq!(left, 0);
}

/// The gradient of `Σ w ⊙ attention(qkv)` with respect to `qkv`, and the values.
fn attention_grad(qkv: &Tensor, recompute: bool, heads: usize) -> (Vec<f64>, Vec<f64>) {
    let leaf = qkv.deep_clone().unwrap().set_requires_grad(true);
    let y = if recompute {
        leaf.causal_attention_recomputed(heads)
    } else {
        leaf.causal_attention(heads)
    }
    .unwrap();
    let w = randn(y.shape(), 40);
    y.mul(&w).unwrap().sum().unwrap().backward().unwrap();
    (
        y.to_vec::<f64>().unwrap(),
        leaf.grad().unwrap().to_vec::<f64>().unwrap(),
    )
}

#[test]
fn recomputed_attention_keeps_q_k_v_only_and_gives_the_same_gradients() {
    let qkv = randn(&[2, 6, 12], 41);
    for heads in [1, 2, 4] {
        check(
            &format!("causal_attention_recomputed, {heads} heads"),
            std::slice::from_ref(&qkv),
            |t| t[0].causal_attention_recomputed(heads),
        );
        // The same kernels on the same inputs: bit for bit the same values and gradients.
        assert_eq!(
            attention_grad(&qkv, true, heads),
            attention_grad(&qkv, false, heads),
            "{heads} heads"
        );
    }
    let leaf = qkv.deep_clone().unwrap().set_requires_grad(true);
    let y = leaf.causal_attention_recomputed(2).unwrap();
    let mut kept = Vec::new();
    y.for_each_graph_tensor(&mut |t| kept.push(t.shape().to_vec()));
    assert_eq!(kept, vec![vec![3, 2, 2, 6, 2]]);
    y.sum().unwrap().backward().unwrap();
    let mut left = 0;
    y.for_each_graph_tensor(&mut |_| left += 1);
    assert_eq!(left, 0);
    assert!(
        qkv.causal_attention_recomputed(5)
            .unwrap_err()
            .to_string()
            .contains("divide")
    );
}

#[test]
fn embedding_scatter_adds_and_ties_with_the_head() {
    let idx = Tensor::from_slice(&[3i64, 0, 3, 1, 3, 2], &[2, 3], &dev()).unwrap();
    let idx_move = idx.clone();
    check("embedding", &[randn(&[5, 4], 26)], move |t| {
        t[0].embedding(&idx_move)
    });
    let idx32 = Tensor::from_slice(&[1i32, 1, 4], &[3], &dev()).unwrap();
    check("embedding i32", &[randn(&[5, 4], 27)], move |t| {
        t[0].embedding(&idx32)
    });
    // Weight tying: the table looked up and used as the output head, gradients summed.
    let idx_move = idx.clone();
    check("tied embedding and head", &[randn(&[5, 4], 28)], move |t| {
        let h = t[0].embedding(&idx_move)?.reshape(&[6, 4])?;
        h.matmul_t(&t[0], false, true)
    });
    // Indices out of range, or not integers, are errors naming them.
    let table = randn(&[5, 4], 29);
    let bad = Tensor::from_slice(&[0i64, 5], &[2], &dev()).unwrap();
    let err = table.embedding(&bad).unwrap_err().to_string();
    assert!(
        err.contains("index 5 at position 1") && err.contains("table of 5 rows"),
        "{err}"
    );
    let neg = Tensor::from_slice(&[-1i32], &[1], &dev()).unwrap();
    assert!(table.embedding(&neg).is_err());
    assert!(table.embedding(&randn(&[2], 30)).is_err());
}

#[test]
fn cross_entropy_over_a_vocabulary() {
    let targets = Tensor::from_slice(&[7i64, 0, 31, 12, 7], &[5], &dev()).unwrap();
    check(
        "cross_entropy over 32 classes",
        &[randn(&[5, 32], 31)],
        move |t| t[0].cross_entropy(&targets),
    );
}

#[test]
fn checkpoint_gives_the_same_gradients_and_keeps_only_its_input() {
    let (w1, w2) = (randn(&[4, 4], 32), randn(&[4, 4], 33));
    let block = |x: &Tensor, w1: &Tensor, w2: &Tensor| -> Result<Tensor, TensorError> {
        x.matmul(w1)?.gelu_erf()?.matmul(w2)?.add(x)
    };
    check(
        "checkpointed block",
        &[randn(&[3, 4], 34), w1.clone(), w2.clone()],
        move |t| {
            let (a, b) = (t[1].clone(), t[2].clone());
            let y = checkpoint(&t[0], move |x| block(x, &a, &b))?;
            y.mul(&y)
        },
    );
    // Same gradients as without it, and the graph keeps the input only.
    let run = |ckpt: bool| {
        let x = randn(&[3, 4], 35).set_requires_grad(true);
        let (a, b) = (
            w1.deep_clone().unwrap().set_requires_grad(true),
            w2.deep_clone().unwrap().set_requires_grad(true),
        );
        let (ac, bc) = (a.clone(), b.clone());
        let y = if ckpt {
            checkpoint(&x, move |x| block(x, &ac, &bc)).unwrap()
        } else {
            block(&x, &a, &b).unwrap()
        };
        let mut kept = 0;
        y.for_each_graph_tensor(&mut |_| kept += 1);
        y.sum().unwrap().backward().unwrap();
        let g = |t: &Tensor| t.grad().unwrap().to_vec::<f64>().unwrap();
        (kept, [g(&x), g(&a), g(&b)])
    };
    let ((k0, g0), (k1, g1)) = (run(false), run(true));
    assert_eq!(k1, 1);
    assert!(k0 > 1);
    for (a, b) in g0.iter().zip(&g1) {
        close(a, b, 1e-14, "checkpoint gradients");
    }
}

#[test]
fn backward_hooks_see_the_gradient_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    check("on_backward", &[randn(&[2, 3], 36)], move |t| {
        let c = c.clone();
        Ok(on_backward(&t[0].exp()?, move |g| {
            assert_eq!(g.shape(), &[2, 3]);
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }))
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // An error from the hook stops the backward pass.
    let w = randn(&[2], 37).set_requires_grad(true);
    let y = on_backward(&w, |_| Err(TensorError::Unsupported("stop".into())));
    assert!(
        y.sum()
            .unwrap()
            .backward()
            .unwrap_err()
            .to_string()
            .contains("stop")
    );
}
