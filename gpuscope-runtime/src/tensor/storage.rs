//! A tensor's storage: a device buffer, its version counter (shared by every view), and
//! (with tracking on) the record that the scopes follow. Dropping the storage returns
//! the buffer to the allocator's cache and marks the record dropped.

use crate::backend::StreamId;
use crate::device::{Device, DeviceBuffer};
use crate::scope::{self, SlotRef};
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{DType, TensorError};

pub(crate) struct Storage {
    pub buffer: DeviceBuffer,
    pub record: Option<SlotRef>,
    /// How many in-place writes the buffer has had (autograd compares it with the value
    /// it saw when it saved a tensor).
    version: AtomicU64,
}

impl Storage {
    /// Allocates `numel` elements of `dtype` on `stream`; tracked when tracking is on,
    /// with `site` as the creating line.
    pub fn new(
        device: &Device,
        dtype: DType,
        shape: &[usize],
        stream: StreamId,
        site: &'static Location<'static>,
    ) -> Result<Storage, TensorError> {
        let numel: usize = shape.iter().product();
        // An empty tensor still gets a (minimum-size) block, so it has an address.
        let bytes = (numel * dtype.size()).max(1);
        let buffer = device.alloc_at(bytes, stream, site)?;
        let record = if scope::tracking() {
            scope::track(site, bytes, dtype, shape, device, buffer.addr().0, stream)
        } else {
            scope::note_untracked(device, stream);
            None
        };
        Ok(Storage {
            buffer,
            record,
            version: AtomicU64::new(0),
        })
    }

    /// The number of in-place writes so far.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Counts one in-place write.
    #[inline]
    pub fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::Release);
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Some(r) = &self.record {
            r.mark_dropped();
        }
    }
}
