//! The caching device allocator.
//!
//! Where things live:
//! - [`caching`]: [`CachingAllocator`], the thread-safe public API, and [`RawBlock`].
//! - `state`: the hot paths (malloc, free, merge, events) behind the lock; `memory`:
//!   growing, and giving memory back under pressure, cheapest wait first; `vmm`:
//!   virtual memory (arenas, growth at the top, the wilderness, chunks going back);
//!   `inspect`: snapshots, reports and the invariant check.
//! - [`rounding`]: size rounding, pools, segment sizes, split rules (PyTorch's constants).
//! - `free_index`: segregated free lists with bitmaps, for best fit in O(1).
//! - `block`, `segment`: the block slab; segments, arenas and the chunks behind them.
//! - `events`: cross-stream frees waiting for events.
//! - `fences`: stream fences ([`CachingAllocator::record_fence`]) and what free memory
//!   of a stream waits for (nothing, a fence's event, or the stream) before it is
//!   unmapped or released for other streams.
//! - [`config`]: `GPUSCOPE_ALLOC_CONF` parsing.
//! - [`stats`], `summary`, [`snapshot`]: statistics, the summary table, segment pictures.
//! - [`oom`]: errors and the out-of-memory report.
//!
//! The semantics are PyTorch's CUDA caching allocator's, with one difference in kind:
//! with virtual memory (the default on CUDA), a segment is a reserved address range
//! with physical chunks mapped into it, and whole free segments give their chunks to
//! new segments anywhere, so memory freed in one shape is reused in another without a
//! device allocation and without waiting for `empty_cache`.

mod block;
pub mod caching;
pub mod config;
mod events;
mod fences;
mod free_index;
mod inspect;
mod memory;
pub mod oom;
pub mod rounding;
mod segment;
pub mod snapshot;
mod state;
pub mod stats;
mod summary;
mod vmm;

pub use block::BlockState;
pub use caching::{CachingAllocator, RawBlock};
pub use config::{ALLOC_CONF_VAR, AllocConfig, ConfigError};
pub use oom::{AllocError, LiveAllocation, OomCause, OutOfMemory};
pub use rounding::Pool;
pub use snapshot::{BlockInfo, SegmentInfo};
pub use stats::{DriverCalls, MemoryStats, Stat, StatArray};
