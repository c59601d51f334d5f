//! A picture of the allocator's segments and blocks, for tests, tools and people.

use crate::backend::{DeviceAddr, StreamId};

use super::block::BlockState;
use super::rounding::Pool;

/// One block of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Its address.
    pub addr: DeviceAddr,
    /// Its size in bytes.
    pub size: usize,
    /// Bytes asked for, for an allocated block; else 0.
    pub requested: usize,
    /// What it is doing.
    pub state: BlockState,
    /// The stream that allocated it last (for a free block: whose work may still use
    /// it). With virtual memory, streams share segments (`share_across_streams`).
    pub stream: StreamId,
}

/// One segment and its blocks, in address order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Where it starts.
    pub base: DeviceAddr,
    /// Its size in bytes.
    pub size: usize,
    /// The stream whose pool it belongs to (with virtual memory and
    /// `share_across_streams:True`, the stream that first grew the pool every stream
    /// shares).
    pub stream: StreamId,
    /// The pool it belongs to.
    pub pool: Pool,
    /// Virtual memory pages (granularity units, 2 MiB on current GPUs) it spans (0 for
    /// a plain device allocation).
    pub pages: usize,
    /// Sizes of the physical chunks mapped behind it, in address order (`cuMemCreate`
    /// allocations, each mapped whole; empty for a plain device allocation).
    pub chunks: Vec<usize>,
    /// Its blocks, which tile it exactly.
    pub blocks: Vec<BlockInfo>,
}

impl SegmentInfo {
    /// Bytes in allocated blocks.
    pub fn allocated(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| b.state == BlockState::Allocated)
            .map(|b| b.size)
            .sum()
    }
}
