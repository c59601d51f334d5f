//! The gradient-check harness of the `ops_*` test files: autograd's gradients against
//! central finite differences on the host.
//!
//! Each check reduces the operation's output to a scalar with fixed random weights
//! (`Σ w ⊙ f(x)`), so every output element's gradient matters, then compares the
//! autograd gradient of each input with `(L(x + h) - L(x - h)) / 2h` computed in f64.
//! [`check`] runs the operation in f64 (tolerances of 1e-6 absolute, 1e-5 relative);
//! [`check_f32`] runs it in f32 and compares with the same f64 differences, at float32
//! tolerances.

// Each test file uses the helpers it needs.
#![allow(dead_code)]

use gpuscope_runtime::tensor::{DType, Generator};
use gpuscope_runtime::{Device, Tensor, TensorError, no_grad};

const H: f64 = 1e-6;
const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-5;

pub fn dev() -> Device {
    Device::host().unwrap()
}

pub fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, DType::F64, &mut Generator::new(seed), &dev()).unwrap()
}

/// Uniform in `[lo, hi)`.
pub fn uniform(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let u = Tensor::rand_with(shape, DType::F64, &mut Generator::new(seed), &dev()).unwrap();
    let v: Vec<f64> = u
        .to_vec::<f64>()
        .unwrap()
        .into_iter()
        .map(|x| lo + (hi - lo) * x)
        .collect();
    Tensor::from_vec(v, shape, &dev()).unwrap()
}

/// Values away from 0 (for relu's kink).
pub fn away_from_zero(shape: &[usize], seed: u64) -> Tensor {
    let v: Vec<f64> = randn(shape, seed)
        .to_vec::<f64>()
        .unwrap()
        .into_iter()
        .map(|x| {
            if x.abs() < 0.05 {
                x.signum() * 0.05 + x
            } else {
                x
            }
        })
        .collect();
    Tensor::from_vec(v, shape, &dev()).unwrap()
}

/// Checks the gradients of `f` at `inputs` (all f64 leaves; those in `wrt` require grad).
pub fn check(name: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor, TensorError>) {
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.deep_clone().unwrap().set_requires_grad(true))
        .collect();
    let out = f(&leaves).unwrap_or_else(|e| panic!("{name}: forward failed: {e}"));
    let weights = randn(out.shape(), 999);
    let loss = out.mul(&weights).unwrap().sum().unwrap();
    loss.backward()
        .unwrap_or_else(|e| panic!("{name}: backward failed: {e}"));

    let value = |xs: &[Tensor]| -> f64 {
        no_grad(|| {
            f(xs)
                .unwrap()
                .mul(&weights)
                .unwrap()
                .sum()
                .unwrap()
                .item()
                .unwrap()
        })
    };
    for (i, leaf) in leaves.iter().enumerate() {
        let analytic = leaf
            .grad()
            .unwrap_or_else(|| panic!("{name}: input {i} got no gradient"))
            .to_vec::<f64>()
            .unwrap();
        let base = inputs[i].to_vec::<f64>().unwrap();
        assert_eq!(
            analytic.len(),
            base.len(),
            "{name}: gradient {i} has the wrong size"
        );
        for j in 0..base.len() {
            let at = |delta: f64| {
                let mut v = base.clone();
                v[j] += delta;
                let mut xs: Vec<Tensor> = inputs.to_vec();
                xs[i] = Tensor::from_vec(v, inputs[i].shape(), &dev()).unwrap();
                value(&xs)
            };
            let numeric = (at(H) - at(-H)) / (2.0 * H);
            let a = analytic[j];
            assert!(
                (a - numeric).abs() <= ATOL + RTOL * numeric.abs().max(a.abs()),
                "{name}: d/dx{i}[{j}]: autograd {a}, finite differences {numeric}"
            );
        }
    }
}

/// As [`check`], with the operation run in f32 (the inputs rounded to f32, the same
/// weights), its gradients compared with f64 finite differences of the f64 operation at
/// the rounded inputs, to `atol + rtol·|g|`.
pub fn check_f32(
    name: &str,
    inputs: &[Tensor],
    atol: f64,
    rtol: f64,
    f: impl Fn(&[Tensor]) -> Result<Tensor, TensorError>,
) {
    let to_f32 = |t: &Tensor| {
        let v: Vec<f32> = t
            .to_vec::<f64>()
            .unwrap()
            .into_iter()
            .map(|x| x as f32)
            .collect();
        Tensor::from_vec(v, t.shape(), &dev()).unwrap()
    };
    let to_f64 = |t: &Tensor| {
        let v: Vec<f64> = t.to_f64_vec().unwrap();
        Tensor::from_vec(v, t.shape(), &dev()).unwrap()
    };
    let leaves32: Vec<Tensor> = inputs
        .iter()
        .map(|t| to_f32(t).set_requires_grad(true))
        .collect();
    // The f64 inputs are the f32 ones, exactly.
    let inputs64: Vec<Tensor> = leaves32.iter().map(|t| to_f64(&t.detach())).collect();
    let out = f(&leaves32).unwrap_or_else(|e| panic!("{name}: f32 forward failed: {e}"));
    let w64 = randn(out.shape(), 999);
    let w32 = to_f32(&w64);
    out.mul(&w32)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap_or_else(|e| panic!("{name}: f32 backward failed: {e}"));
    let value = |xs: &[Tensor]| -> f64 {
        no_grad(|| {
            f(xs)
                .unwrap()
                .mul(&w64)
                .unwrap()
                .sum()
                .unwrap()
                .item()
                .unwrap()
        })
    };
    for (i, leaf) in leaves32.iter().enumerate() {
        let analytic = leaf
            .grad()
            .unwrap_or_else(|| panic!("{name}: input {i} got no gradient"))
            .to_f64_vec()
            .unwrap();
        let base = inputs64[i].to_vec::<f64>().unwrap();
        for j in 0..base.len() {
            let at = |delta: f64| {
                let mut v = base.clone();
                v[j] += delta;
                let mut xs: Vec<Tensor> = inputs64.to_vec();
                xs[i] = Tensor::from_vec(v, inputs64[i].shape(), &dev()).unwrap();
                value(&xs)
            };
            let numeric = (at(H) - at(-H)) / (2.0 * H);
            let a = analytic[j];
            assert!(
                (a - numeric).abs() <= atol + rtol * numeric.abs().max(a.abs()),
                "{name} (f32): d/dx{i}[{j}]: autograd {a}, finite differences (f64) {numeric}"
            );
        }
    }
}
