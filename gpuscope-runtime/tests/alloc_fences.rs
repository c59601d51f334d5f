//! Stream fences in the caching allocator: free memory of one stream given to another
//! (chunks released and created again for it, segments released) waits for nothing
//! after a completed fence, for
//! the fence's event while it is outstanding, and for the whole stream only when no
//! fence came after the free.
//!
//! The test backend's events complete only when the test says so
//! ([`EventMode::Manual`]), and every block gets pretend work launched on it
//! ([`TestBackend::launch`]) before it is freed: the backend panics if the allocator
//! unmaps or frees memory that work still in flight uses.

use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, AllocError, CachingAllocator, MemoryStats, RawBlock};
use gpuscope_runtime::backend::test::{Counters, EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, BackendError, StreamId};

const MIB: usize = 1 << 20;

struct Setup {
    dev: Arc<TestBackend>,
    alloc: CachingAllocator,
    a: StreamId,
    b: StreamId,
}

fn setup(conf: &str, capacity: usize) -> Setup {
    let dev = Arc::new(
        TestBackend::builder()
            .capacity(capacity)
            .virtual_memory(2 * MIB)
            .event_mode(EventMode::Manual)
            .build(),
    );
    // A fence every time one is asked for (no `fence_interval_us` limit).
    let mut config: AllocConfig = conf.parse().unwrap();
    config.fence_interval_us = 0;
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    let b = dev.create_stream().unwrap();
    Setup {
        dev,
        alloc,
        a: StreamId::DEFAULT,
        b,
    }
}

impl Setup {
    /// Allocates `size` bytes on `stream` and launches work on them there.
    fn used(&self, size: usize, stream: StreamId) -> RawBlock {
        let block = self.alloc.allocate(size, stream).unwrap();
        self.dev.launch(stream, block.addr(), size).unwrap();
        block
    }

    /// Launches work on `block` on its stream, then frees it.
    fn use_and_free(&self, block: RawBlock) {
        self.dev
            .launch(block.stream(), block.addr(), block.size())
            .unwrap();
        self.alloc.free(block).unwrap();
    }

    /// The allocator's and the backend's wait counts, after `f`, minus before it.
    fn waits(&self, f: impl FnOnce()) -> (Delta, Counters) {
        let (s0, c0) = (self.alloc.stats(), self.dev.counters());
        f();
        let (s1, c1) = (self.alloc.stats(), self.dev.counters());
        self.alloc.check_invariants().unwrap();
        (
            Delta {
                stream_syncs: s1.num_stream_syncs - s0.num_stream_syncs,
                fence_waits: s1.num_fence_waits - s0.num_fence_waits,
                unmaps: s1.num_device_unmap - s0.num_device_unmap,
                device_frees: s1.num_device_free - s0.num_device_free,
            },
            Counters {
                stream_syncs: c1.stream_syncs - c0.stream_syncs,
                unmaps: c1.unmaps - c0.unmaps,
                device_frees: c1.device_frees - c0.device_frees,
                ..Counters::default()
            },
        )
    }
}

#[derive(Debug, PartialEq, Eq, Default)]
struct Delta {
    stream_syncs: u64,
    fence_waits: u64,
    unmaps: u64,
    device_frees: u64,
}

fn counted(s: &MemoryStats) -> (u64, u64, u64) {
    (s.num_fences, s.num_fence_waits, s.num_stream_syncs)
}

/// (1) Memory freed on `a` before a completed fence goes to `b` with no wait at all.
#[test]
fn reclaim_after_a_completed_fence_does_not_wait() {
    // The cap leaves no room to grow: `a`'s free chunk goes back, `b` gets a new one
    // (with pools of their own: sharing, `b` would take `a`'s block, as
    // `alloc_sharing.rs` tests).
    let t = setup("memory_limit_mb:8,share_across_streams:False", 80 << 30);
    let x = t.used(8 * MIB, t.a);
    t.use_and_free(x);
    assert!(t.alloc.record_fence(t.a).unwrap());
    t.dev.complete_stream(t.a);
    let mut y = None;
    let (delta, backend) = t.waits(|| y = Some(t.alloc.allocate(8 * MIB, t.b).unwrap()));
    assert_eq!(
        delta,
        Delta {
            unmaps: 1,
            device_frees: 1,
            ..Delta::default()
        },
        "a chunk released with neither a stream sync nor a fence wait"
    );
    assert_eq!((backend.stream_syncs, backend.unmaps), (0, 1));
    assert_eq!(counted(&t.alloc.stats()), (1, 0, 0));
    t.use_and_free(y.unwrap());
}

