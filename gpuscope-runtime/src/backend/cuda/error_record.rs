//! The device's error record, where kernels report errors they find in their inputs
//! (described in the [backend's documentation](super)).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use cudarc::driver::CudaContext;
use cudarc::driver::result;
use cudarc::driver::sys;

use super::{describe, driver, oom_or};
use crate::backend::BackendError;

/// The error record's layout, shared with the kernels (`gs_error_record` in
/// `kernels/ops.cu`): `code` is written last, after a system-wide fence, so a non-zero
/// `code` means the other fields are complete.
#[repr(C)]
struct RawErrorRecord {
    /// 0: no error; otherwise what found it (the kernel's caller decides the codes).
    code: u32,
    /// Taken by the first kernel thread that reports (atomicCAS from 0).
    claim: u32,
    row: i64,
    value: i64,
    limit: i64,
}

/// The record: mapped pinned host memory and the address kernels write it through.
struct ErrorRecord {
    host: *mut RawErrorRecord,
    device: sys::CUdeviceptr,
}

// SAFETY: the record is process-wide pinned memory; the host side touches it only
// through atomic and volatile accesses (see `ErrorRecordSlot::take`).
unsafe impl Send for ErrorRecord {}
unsafe impl Sync for ErrorRecord {}

/// An error a kernel recorded on the device (see the [backend's documentation](super)):
/// what found it, and the row, the bad value and the limit it broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSideError {
    /// Which operation and step found it, as the launching code numbered it.
    pub code: u32,
    /// The row (or element) where it was found.
    pub row: i64,
    /// The value that was out of range.
    pub value: i64,
    /// The exclusive upper bound the value had to respect (from 0).
    pub limit: i64,
}

/// A device's error record, allocated on first use.
#[derive(Default)]
pub(super) struct ErrorRecordSlot {
    record: OnceLock<ErrorRecord>,
    /// Serialises the first allocation.
    init: Mutex<()>,
}

impl ErrorRecordSlot {
    /// The record's device address; allocates and zeroes it on first use, with the
    /// device's context made current by `bind`.
    pub(super) fn device_ptr(
        &self,
        bind: impl FnOnce() -> Result<(), BackendError>,
    ) -> Result<sys::CUdeviceptr, BackendError> {
        if let Some(r) = self.record.get() {
            return Ok(r.device);
        }
        let _guard = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = self.record.get() {
            return Ok(r.device);
        }
        bind()?;
        let size = std::mem::size_of::<RawErrorRecord>();
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a fresh pinned allocation; the result is checked, the memory zeroed
        // below before anything reads it.
        let host = unsafe { result::malloc_host(size, flags) }
            .map_err(oom_or("cuMemHostAlloc", size))?
            .cast::<RawErrorRecord>();
        // SAFETY: `host` holds `size` bytes, aligned for the record (pinned
        // allocations are page-aligned); all-zero is the empty record.
        unsafe { std::ptr::write_bytes(host, 0, 1) };
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` came from cuMemHostAlloc with DEVICEMAP in this context.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) }
            .result()
            .map_err(|e| driver("cuMemHostGetDevicePointer", e));
        if let Err(e) = mapped {
            // SAFETY: allocated above, never handed out.
            if let Err(free) = unsafe { result::free_host(host.cast()) } {
                tracing::warn!(
                    "cuMemFreeHost of an unused error record failed: {}",
                    describe(free)
                );
            }
            return Err(e);
        }
        Ok(self
            .record
            .get_or_init(|| ErrorRecord { host, device })
            .device)
    }

    /// The error recorded since the last call, cleared so the next one can be
    /// recorded; `None` when there is none or no record was ever allocated.
    pub(super) fn take(&self) -> Option<DeviceSideError> {
        let r = self.record.get()?;
        // SAFETY: the record lives as long as the slot; `code` is a 4-byte-aligned u32
        // that the host touches only atomically.
        let code = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*r.host).code)) };
        if code.load(Ordering::Acquire) == 0 {
            return None;
        }
        // One host thread takes the report (another that saw it set gets 0 here).
        let taken = code.swap(0, Ordering::AcqRel);
        if taken == 0 {
            return None;
        }
        // SAFETY: a non-zero code was written after the fields (behind a system fence),
        // and no kernel writes them until `claim` is cleared below.
        let report = unsafe {
            DeviceSideError {
                code: taken,
                row: std::ptr::read_volatile(std::ptr::addr_of!((*r.host).row)),
                value: std::ptr::read_volatile(std::ptr::addr_of!((*r.host).value)),
                limit: std::ptr::read_volatile(std::ptr::addr_of!((*r.host).limit)),
            }
        };
        // SAFETY: as for `code`; from here kernels may claim the record again.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*r.host).claim)) }
            .store(0, Ordering::Release);
        Some(report)
    }

    /// Frees the record, if one was allocated, once the work queued on `ctx` (which may
    /// still write it) is done.
    pub(super) fn free(&mut self, ctx: &CudaContext) {
        let Some(record) = self.record.take() else {
            return;
        };
        let freed = ctx
            .synchronize()
            .map_err(|e| driver("cuCtxSynchronize", e))
            .and_then(|()| {
                // SAFETY: allocated by cuMemHostAlloc; no work uses it any more.
                unsafe { result::free_host(record.host.cast()) }
                    .map_err(|e| driver("cuMemFreeHost", e))
            });
        if let Err(e) = freed {
            tracing::warn!("freeing the CUDA error record failed: {e}");
        }
    }
}
