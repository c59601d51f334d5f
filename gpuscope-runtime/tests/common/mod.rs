//! Helpers shared by the CUDA test files: each test skips, printing why, where there is
//! no CUDA driver or device (CI), runs for real on the GPU machine, and fails if a
//! device that the driver reports cannot be opened.

// Each test file uses the helpers it needs.
#![allow(dead_code)]

use std::sync::Arc;

use gpuscope_runtime::Device;
use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::cuda::{CudaBackend, unavailable_reason};

/// The CUDA backend of device 0 (a new one), or `None` after printing why there is none.
pub fn cuda_backend() -> Option<Arc<CudaBackend>> {
    if let Some(reason) = unavailable_reason() {
        println!("skipped: {reason}");
        return None;
    }
    Some(Arc::new(CudaBackend::new(0).expect(
        "device 0 opens when a driver and a GPU are present",
    )))
}

/// The process's CUDA device 0 (shared with every other test), or `None` after printing
/// why there is none.
pub fn cuda() -> Option<Device> {
    if let Some(reason) = unavailable_reason() {
        println!("skipped: {reason}");
        return None;
    }
    Some(Device::cuda(0).expect("device 0 opens when a driver and a GPU are present"))
}

/// A CUDA device of its own (its own backend and allocator: tests that count
/// allocations, or provoke device-side errors, do not see the tests that share
/// [`cuda`] in parallel), or `None` after printing why there is none.
pub fn private_cuda() -> Option<Device> {
    let backend = cuda_backend()?;
    Some(
        Device::with_backend(backend, AllocConfig::default())
            .expect("a device over a working backend"),
    )
}

/// Values and gradients of one run of an operation: the output's elements, and each
/// input's gradient (`None` for inputs that got none).
pub type Outcome = (Vec<f64>, Vec<Option<Vec<f64>>>);

/// Runs `f` on host copies and `dev` copies of `inputs` (float inputs require grad) and
/// backpropagates `Σ w ⊙ f(x)` with the same random `w` on both: the host's outcome,
/// then the device's. The callers compare them with their own tolerance.
pub fn on_host_and(
    name: &str,
    dev: &Device,
    inputs: &[gpuscope_runtime::Tensor],
    f: impl Fn(
        &[gpuscope_runtime::Tensor],
    ) -> Result<gpuscope_runtime::Tensor, gpuscope_runtime::TensorError>,
) -> (Outcome, Outcome) {
    use gpuscope_runtime::tensor::Generator;
    let host = Device::host().unwrap();
    let run = |on: &Device| -> Outcome {
        let leaves: Vec<_> = inputs
            .iter()
            .map(|t| {
                let c = t.to_device(on).unwrap();
                if t.dtype().is_float() {
                    c.set_requires_grad(true)
                } else {
                    c
                }
            })
            .collect();
        let out = f(&leaves).unwrap_or_else(|e| panic!("{name} on {}: {e}", on.description()));
        let w = gpuscope_runtime::Tensor::randn_with(
            out.shape(),
            out.dtype(),
            &mut Generator::new(4242),
            &host,
        )
        .unwrap()
        .to_device(on)
        .unwrap();
        let values = out.to_f64_vec().unwrap();
        out.mul(&w).unwrap().sum().unwrap().backward().unwrap();
        let grads = leaves
            .iter()
            .map(|l| l.grad().map(|g| g.to_f64_vec().unwrap()))
            .collect();
        (values, grads)
    };
    (run(&host), run(dev))
}
