//! The transformer operations on CUDA against the same operations on the host, on
//! random inputs: outputs and autograd gradients agree within float tolerance (layer
//! norm, exact GELU and bias + GELU, linear, batched matmul, the causal softmax, causal
//! attention, embedding and its device-side index check, AdamW fused over many
//! parameters).
//!
//! Without a GPU (or without the CUDA driver) each test prints `skipped: <reason>` and
//! passes.
#![cfg(feature = "cuda")]

mod common;

use common::{cuda, on_host_and, private_cuda};
use gpuscope_runtime::optim::{AdamW, Optimizer};
use gpuscope_runtime::tensor::{DType, Generator};
use gpuscope_runtime::{Device, Tensor, TensorError};

fn host() -> Device {
    Device::host().unwrap()
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, DType::F32, &mut Generator::new(seed), &host()).unwrap()
}

/// The L2 distance relative to the larger norm, with an absolute floor of 1e-6 per
/// element's worth (for gradients that are 0 in exact arithmetic, such as a
/// one-column layer norm's `dx`, where both devices must stay within rounding noise).
fn rel(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if a.iter().zip(b).any(|(x, y)| x.is_nan() != y.is_nan()) {
        return f64::INFINITY;
    }
    num / norm(a).max(norm(b)).max(1e-6 * (a.len() as f64).sqrt())
}

/// Runs `f` on host and CUDA copies of `inputs` (float inputs require grad),
/// backpropagates `Σ w ⊙ f(x)` with the same random `w`, and compares outputs and
/// gradients by relative L2 distance.
fn compare(
    name: &str,
    dev: &Device,
    inputs: &[Tensor],
    f: impl Fn(&[Tensor]) -> Result<Tensor, TensorError>,
) {
    let ((hv, hg), (cv, cg)) = on_host_and(name, dev, inputs, f);
    let e = rel(&hv, &cv);
    assert!(e < 1e-5, "{name}: output relative error {e}");
    for (i, (h, c)) in hg.iter().zip(&cg).enumerate() {
        match (h, c) {
            (Some(h), Some(c)) => {
                let e = rel(h, c);
                assert!(e < 1e-4, "{name}: gradient {i} relative error {e}");
            }
            (None, None) => {}
            _ => panic!("{name}: gradient {i} exists on one device only"),
        }
    }
}

#[test]
fn layer_norm_and_gelu() {
    let Some(dev) = cuda() else { return };
    for (rows, cols) in [(37usize, 100usize), (5, 768), (1024, 512), (3, 1), (9, 33)] {
        let x = randn(&[rows, cols], 1)
            .mul_scalar(2.0)
            .unwrap()
            .add_scalar(0.5)
            .unwrap();
        let (w, b) = (randn(&[cols], 2), randn(&[cols], 3));
        compare(
            &format!("layer_norm {rows}x{cols}"),
            &dev,
            &[x, w, b],
            |t| t[0].layer_norm(&t[1], &t[2], 1e-5),
        );
    }
    // More rows than one chunk of the column sums, and more chunks than one grid row.
    let x = randn(&[70_000, 8], 4);
    compare(
        "layer_norm 70000x8",
        &dev,
        &[x, randn(&[8], 5), randn(&[8], 6)],
        |t| t[0].layer_norm(&t[1], &t[2], 1e-5),
    );
    let a = randn(&[64, 130], 7).mul_scalar(3.0).unwrap();
    compare("gelu_erf", &dev, std::slice::from_ref(&a), |t| {
        t[0].gelu_erf()
    });
    compare("bias_gelu", &dev, &[a.clone(), randn(&[130], 8)], |t| {
        t[0].bias_gelu(&t[1])
    });
    // Widths that take the 4-wide kernels (multiples of 4) and the general ones.
    for out in [80usize, 81] {
        compare(
            &format!("linear to {out}"),
            &dev,
            &[
                randn(&[4, 9, 48], 9),
                randn(&[out, 48], 10),
                randn(&[out], 11),
            ],
            |t| t[0].linear(&t[1], Some(&t[2])),
        );
        let a = randn(&[33, out], 12);
        compare(
            &format!("bias_gelu {out}"),
            &dev,
            &[a, randn(&[out], 13)],
            |t| t[0].bias_gelu(&t[1]),
        );
    }
    let (a, b) = (randn(&[64, 32], 14), randn(&[64, 32], 15));
    compare("add, 4 at a time", &dev, &[a.clone(), b.clone()], |t| {
        t[0].add(&t[1])
    });
    compare("mul, 4 at a time", &dev, &[a, b], |t| t[0].mul(&t[1]));
}

#[test]
fn batched_matmul() {
    let Some(dev) = cuda() else { return };
    let (a, b) = (randn(&[3, 5, 17, 33], 12), randn(&[3, 5, 33, 9], 13));
    compare("bmm", &dev, &[a.clone(), b.clone()], |t| t[0].bmm(&t[1]));
    let (at, bt) = (randn(&[3, 5, 33, 17], 14), randn(&[3, 5, 9, 33], 15));
    compare("bmm aᵀ b", &dev, &[at.clone(), b], |t| {
        t[0].bmm_t(&t[1], true, false)
    });
    compare("bmm a bᵀ", &dev, &[a, bt.clone()], |t| {
        t[0].bmm_t(&t[1], false, true)
    });
    compare("bmm aᵀ bᵀ", &dev, &[at, bt], |t| {
        t[0].bmm_t(&t[1], true, true)
    });
}

