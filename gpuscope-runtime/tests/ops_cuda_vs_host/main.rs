//! Every operation on CUDA against the same operation on the host, on random inputs:
//! outputs and autograd gradients agree within float tolerance.
//!
//! Without a GPU (or without the CUDA driver) each test prints `skipped: <reason>` and
//! passes.
//!
//! Where things live: the helpers are here; `elementwise` (with reductions, losses
//! and out-of-range targets), `training` (matrix products, in-place operations,
//! optimizers, steady training steps) and `views` hold the tests.

#![cfg(feature = "cuda")]

#[path = "../common/mod.rs"]
mod common;

use common::{cuda, on_host_and, private_cuda};
use gpuscope_runtime::optim::{AdamW, Optimizer, Sgd};
use gpuscope_runtime::tensor::{DType, Generator};
use gpuscope_runtime::{Device, Tensor, TensorError, no_grad};

mod elementwise;
mod training;
mod views;

pub(crate) fn host() -> Device {
    Device::host().unwrap()
}

pub(crate) fn randn(shape: &[usize], seed: u64, dtype: DType) -> Tensor {
    Tensor::randn_with(shape, dtype, &mut Generator::new(seed), &host()).unwrap()
}

pub(crate) fn uniform(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let u = Tensor::rand_with(shape, DType::F64, &mut Generator::new(seed), &host()).unwrap();
    let v: Vec<f32> = u
        .to_vec::<f64>()
        .unwrap()
        .into_iter()
        .map(|x| (lo + (hi - lo) * x) as f32)
        .collect();
    Tensor::from_vec(v, shape, &host()).unwrap()
}

pub(crate) fn close(name: &str, what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{name}: {what}: lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let ok = (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())) || (x.is_nan() && y.is_nan());
        assert!(ok, "{name}: {what}[{i}]: host {x}, cuda {y}");
    }
}

/// Runs `f` on host copies and CUDA copies of `inputs` (float inputs require grad),
/// backpropagates `Σ w ⊙ f(x)` with the same random `w`, and compares outputs and
/// gradients.
pub(crate) fn compare(
    name: &str,
    dev: &Device,
    inputs: &[Tensor],
    f: impl Fn(&[Tensor]) -> Result<Tensor, TensorError>,
) {
    compare_tol(name, dev, inputs, 2e-4, f)
}

pub(crate) fn compare_tol(
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

pub(crate) fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}