/// (2) With the fence outstanding, reclaiming waits for the fence's event only: work
/// queued on `a` after the fence is still in flight afterwards.
#[test]
fn reclaim_with_the_fence_outstanding_waits_for_the_fence_only() {
    let t = setup("memory_limit_mb:10", 80 << 30);
    let z = t.used(2 * MIB, t.a);
    let x = t.used(8 * MIB, t.a);
    t.use_and_free(x);
    assert!(t.alloc.record_fence(t.a).unwrap());
    // Work after the fence, and an event after that work.
    t.dev.launch(t.a, z.addr(), z.size()).unwrap();
    let later = t.dev.create_event().unwrap();
    t.dev.record_event(later, t.a).unwrap();

    let mut y = None;
    let (delta, backend) = t.waits(|| y = Some(t.alloc.allocate(8 * MIB, t.b).unwrap()));
    assert_eq!(
        delta,
        Delta {
            fence_waits: 1,
            unmaps: 1,
            device_frees: 1,
            ..Delta::default()
        }
    );
    assert_eq!(backend.stream_syncs, 0, "stream {} was synchronised", t.a);
    assert!(
        !t.dev.query_event(later).unwrap(),
        "the work queued after the fence completed: the allocator waited for more than the fence"
    );
    assert_eq!(counted(&t.alloc.stats()), (1, 1, 0));
    // The fence is known complete now: a second reclaim of memory it covers is free.
    t.dev.complete_stream(t.a);
    t.use_and_free(z);
    t.use_and_free(y.unwrap());
}

/// (3) Memory freed after the last fence forces a stream sync, whether that fence
/// completed or is outstanding.
#[test]
fn memory_freed_after_the_last_fence_syncs_the_stream() {
    for complete_fence in [true, false] {
        let t = setup("memory_limit_mb:8", 80 << 30);
        let x = t.used(8 * MIB, t.a);
        t.use_and_free(x);
        assert!(t.alloc.record_fence(t.a).unwrap());
        if complete_fence {
            t.dev.complete_stream(t.a);
        }
        // The same memory, reused on `a` (no wait needed there) and freed again.
        let x = t.used(8 * MIB, t.a);
        t.use_and_free(x);
        let mut y = None;
        let (delta, backend) = t.waits(|| y = Some(t.alloc.allocate(8 * MIB, t.b).unwrap()));
        assert_eq!(
            delta,
            Delta {
                stream_syncs: 1,
                unmaps: 1,
                device_frees: 1,
                ..Delta::default()
            },
            "complete_fence: {complete_fence}"
        );
        assert_eq!(backend.stream_syncs, 1);
        // The sync covered the fence and the free: nothing left to fence.
        assert!(!t.alloc.record_fence(t.a).unwrap());
        assert_eq!(counted(&t.alloc.stats()), (1, 0, 1));
        t.use_and_free(y.unwrap());
    }
}

/// (4) `record_fence` records only what is useful: `false` with nothing freed since the
/// last fence, and `false` while the previous fence is outstanding.
#[test]
fn record_fence_returns_false_when_no_fence_is_needed() {
    let t = setup("", 80 << 30);
    assert!(
        !t.alloc.record_fence(t.a).unwrap(),
        "nothing was ever freed"
    );
    let x = t.used(MIB, t.a);
    assert!(!t.alloc.record_fence(t.a).unwrap(), "allocated, not freed");
    t.use_and_free(x);
    assert!(t.alloc.record_fence(t.a).unwrap());
    assert!(
        !t.alloc.record_fence(t.a).unwrap(),
        "nothing freed since the last fence"
    );
    let x = t.used(MIB, t.a);
    t.use_and_free(x);
    assert!(
        !t.alloc.record_fence(t.a).unwrap(),
        "the previous fence is outstanding"
    );
    assert!(
        !t.alloc.record_fence(t.b).unwrap(),
        "frees on {} do not concern {}",
        t.a,
        t.b
    );
    t.dev.complete_stream(t.a);
    assert!(
        t.alloc.record_fence(t.a).unwrap(),
        "the previous fence completed and a free came after it"
    );
    t.dev.complete_stream(t.a);
    assert!(!t.alloc.record_fence(t.a).unwrap());
    assert_eq!(t.alloc.stats().num_fences, 2);
    assert_eq!(t.dev.counters().event_records, 2);
    assert!(t.alloc.memory_summary().contains("fences: 2"));

    let err = t.alloc.record_fence(StreamId(42)).unwrap_err();
    assert!(
        matches!(
            err,
            AllocError::Backend(BackendError::InvalidHandle { what: "stream", .. })
        ),
        "{err}"
    );
}

/// (5) Plain segments released by `empty_cache` after a completed fence skip the
/// sync; with the fence outstanding they wait for it; with no fence, for the stream.
#[test]
fn plain_segments_released_by_empty_cache_go_by_the_fence() {
    for (fence, complete, expect) in [
        (
            true,
            true,
            Delta {
                device_frees: 1,
                ..Delta::default()
            },
        ),
        (
            true,
            false,
            Delta {
                fence_waits: 1,
                device_frees: 1,
                ..Delta::default()
            },
        ),
        (
            false,
            false,
            Delta {
                stream_syncs: 1,
                device_frees: 1,
                ..Delta::default()
            },
        ),
    ] {
        let t = setup("expandable_segments:False", 80 << 30);
        assert!(!t.alloc.uses_virtual_memory());
        let x = t.used(8 * MIB, t.a);
        t.use_and_free(x);
        if fence {
            assert!(t.alloc.record_fence(t.a).unwrap());
        }
        if complete {
            t.dev.complete_stream(t.a);
        }
        let (delta, backend) = t.waits(|| t.alloc.empty_cache().unwrap());
        assert_eq!(delta, expect, "fence: {fence}, completed: {complete}");
        assert_eq!(
            (backend.stream_syncs, backend.device_frees),
            (expect.stream_syncs, 1)
        );
        assert_eq!(t.dev.used(), 0);
    }
}

