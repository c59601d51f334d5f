//! False-alarm shape: a value whose type has a `Drop` wrapped in `ManuallyDrop` so that its
//! fields can be moved out with `ptr::read` (turning a tensor's storage back into the plain
//! device slice it owns): every field holding device memory is read out, nothing leaks.

use cudarc::driver::{CudaSlice, CudaStream};
use std::mem::ManuallyDrop;
use std::sync::Arc;

pub struct SliceOwner {
    slice: CudaSlice<f32>,
    stream: Arc<CudaStream>,
    label: String,
    device: i32,
}

impl Drop for SliceOwner {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}

pub fn into_slice(owner: Box<SliceOwner>) -> CudaSlice<f32> {
    let owner = ManuallyDrop::new(*owner);
    // SAFETY: `owner` is never used again and its `Drop` does not run.
    let slice = unsafe { std::ptr::read(&owner.slice) };
    let _stream = unsafe { std::ptr::read(&owner.stream) };
    let _label = unsafe { std::ptr::read(&owner.label) };
    slice
}

pub fn release(owner: SliceOwner) -> i32 {
    let mut owner = ManuallyDrop::new(owner);
    let device = owner.device;
    // SAFETY: dropped once, not used afterwards.
    unsafe { ManuallyDrop::drop(&mut owner) };
    device
}
