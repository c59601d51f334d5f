//! False-alarm shapes (`forget_tensor`), as in an LLM inference engine on cudarc with a
//! buffer pool of its own (2026-11-27, twenty-first round): `upgrade_device_ptr` makes a
//! typed `CudaSlice` over memory another buffer owns (the last row of the logits, a
//! tensor's own bytes at its offset), only to give `dtoh_sync_copy` a type, and
//! `mem::forget` keeps that alias's destructor from freeing the memory a second time; and a
//! buffer's `Drop` forgets the slice of a non-owning view (`if !self.owned`), whose memory
//! another buffer frees. Neither leaks.
//! Reported (true): a scratch buffer allocated for each call and forgotten.

use cudarc::driver::{CudaDevice, CudaSlice, DevicePtr};
use std::sync::Arc;

pub struct PooledBuffer {
    slice: Option<CudaSlice<u8>>,
    owned: bool,
}

impl PooledBuffer {
    pub fn view(slice: CudaSlice<u8>) -> Self {
        PooledBuffer { slice: Some(slice), owned: false }
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if !self.owned {
            // Not ours: the owner frees it.
            if let Some(slice) = self.slice.take() {
                std::mem::forget(slice);
            }
        }
    }
}

pub fn last_row(dev: &Arc<CudaDevice>, logits: &CudaSlice<u8>, rows: usize, vocab: usize) -> Vec<f32> {
    let offset = (rows - 1) * vocab * std::mem::size_of::<f32>();
    let row = logits.slice(offset..offset + vocab * std::mem::size_of::<f32>());
    let raw = *row.device_ptr();
    let typed: CudaSlice<f32> = unsafe { dev.upgrade_device_ptr(raw, vocab) };
    let host = dev.dtoh_sync_copy(&typed).unwrap();
    std::mem::forget(typed);
    host
}

pub fn scratch_sum(dev: &Arc<CudaDevice>, n: usize) -> usize {
    let scratch: CudaSlice<f32> = dev.alloc_zeros(n).unwrap();
    let len = scratch.len();
    std::mem::forget(scratch);
    len
}
