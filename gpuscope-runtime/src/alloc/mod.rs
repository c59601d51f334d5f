//! The caching device allocator.
//!
//! Where things live:
//! - [`caching`]: [`CachingAllocator`], the thread-safe public API, and [`RawBlock`];
//!   `lock`: the lock every call takes (a compare-and-swap, a store to give it back;
//!   a waiting room where one waiter at a time watches it and the others sleep).
//! - `state`: the hot paths (malloc, free, events) behind the lock; `merge`: free
//!   blocks joining their free neighbours; `memory`:
//!   growing, and giving memory back under pressure, cheapest wait first; `vmm`:
//!   virtual memory (arenas, growth at the top, the wilderness); `growth`: how much
//!   one growth maps; `release`: chunks
//!   going back to the device; `holes`: ranges that memory given back left unmapped,
//!   mapped again in place;
//!   `inspect`: snapshots, reports and the invariant check; `peer_access`: other
//!   devices given access to the mapped memory ([`CachingAllocator::grant_peer_access`]).
//! - [`rounding`]: size rounding, pools, segment sizes, split rules (PyTorch's constants).
//! - `free_index`: segregated free lists with bitmaps, for best fit in O(1).
//! - `block`, `segment`: the block slab; segments, arenas and the chunks behind them.
//! - `events`: cross-stream frees waiting for events; `sharing`: one pool for every
//!   stream, and when memory one stream freed may serve another.
//! - `fences`: stream fences ([`CachingAllocator::record_fence`]) and what free memory
//!   of a stream waits for (nothing, a fence's event, or the stream) before it is
//!   unmapped or released for other streams.
//! - [`config`]: the settings (`GPUSCOPE_ALLOC_CONF`) and, in `config::parse`, reading them.
//! - [`stats`], `summary`, [`snapshot`]: statistics, the summary table, segment pictures;
//!   `live_stats`: the statistics as kept while running (cheap to update), and their snapshot.
//! - [`oom`]: errors and the out-of-memory report.
//!
//! The semantics are PyTorch's CUDA caching allocator's. With virtual memory (the
//! default on CUDA) the policy differs, and fits in a few lines:
//!
//! 1. Each stream's small and large pool is one address arena, reserved up front;
//!    memory is mapped from the bottom up, and the free block at the top is the
//!    *wilderness*.
//! 2. `allocate` takes the best-fitting free block of the stream's pool (smallest that
//!    fits, lowest address among equals); the wilderness only when none fits; and grows
//!    the arena at the top only when the wilderness is too small: one physical chunk of
//!    what is missing, rounded up to whole pages of PyTorch's expandable segments (20 MiB
//!    for the large pool, 2 MiB for the small one), mapped and made accessible in one
//!    call each. So far this is PyTorch's placement with expandable segments (the
//!    placement model gives PyTorch's reserved memory on every trace of
//!    `tests/data/traces`), with one device allocation per growth where PyTorch makes
//!    one per page. While a large arena only grows (nothing freed in it since its last
//!    growth, as while weights and optimizer state are built), each growth is at least
//!    5/4 of the last, up to 1/16 of the arena, which keeps the number of device
//!    allocations logarithmic in the pool's size. A growth larger than 1/160 of the
//!    device is mapped in chunks of at most that, side by side, and once the allocator
//!    holds more than a quarter of the device, in single 20 MiB pages (item 4).
//! 3. `free` merges with free neighbours and never gives memory back; a block used on
//!    other streams (`record_stream`) returns to its pool once their work is done: the
//!    next `allocate` asks each such stream once for all the frees since the last (an
//!    idle stream gives them back at once, a busy one gets one event, polled on later
//!    allocations).
//! 4. Memory goes back, as whole chunks inside free blocks (CUDA releases a physical
//!    allocation only whole: bounded chunks keep what live blocks scattered through a
//!    large growth hold back small, and pages past a quarter of the device, where memory
//!    runs out, keep it as small as PyTorch's expandable segments do), only on `empty_cache`, past a
//!    `garbage_collection_threshold`, or when the device or the cap refuses a growth; then
//!    memory that needs no wait goes first, memory behind an outstanding fence next,
//!    memory that needs a stream synchronisation last. A later growth maps the lowest
//!    hole that memory given back left below a top, when it holds the request (with the
//!    free memory on either side) for no more than growing the top would map, so that
//!    the working set stays where it was rather than climbing the arena, as PyTorch's
//!    expandable segments map pages back into their ranges. Memory of one stream
//!    reaches another this way, unmapped and mapped again.
//!
//! With `share_across_streams:True` (opt-in, `sharing`), the two arenas serve every
//! stream: a free block serves another stream once the freeing stream's work before the
//! free is known done (a completed fence, or one non-blocking query finding it idle; a
//! busy stream's frees wait for a later query, never for the stream); free neighbours of
//! two streams merge on the same rule; and a stream never grows above a free top that
//! holds another stream's memory still in use (it grows the arena whose top needs the
//! least, or a new one). Where the other streams are idle when a stream allocates (a
//! replay) this reserves less; where they are busy, memory drifts to whichever stream
//! finds it free and the pool grows (`tests/busy_replay.rs`), which is why it is off by
//! default.
//!
//! Because of (2), a workload that repeats makes in every later pass exactly the
//! choices of its first pass (with shared pools and several streams, when their work
//! is done as it was then, as in a replay): a later pass sees, at each step, the free
//! blocks the first pass saw, plus a wilderness that already holds all the first pass
//! grew. Warm passes therefore allocate, map, release and wait for nothing (checked on
//! every trace in `tests/data/traces`, and with streams that lag behind the host in
//! `tests/busy_replay.rs`), and reserved memory is what the first pass's best fit
//! needed, plus at most one growth step per arena. Nothing adapts at run time.

mod block;
pub mod caching;
pub mod config;
mod events;
mod fences;
mod free_index;
mod growth;
mod holes;
mod inspect;
mod live_stats;
mod lock;
mod memory;
mod merge;
pub mod oom;
mod peer_access;
mod release;
pub mod rounding;
mod segment;
mod sharing;
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

#[cfg(test)]
mod test_support {
    use crate::backend::test::{EventMode, TestBackend};
    use crate::backend::{Backend, StreamId};

    /// A test backend whose work completes only when the test says so, and a stream
    /// of it.
    pub fn manual() -> (TestBackend, StreamId) {
        let dev = TestBackend::builder().event_mode(EventMode::Manual).build();
        let s = dev.create_stream().unwrap();
        (dev, s)
    }
}
