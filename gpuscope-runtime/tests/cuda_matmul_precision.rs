//! `set_float32_matmul_precision` on a real GPU: each setting rounds the inputs of `f32`
//! products exactly as its number format does (full `f32`; TF32 for high, and for
//! medium, as PyTorch on CUDA), for 2-D, transposed and batched products, and random
//! products stay within the format's error.
//! A file of its own: the setting is process-wide, and the other CUDA tests compare
//! products at full precision. Skips with a printed reason where there is no CUDA.

#![cfg(feature = "cuda")]

mod common;

use std::sync::Mutex;

use common::cuda;
use gpuscope_runtime::{Device, MatmulPrecision, Tensor, set_float32_matmul_precision};

/// The tests of this file change a process-wide setting: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `f` under `p`, restoring the previous setting afterwards.
fn under<R>(p: MatmulPrecision, f: impl FnOnce() -> R) -> R {
    let before = set_float32_matmul_precision(p);
    let r = f();
    set_float32_matmul_precision(before);
    r
}

// 1 + 2^-12 is an f32 but rounds to 1 in TF32 (10 mantissa bits); 1 + 2^-10 is a TF32
// number (but would round to 1 in bf16, 7 bits). Products of ones with them sum exactly
// in f32, so every result below is exact.
const FINE: f32 = 1.0 + 1.0 / 4096.0;
const TF32_EXACT: f32 = 1.0 + 1.0 / 1024.0;

fn all_equal(t: &Tensor, want: f32, what: &str) {
    let v = t.to_vec::<f32>().unwrap();
    let bad = v.iter().filter(|&&x| x != want).count();
    assert_eq!(
        bad,
        0,
        "{what}: {bad} of {} elements differ from {want} (first {})",
        v.len(),
        v[0]
    );
}

#[test]
fn each_precision_rounds_inputs_as_its_format() {
    let Some(dev) = cuda() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let k = 512;
    let ones = Tensor::full(&[k, 256], 1.0, &dev).unwrap();
    for (value, expect) in [
        (FINE, [k as f32 * FINE, k as f32, k as f32]),
        (TF32_EXACT, [k as f32 * TF32_EXACT; 3]),
    ] {
        let a = Tensor::full(&[256, k], value, &dev).unwrap();
        for (p, want) in [
            MatmulPrecision::Highest,
            MatmulPrecision::High,
            MatmulPrecision::Medium,
        ]
        .into_iter()
        .zip(expect)
        {
            under(p, || {
                all_equal(
                    &a.matmul(&ones).unwrap(),
                    want,
                    &format!("{p} matmul of {value}"),
                );
                // aᵀ stored, read transposed: the same product.
                let at = a.t().unwrap().contiguous().unwrap();
                all_equal(
                    &at.matmul_t(&ones, true, false).unwrap(),
                    want,
                    &format!("{p} matmul_t of {value}"),
                );
                let a3 = a.reshape(&[4, 64, k]).unwrap();
                let b3 = Tensor::full(&[4, k, 128], 1.0, &dev).unwrap();
                all_equal(&a3.bmm(&b3).unwrap(), want, &format!("{p} bmm of {value}"));
            });
        }
    }
}

#[test]
fn random_products_stay_within_each_formats_error() {
    let Some(dev) = cuda() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let host = Device::host().unwrap();
    let (m, k, n) = (192, 384, 160);
    let a = Tensor::randn(&[m, k], &dev).unwrap();
    let b = Tensor::randn(&[k, n], &dev).unwrap();
    let exact = a
        .to_device(&host)
        .unwrap()
        .matmul(&b.to_device(&host).unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    // Relative to the product's typical size (sqrt(k) for unit normal inputs): f32 stays
    // far below TF32's rounding (2^-11 per input), TF32 (high and medium) within a few of
    // its units.
    let scale = (k as f32).sqrt();
    let mut errors = Vec::new();
    for p in [
        MatmulPrecision::Highest,
        MatmulPrecision::High,
        MatmulPrecision::Medium,
    ] {
        let got = under(p, || a.matmul(&b).unwrap().to_vec::<f32>().unwrap());
        let worst = got
            .iter()
            .zip(&exact)
            .map(|(g, e)| (g - e).abs() / scale)
            .fold(0.0f32, f32::max);
        errors.push(worst);
    }
    let [highest, high, medium] = errors[..] else {
        unreachable!()
    };
    assert!(highest < 1e-5, "f32: {highest}");
    assert!(
        high > highest && high < 4e-3,
        "TF32: {high} (f32 {highest})"
    );
    assert!(
        medium > highest && medium < 4e-3,
        "medium: {medium} (f32 {highest})"
    );
}

#[test]
fn the_host_computes_at_full_precision_under_any_setting() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let host = Device::host().unwrap();
    let a = Tensor::full(&[8, 64], FINE, &host).unwrap();
    let ones = Tensor::full(&[64, 8], 1.0, &host).unwrap();
    under(MatmulPrecision::Medium, || {
        all_equal(&a.matmul(&ones).unwrap(), 64.0 * FINE, "host under medium")
    });
}
