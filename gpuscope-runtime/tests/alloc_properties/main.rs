//! Property tests of the caching allocator over long random operation sequences.
//!
//! Each sequence mixes allocations (1 byte to 64 MiB, skewed toward small sizes and
//! toward the 1 MiB, 2 MiB and 10 MiB boundaries), frees of random live blocks,
//! `record_stream` on other streams, synchronisation of streams and
//! `complete_stream` (the test backend's events complete only then), fences
//! (`record_fence`), `empty_cache` and `reset_peak_stats`. It runs on the
//! plain path (`expandable_segments:False`) and on the virtual memory path, under several
//! configurations. After every operation the test checks, from the outside:
//!
//! - the snapshot is well formed: segments do not overlap, blocks tile their segments,
//!   free neighbours are merged;
//! - the live blocks are exactly the snapshot's allocated blocks, each at its address,
//!   of a size the rounding and split rules allow, in the right pool and stream;
//! - every statistic equals a recount from the snapshot, per pool, peaks are the maxima
//!   of what was observed since the last reset, and `allocated - freed == current`;
//! - the backend holds exactly the reserved bytes, and its counters agree with the
//!   allocator's;
//! - a block freed after use on another stream is not reused before that stream was
//!   synchronised, and is reused after it was (at the next allocation);
//! - no memory is unmapped or freed while work uses it: every block gets pretend work
//!   launched on it (`TestBackend::launch`) when allocated, when recorded on another
//!   stream and before it is freed, and the test backend panics if memory goes while
//!   such work is in flight (not synchronised, and not before a completed fence);
//! - `record_fence` records an event (counted in `num_fences`) only when no fence of
//!   the stream is outstanding;
//! - an out-of-memory error happens only when the device really cannot hold the
//!   request after every cached byte went back;
//! - after freeing everything and `empty_cache`, nothing is reserved and the backend
//!   holds nothing.
//!
//! A second property runs on the host backend with real memory: each live block holds
//! a pattern of its own, checked after every operation, so overlapping blocks show up
//! as corrupted bytes.
//!
//! `PROPTEST_CASES` sets the number of sequences per property (default 16).
//!
//! Where things live: `ops` (the random operations and their strategies), `harness`
//! (the allocator under test and the model of what it must do; `harness/allocate.rs`
//! the checked allocate and free, `harness/checks.rs` the checks after each
//! operation), `recount` (statistics recounted from a snapshot, and the block sizes
//! the rounding and split rules allow), `fixed_cases` (step-by-step cases and
//! regressions); the properties themselves are below.

use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use gpuscope_runtime::alloc::rounding::{
    MIN_BLOCK_SIZE, Pool, SMALL_BUFFER, SMALL_SIZE, round_size,
};
use gpuscope_runtime::alloc::{
    AllocConfig, AllocError, BlockInfo, BlockState, CachingAllocator, MemoryStats, OomCause,
    RawBlock, SegmentInfo, Stat, StatArray,
};
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::backend::test::{EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, DeviceAddr, StreamId};
use gpuscope_runtime::format_bytes;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;

/// Virtual memory granularity of the test backend.
const PAGE: usize = 2 << 20;

type R<T = ()> = Result<T, TestCaseError>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(TestCaseError::fail(format!($($fmt)+)));
        }
    };
}

mod fixed_cases;
mod harness;
mod ops;
mod recount;

use harness::Harness;
use ops::{cases, config, ops};

macro_rules! test_backend_properties {
    ($($name:ident: vmm = $vmm:expr, conf = $conf:expr, capacity = $cap:expr;)*) => {
        proptest! {
            #![proptest_config(config(cases(16)))]
            $(
                #[test]
                fn $name(ops in ops(64 << 20, 150..500)) {
                    Harness::on_test_backend($vmm, $conf, $cap).run(&ops)?;
                }
            )*
        }
    };
}

test_backend_properties! {
    plain_default: vmm = false, conf = "", capacity = None;
    plain_max_split_size: vmm = false, conf = "max_split_size_mb:32", capacity = None;
    plain_roundup_power2_divisions: vmm = false, conf = "roundup_power2_divisions:4", capacity = None;
    plain_garbage_collection_with_capacity: vmm = false, conf = "garbage_collection_threshold:0.8", capacity = Some(320 << 20);
    plain_everything_with_capacity: vmm = false, conf = "max_split_size_mb:24,roundup_power2_divisions:[256:1,>:4],garbage_collection_threshold:0.6", capacity = Some(448 << 20);
    virtual_default: vmm = true, conf = "", capacity = None;
    virtual_max_split_size: vmm = true, conf = "max_split_size_mb:32", capacity = None;
    virtual_roundup_power2_divisions: vmm = true, conf = "roundup_power2_divisions:4", capacity = None;
    virtual_small_cap: vmm = true, conf = "memory_limit_mb:96", capacity = None;
    virtual_garbage_collection_with_capacity: vmm = true, conf = "garbage_collection_threshold:0.8", capacity = Some(320 << 20);
    virtual_large_chunks_with_capacity: vmm = true, conf = "max_chunk_size_mb:100", capacity = Some(320 << 20);
    virtual_pages_from_the_start: vmm = true, conf = "page_chunk_threshold:0", capacity = Some(320 << 20);
    virtual_no_pages_with_capacity: vmm = true, conf = "page_chunk_threshold:1", capacity = Some(320 << 20);
    virtual_everything_with_capacity: vmm = true, conf = "max_split_size_mb:24,roundup_power2_divisions:[256:1,>:4],garbage_collection_threshold:0.6", capacity = Some(448 << 20);
    shared_default: vmm = true, conf = "share_across_streams:True", capacity = None;
    shared_small_cap: vmm = true, conf = "share_across_streams:True,memory_limit_mb:96", capacity = None;
    shared_pages_with_capacity: vmm = true, conf = "share_across_streams:True,page_chunk_threshold:0", capacity = Some(320 << 20);
    shared_pages_small_cap: vmm = true, conf = "share_across_streams:True,page_chunk_threshold:0,memory_limit_mb:96", capacity = None;
    shared_everything_with_capacity: vmm = true, conf = "share_across_streams:True,max_split_size_mb:24,roundup_power2_divisions:[256:1,>:4],garbage_collection_threshold:0.6", capacity = Some(448 << 20);
}

proptest! {
    #![proptest_config(config(cases(12)))]

    /// Real memory: a pattern per live block, checked after every operation.
    #[test]
    fn host_blocks_keep_their_contents(ops in ops(12 << 20, 100..300)) {
        Harness::on_host("").run(&ops)?;
    }

    #[test]
    fn host_blocks_keep_their_contents_max_split_roundup(ops in ops(12 << 20, 100..300)) {
        Harness::on_host("max_split_size_mb:21,roundup_power2_divisions:4").run(&ops)?;
    }
}
