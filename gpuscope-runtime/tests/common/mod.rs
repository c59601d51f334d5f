//! Helpers shared by the CUDA test files: each test skips, printing why, where there is
//! no CUDA driver or device (CI), and runs for real on the GPU machine.

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
    match CudaBackend::new(0) {
        Ok(b) => Some(Arc::new(b)),
        Err(e) => {
            println!("skipped: {e}");
            None
        }
    }
}

/// The process's CUDA device 0 (shared with every other test), or `None` after printing
/// why there is none.
pub fn cuda() -> Option<Device> {
    if let Some(reason) = unavailable_reason() {
        println!("skipped: {reason}");
        return None;
    }
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            println!("skipped: {e}");
            None
        }
    }
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