#[test]
fn causal_softmax_and_attention() {
    let Some(dev) = cuda() else { return };
    for cols in [1usize, 31, 32, 33, 256, 300] {
        let s = randn(&[2, 3, cols, cols], 16).mul_scalar(3.0).unwrap();
        compare(&format!("causal_softmax {cols}"), &dev, &[s], |t| {
            t[0].causal_softmax(0.3)
        });
    }
    compare(
        "causal_softmax q < k",
        &dev,
        &[randn(&[4, 7, 40], 17)],
        |t| t[0].causal_softmax(1.0),
    );
    for (b, t, c, h) in [
        (2usize, 16usize, 32usize, 4usize),
        (3, 33, 48, 3),
        (1, 256, 64, 1),
        (2, 64, 128, 8),
        (2, 9, 15, 5),
    ] {
        compare(
            &format!("causal_attention B{b} T{t} C{c} H{h}"),
            &dev,
            &[randn(&[b, t, 3 * c], 18)],
            |x| x[0].causal_attention(h),
        );
        compare(
            &format!("causal_attention_recomputed B{b} T{t} C{c} H{h}"),
            &dev,
            &[randn(&[b, t, 3 * c], 18)],
            |x| x[0].causal_attention_recomputed(h),
        );
        // On the GPU, recomputing gives the kept matrix's gradients (the same kernels on
        // the same inputs; compared to rounding, not bits, should cuBLAS choose another
        // algorithm the second time).
        let name = format!("attention variants B{b} T{t} C{c} H{h}");
        let inputs = [randn(&[b, t, 3 * c], 18)];
        let (_, (_, recomputed)) = on_host_and(&name, &dev, &inputs, |x| {
            x[0].causal_attention_recomputed(h)
        });
        let (_, (_, kept)) = on_host_and(&name, &dev, &inputs, |x| x[0].causal_attention(h));
        let e = rel(
            recomputed[0].as_deref().unwrap(),
            kept[0].as_deref().unwrap(),
        );
        assert!(e < 1e-6, "{name}: recomputed gradient relative error {e}");
    }
}

#[test]
fn embedding_and_its_device_side_index_check() {
    let Some(dev) = cuda() else { return };
    let idx: Vec<i64> = (0..300).map(|i| (i * 7 % 50) as i64).collect();
    let i64s = Tensor::from_vec(idx.clone(), &[10, 30], &host()).unwrap();
    let i32s = Tensor::from_vec(idx.iter().map(|&v| v as i32).collect(), &[300], &host()).unwrap();
    compare(
        "embedding i64",
        &dev,
        &[randn(&[50, 24], 19), i64s.clone()],
        |t| t[0].embedding(&t[1]),
    );
    compare("embedding i32", &dev, &[randn(&[50, 24], 20), i32s], |t| {
        t[0].embedding(&t[1])
    });
    compare(
        "tied embedding and head",
        &dev,
        &[randn(&[50, 24], 21), i64s],
        |t| {
            let h = t[0].embedding(&t[1])?.reshape(&[300, 24])?;
            h.matmul_t(&t[0], false, true)
        },
    );
    // An index out of range: the next read-back reports it; later reads are fine.
    let Some(own) = private_cuda() else { return };
    let table = randn(&[50, 4], 22).to_device(&own).unwrap();
    let bad = Tensor::from_slice(&[3i64, 50, 7], &[3], &own).unwrap();
    let rows = table.embedding(&bad).unwrap();
    let err = rows.to_vec::<f32>().unwrap_err().to_string();
    assert!(
        err.contains("embedding") && err.contains("index 50") && err.contains("50 rows"),
        "{err}"
    );
    assert_eq!(
        table
            .embedding(&bad.narrow(0, 0, 1).unwrap())
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .len(),
        4
    );
}

#[test]
fn adamw_fused_over_many_parameters_matches_the_host() {
    let Some(dev) = cuda() else { return };
    // 30 parameters (two launches of up to 24), of sizes from 1 to 20000 elements, and
    // one that is a view (updated through its own path).
    let shapes: Vec<Vec<usize>> = (0..30).map(|i| vec![1 + (i * 691) % 20_000]).collect();
    let run = |on: &Device| -> Vec<Vec<f64>> {
        let mut params: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                randn(s, 100 + i as u64)
                    .to_device(on)
                    .unwrap()
                    .set_requires_grad(true)
            })
            .collect();
        let base = randn(&[8, 6], 7)
            .to_device(on)
            .unwrap()
            .set_requires_grad(true);
        params.push(base.clone());
        let mut opt = AdamW::new(params.clone(), 1e-2).weight_decay(0.1);
        for step in 0..3u64 {
            for (i, p) in params.iter().enumerate() {
                let g = randn(p.shape(), 1000 * step + i as u64)
                    .to_device(on)
                    .unwrap();
                p.set_grad(Some(g));
            }
            opt.step().unwrap();
            opt.zero_grad();
        }
        params.iter().map(|p| p.to_f64_vec().unwrap()).collect()
    };
    let (h, c) = (run(&host()), run(&dev));
    for (i, (a, b)) in h.iter().zip(&c).enumerate() {
        let e = rel(a, b);
        assert!(e < 1e-6, "parameter {i}: relative error {e}");
    }
}
