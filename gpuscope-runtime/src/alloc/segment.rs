//! Segments: memory reserved from the device in one address range, carved into blocks.
//!
//! A segment is either one device allocation (`cudaMalloc`), or, with virtual memory,
//! a run of physical *chunks* mapped back to back inside an *arena*: an address range
//! reserved up front for one pool (every stream's, or one stream's: `sharing`). A chunk
//! is one `cuMemCreate`, mapped whole (CUDA maps a physical allocation only whole) with
//! its own `cuMemMap`; a growth of the pool creates one chunk (several side by side when
//! it is larger than `growth::chunk_limit`), maps it at the arena's top and makes it
//! accessible (one `cuMemSetAccess` for the growth), so the segment at the top grows in
//! place and its free tail (the arena's *wilderness*) grows with it.
//! Chunks go back to the device only whole, when they lie inside a free block
//! (`empty_cache`, garbage collection, memory pressure); the segment is then split
//! around the hole, and a later growth may map the hole again (`holes`), joining the
//! segments on either side when it fills it.

use std::collections::BTreeMap;

use crate::backend::{PhysHandle, StreamId};

use super::block::NIL;
use super::rounding::Pool;

/// A physical chunk of device memory (virtual memory only), mapped whole in one segment.
#[derive(Debug)]
pub(crate) struct PhysChunk {
    pub handle: PhysHandle,
    pub size: usize,
}

/// An address reservation for one pool (`stream`: the stream that made it; every stream
/// uses it when streams share pools). Its segments are the mapped runs
/// inside it, kept apart by unmapped holes; new chunks are mapped at `top`, the end of
/// the highest segment (the arena's base when nothing is mapped), or into a hole.
#[derive(Debug)]
pub(crate) struct Arena {
    pub base: u64,
    pub size: usize,
    pub stream: StreamId,
    pub pool: Pool,
    /// One past the highest mapped byte.
    pub top: u64,
    /// Bytes mapped in it (the sum of its segments' sizes).
    pub mapped: usize,
    /// Segments inside it, by base address.
    pub segments: BTreeMap<u64, u32>,
    /// The free block that ends at `top` (the wilderness), kept out of the free index
    /// and used only when no indexed block fits; `NIL` when the top block is in use.
    pub wild: u32,
    /// The step of the last growth, while nothing in the arena has been freed since:
    /// the arena is in a run of growths (a model's weights and optimizer state being
    /// built), and the next growth is larger (`growth::growth_size`). `None` after any free.
    pub growth_run: Option<usize>,
}

impl Arena {
    /// A new, empty arena.
    pub fn new(base: u64, size: usize, stream: StreamId, pool: Pool) -> Arena {
        Arena {
            base,
            size,
            stream,
            pool,
            top: base,
            mapped: 0,
            segments: BTreeMap::new(),
            wild: NIL,
            growth_run: None,
        }
    }

    /// One past its last byte.
    pub fn end(&self) -> u64 {
        self.base + self.size as u64
    }

    /// Bytes of address space left above the top.
    pub fn room(&self) -> usize {
        (self.end() - self.top) as usize
    }
}

/// Where a segment's memory comes from.
#[derive(Debug)]
pub(crate) enum SegmentMemory {
    /// One device allocation of the segment's size at its base.
    Device,
    /// Chunks mapped back to back from the segment's base, inside an arena.
    Mapped { chunks: Vec<u32>, arena: u32 },
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

impl Segment {
    /// One past its last byte.
    pub fn end(&self) -> u64 {
        self.base + self.size as u64
    }

    /// The arena it lies in (virtual memory).
    pub fn arena(&self) -> Option<u32> {
        match self.memory {
            SegmentMemory::Mapped { arena, .. } => Some(arena),
            SegmentMemory::Device => None,
        }
    }
}

/// A chunk the allocator could not put back where it belongs after a failed driver
/// call: still held from the device (and counted as reserved), to be unmapped (when
/// `mapped`) and released when memory next goes back to the device.
#[derive(Debug)]
pub(crate) struct Orphan {
    pub handle: PhysHandle,
    pub size: usize,
    /// Where it is still mapped, if it is.
    pub mapped: Option<u64>,
}
