//! Segments: memory reserved from the device in one address range, carved into blocks.
//!
//! A segment is either one device allocation (`cudaMalloc`), or, with virtual memory,
//! a run of physical *pages* mapped back to back inside an address arena (one per
//! stream and pool), one mapping per page. A page is a physical chunk of one
//! granularity (2 MiB on current GPUs), one `cuMemCreate`: CUDA maps a chunk only
//! whole, so memory that moves on its own is a chunk of its own. Because every page is
//! mapped on its own, the whole pages inside any free block can be unmapped and mapped
//! again behind another segment: memory freed in one shape is reused in another,
//! whatever its address, without a device allocation.

use crate::backend::{BackendError, DeviceAddr, PhysHandle, StreamId, VirtualMemory};

use super::rounding::Pool;

/// A page's physical chunk of device memory (virtual memory only).
#[derive(Debug)]
pub(crate) struct PhysChunk {
    pub handle: PhysHandle,
    /// Whether it is mapped (else held in the allocator's free page pool).
    pub mapped: bool,
}

/// One page: the index of its chunk in the allocator's chunk table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Page {
    pub chunk: u32,
}

/// An address reservation for one stream's pool: its segments are the mapped runs
/// inside it, kept apart by unmapped holes (two runs that touch are one segment).
#[derive(Debug)]
pub(crate) struct Arena {
    pub base: u64,
    pub size: usize,
    /// Segments inside it, by base address.
    pub segments: std::collections::BTreeMap<u64, u32>,
}

impl Arena {
    /// One past its last byte.
    pub fn end(&self) -> u64 {
        self.base + self.size as u64
    }
}

/// Where a segment's memory comes from.
#[derive(Debug)]
pub(crate) enum SegmentMemory {
    /// One device allocation of the segment's size at its base.
    Device,
    /// Pages mapped back to back from the segment's base, inside an arena.
    Mapped { pages: Vec<Page>, arena: u32 },
}

/// One segment.
#[derive(Debug)]
pub(crate) struct Segment {
    pub base: u64,
    pub size: usize,
    pub stream: StreamId,
    pub pool: Pool,
    pub memory: SegmentMemory,
    /// The block at the segment's base.
    pub head: u32,
    /// Allocator tick when a block of it was last freed (for garbage collection).
    pub last_used: u64,
}

/// Maps `pages` back to back from `base` (each page its own mapping) and makes the range
/// accessible; on failure undoes what it did.
pub(crate) fn map_pages(
    vm: &dyn VirtualMemory,
    base: u64,
    pages: &[Page],
    chunks: &[Option<PhysChunk>],
    page_size: usize,
) -> Result<(), BackendError> {
    for (i, page) in pages.iter().enumerate() {
        let handle = chunks[page.chunk as usize]
            .as_ref()
            .expect("page of a live chunk")
            .handle;
        let addr = DeviceAddr(base).offset(i * page_size);
        // SAFETY: the caller hands us unmapped pages and an unmapped range of a reservation.
        let mapped = unsafe { vm.map(addr, page_size, handle) };
        if let Err(e) = mapped {
            // SAFETY: the first i pages were mapped just above and nothing has used them.
            let _ = unsafe { unmap_pages(vm, base, i, page_size) };
            return Err(e);
        }
    }
    // SAFETY: the whole range was mapped above.
    if let Err(e) = unsafe { vm.set_access(DeviceAddr(base), pages.len() * page_size) } {
        // SAFETY: as above.
        let _ = unsafe { unmap_pages(vm, base, pages.len(), page_size) };
        return Err(e);
    }
    Ok(())
}

/// Unmaps `count` pages mapped back to back from `base`.
///
/// # Safety
/// No queued work uses the range.
pub(crate) unsafe fn unmap_pages(
    vm: &dyn VirtualMemory,
    base: u64,
    count: usize,
    page_size: usize,
) -> Result<(), BackendError> {
    let mut first_error = None;
    for i in 0..count {
        // SAFETY: each page was mapped on its own at this address; the caller promises
        // the range is idle.
        if let Err(e) = unsafe { vm.unmap(DeviceAddr(base).offset(i * page_size), page_size) } {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
