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