/// (5) Garbage collection releases the least recently used free segment (plain) or
/// chunk (virtual memory) of another stream without a sync after a completed fence.
#[test]
fn garbage_collection_after_a_completed_fence_does_not_wait() {
    for vmm in [false, true] {
        // Pools of their own (sharing, `b` would take `a`'s free memory: `alloc_sharing.rs`).
        let conf = if vmm {
            "garbage_collection_threshold:0.5,share_across_streams:False"
        } else {
            "expandable_segments:False,garbage_collection_threshold:0.5"
        };
        // Threshold: 32 MiB of 64.
        let t = setup(conf, 64 * MIB);
        let x = t.used(20 * MIB, t.a);
        t.use_and_free(x);
        assert!(t.alloc.record_fence(t.a).unwrap());
        t.dev.complete_stream(t.a);
        let mut y = None;
        let (delta, backend) = t.waits(|| y = Some(t.alloc.allocate(20 * MIB, t.b).unwrap()));
        assert_eq!(
            (delta.stream_syncs, delta.fence_waits, backend.stream_syncs),
            (0, 0, 0),
            "vmm: {vmm}"
        );
        if vmm {
            assert_eq!(delta.unmaps, 1, "the 20 MiB chunk was unmapped");
        }
        assert_eq!(delta.device_frees, 1, "the segment or chunk went");
        assert!(t.alloc.stats().reserved_bytes.all.current as usize <= 32 * MIB);
        t.use_and_free(y.unwrap());
    }
}

/// A block other streams used (`record_stream`) is free only once their events
/// complete; a fence recorded before that does not cover it.
#[test]
fn a_fence_does_not_cover_a_block_still_pending() {
    let t = setup("memory_limit_mb:8", 80 << 30);
    let x = t.used(8 * MIB, t.a);
    t.alloc.record_stream(&x, t.b).unwrap();
    t.dev.launch(t.b, x.addr(), x.size()).unwrap();
    t.use_and_free(x);
    assert!(
        !t.alloc.record_fence(t.a).unwrap(),
        "the block is pending, not free: nothing to fence"
    );
    t.dev.complete_stream(t.b);
    // The next allocation sees `b`'s event complete and frees the block now, after any
    // fence: giving its chunk back needs `a` synchronised (its work may still run).
    let mut y = None;
    let (delta, _) = t.waits(|| y = Some(t.alloc.allocate(8 * MIB, t.b).unwrap()));
    assert_eq!(
        (delta.stream_syncs, delta.fence_waits, delta.unmaps),
        (1, 0, 1)
    );
    t.use_and_free(y.unwrap());
}

/// The backend check this file relies on: taking memory that work still uses panics.
#[test]
#[should_panic(expected = "still uses")]
fn the_backend_catches_memory_taken_from_running_work() {
    let t = setup("expandable_segments:False", 80 << 30);
    let x = t.used(8 * MIB, t.a);
    let addr = x.addr();
    t.alloc.free(x).unwrap();
    // As if the allocator had released the segment without waiting.
    let seg = t.alloc.snapshot()[0].clone();
    assert_eq!(seg.blocks[0].addr, addr);
    unsafe { t.dev.free(seg.base, seg.size).unwrap() };
}

/// A free block split by an allocation keeps its free tick in the rest: the chunk in
/// the rest still needs the wait the whole block needed.
#[test]
fn the_rest_of_a_split_block_keeps_its_free_tick() {
    let t = setup("memory_limit_mb:8", 80 << 30);
    // Two chunks, 2 and 6 MiB (the cap leaves no room for larger growths).
    let x1 = t.used(2 * MIB, t.a);
    let x2 = t.used(6 * MIB, t.a);
    assert_eq!(t.alloc.snapshot()[0].chunks, vec![2 * MIB, 6 * MIB]);
    t.use_and_free(x1);
    t.use_and_free(x2);
    // Takes the first 2 MiB of the free 8; the 6 MiB chunk after still holds `x2`'s
    // memory.
    let head = t.used(2 * MIB, t.a);
    let mut y = None;
    let (delta, _) = t.waits(|| y = Some(t.alloc.allocate(6 * MIB, t.b).unwrap()));
    assert_eq!(
        (delta.stream_syncs, delta.fence_waits, delta.unmaps),
        (1, 0, 1)
    );
    t.use_and_free(head);
    t.use_and_free(y.unwrap());
}
