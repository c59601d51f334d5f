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

// ------------------------------------------------------------------ operations

#[derive(Clone, Debug)]
enum Op {
    /// Allocate `size` bytes on stream number `stream` (0..3).
    Alloc {
        size: usize,
        stream: u8,
    },
    /// Free a random live block.
    Free(Index),
    /// Free a random live block and allocate its size again on its stream: a cache hit.
    FreeRealloc(Index),
    /// `record_stream` of a random live block on stream number `.1`.
    RecordStream(Index, u8),
    /// Synchronise stream number `.0` through the backend.
    Sync(u8),
    /// Mark stream number `.0`'s work complete (test backend; no sync counted).
    CompleteStream(u8),
    /// `record_fence` on stream number `.0`.
    RecordFence(u8),
    EmptyCache,
    ResetPeak,
    /// `set_memory_limit`.
    SetLimit(Option<usize>),
}

/// Sizes from 1 byte to 64 MiB, skewed toward small ones and the pool and segment
/// boundaries.
fn size_strategy(max: usize) -> BoxedStrategy<usize> {
    let mib = 1usize << 20;
    let sizes = prop_oneof![
        25 => 1usize..=4096,
        15 => 4097usize..=mib,
        12 => (mib - 2048)..=(mib + 2048),
        5 => (2 * mib - 1024)..=(2 * mib + 1024),
        10 => (mib + 1)..=(10 * mib),
        10 => (10 * mib - 8192)..=(10 * mib + 8192),
        6 => (10 * mib)..=(64 * mib),
        3 => prop::sample::select(vec![
            512,
            mib,
            2 * mib,
            10 * mib,
            20 * mib,
            32 * mib,
            64 * mib
        ]),
    ];
    sizes.prop_map(move |s| s.min(max)).boxed()
}

fn op_strategy(max_size: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        45 => (size_strategy(max_size), 0u8..3).prop_map(|(size, stream)| Op::Alloc { size, stream }),
        30 => any::<Index>().prop_map(Op::Free),
        5 => any::<Index>().prop_map(Op::FreeRealloc),
        8 => (any::<Index>(), 0u8..3).prop_map(|(i, s)| Op::RecordStream(i, s)),
        6 => (0u8..3).prop_map(Op::Sync),
        4 => (0u8..3).prop_map(Op::CompleteStream),
        6 => (0u8..3).prop_map(Op::RecordFence),
        2 => Just(Op::EmptyCache),
        2 => Just(Op::ResetPeak),
        1 => prop_oneof![Just(None), ((64usize << 20)..=(1 << 30)).prop_map(Some)].prop_map(Op::SetLimit),
    ]
}

fn ops(max_size: usize, len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op_strategy(max_size), len)
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // Failures print the minimal sequence; no regression files in the source tree.
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

// ------------------------------------------------------------------ the model

struct Live {
    block: RawBlock,
    /// Other streams the block was recorded on.
    uses: Vec<StreamId>,
    /// The pattern written into it (host backend).
    pattern: Option<Vec<u8>>,
}

/// A block freed after use on other streams.
struct PendingRec {
    addr: u64,
    size: usize,
    /// Streams the test has not synchronised since the free.
    unsynced: Vec<StreamId>,
    /// Whether the allocator synchronised some stream itself since the free (then the
    /// block may have been released; which stream it synchronised is not visible).
    allocator_synced: bool,
}

/// Where the allocator runs.
enum Device {
    Test(Arc<TestBackend>),
    Host(Arc<HostBackend>),
}

struct Harness {
    /// Not dropped after a panic (see `run`): its state may be broken, and its drop
    /// would panic again.
    alloc: ManuallyDrop<CachingAllocator>,
    /// A step panicked.
    panicked: bool,
    device: Device,
    backend: Arc<dyn Backend>,
    config: AllocConfig,
    vmm: bool,
    capacity: Option<usize>,
    /// The cap set with `set_memory_limit`.
    limit: Option<usize>,
    streams: [StreamId; 3],
    live: Vec<Live>,
    pending: Vec<PendingRec>,
    next_id: u64,
    /// Streams the test synchronised.
    my_syncs: u64,
    /// Allocator synchronisations seen so far (per stream plus all streams plus fence
    /// waits).
    allocator_syncs: u64,
    /// Streams with a fence the test recorded and knows to be outstanding (not
    /// synchronised or completed since, and no allocator wait since).
    fence_open: [bool; 3],
    /// Highest current values seen since the last peak reset, by flat stat name.
    seen_max: BTreeMap<String, i64>,
    ooms: u64,
    step: usize,
}

type R<T = ()> = Result<T, TestCaseError>;

/// Waits the allocator made that may have completed events: stream syncs, waits for
/// all events, fence waits.
fn allocator_waits(s: &MemoryStats) -> u64 {
    s.num_stream_syncs + s.num_sync_all_streams + s.num_fence_waits
}

impl Drop for Harness {
    fn drop(&mut self) {
        if !self.panicked {
            // SAFETY: dropped once, here; the field is not used after.
            unsafe { ManuallyDrop::drop(&mut self.alloc) };
        }
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(TestCaseError::fail(format!($($fmt)+)));
        }
    };
}

fn stat_arrays(s: &MemoryStats) -> [(&'static str, &StatArray); 9] {
    [
        ("allocation", &s.allocation),
        ("segment", &s.segment),
        ("active", &s.active),
        ("inactive_split", &s.inactive_split),
        ("allocated_bytes", &s.allocated_bytes),
        ("reserved_bytes", &s.reserved_bytes),
        ("active_bytes", &s.active_bytes),
        ("inactive_split_bytes", &s.inactive_split_bytes),
        ("requested_bytes", &s.requested_bytes),
    ]
}

fn all_stats(s: &MemoryStats) -> Vec<(String, Stat)> {
    let mut out = Vec::new();
    for (name, a) in stat_arrays(s) {
        for (pool, st) in [
            ("all", a.all),
            ("small_pool", a.small_pool),
            ("large_pool", a.large_pool),
        ] {
            out.push((format!("{name}.{pool}"), st));
        }
    }
    out.push(("oversize_allocations".into(), s.oversize_allocations));
    out.push(("oversize_segments".into(), s.oversize_segments));
    out
}

/// Stats whose peak is exactly the highest value observed between operations: within
/// one operation they move in one direction only (or down then up).
fn exact_peak(name: &str) -> bool {
    [
        "allocation.",
        "allocated_bytes.",
        "requested_bytes.",
        "active.",
        "active_bytes.",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// A recount of the statistics from a snapshot: `[small, large]` per statistic.
#[derive(Default, Debug)]
struct Recount {
    allocation: [i64; 2],
    allocated_bytes: [i64; 2],
    requested_bytes: [i64; 2],
    active: [i64; 2],
    active_bytes: [i64; 2],
    inactive_split: [i64; 2],
    inactive_split_bytes: [i64; 2],
    segment: [i64; 2],
    reserved_bytes: [i64; 2],
    oversize_allocations: i64,
    oversize_segments: i64,
}

fn recount(snap: &[SegmentInfo], max_split: usize) -> Recount {
    let mut r = Recount::default();
    for seg in snap {
        let p = seg.pool.index();
        r.segment[p] += 1;
        r.reserved_bytes[p] += seg.size as i64;
        if seg.size >= max_split {
            r.oversize_segments += 1;
        }
        for b in &seg.blocks {
            let size = b.size as i64;
            match b.state {
                BlockState::Allocated => {
                    r.allocation[p] += 1;
                    r.allocated_bytes[p] += size;
                    r.requested_bytes[p] += b.requested as i64;
                    r.active[p] += 1;
                    r.active_bytes[p] += size;
                    if b.size >= max_split {
                        r.oversize_allocations += 1;
                    }
                }
                BlockState::PendingFree => {
                    r.active[p] += 1;
                    r.active_bytes[p] += size;
                }
                BlockState::Free if seg.blocks.len() > 1 => {
                    r.inactive_split[p] += 1;
                    r.inactive_split_bytes[p] += size;
                }
                _ => {}
            }
        }
    }
    r
}

/// Checks that every statistic equals the recount of `snap` (with `held` bytes of
/// orphan chunks held outside both pools).
fn check_recount(
    stats: &MemoryStats,
    snap: &[SegmentInfo],
    held: usize,
    max_split: usize,
) -> Result<(), String> {
    let r = recount(snap, max_split);
    let rows: [(&str, &StatArray, [i64; 2], i64); 9] = [
        ("allocation", &stats.allocation, r.allocation, 0),
        (
            "allocated_bytes",
            &stats.allocated_bytes,
            r.allocated_bytes,
            0,
        ),
        (
            "requested_bytes",
            &stats.requested_bytes,
            r.requested_bytes,
            0,
        ),
        ("active", &stats.active, r.active, 0),
        ("active_bytes", &stats.active_bytes, r.active_bytes, 0),
        ("inactive_split", &stats.inactive_split, r.inactive_split, 0),
        (
            "inactive_split_bytes",
            &stats.inactive_split_bytes,
            r.inactive_split_bytes,
            0,
        ),
        ("segment", &stats.segment, r.segment, 0),
        (
            "reserved_bytes",
            &stats.reserved_bytes,
            r.reserved_bytes,
            held as i64,
        ),
    ];
    for (name, a, [small, large], unpooled) in rows {
        let got = (a.small_pool.current, a.large_pool.current, a.all.current);
        let want = (small, large, small + large + unpooled);
        if got != want {
            return Err(format!(
                "{name} (small, large, all): statistics say {got:?}, recount {want:?}"
            ));
        }
    }
    if stats.oversize_allocations.current != r.oversize_allocations {
        return Err(format!(
            "oversize_allocations: statistics say {}, recount {}",
            stats.oversize_allocations.current, r.oversize_allocations
        ));
    }
    if stats.oversize_segments.current != r.oversize_segments {
        return Err(format!(
            "oversize_segments: statistics say {}, recount {}",
            stats.oversize_segments.current, r.oversize_segments
        ));
    }
    Ok(())
}

/// A fixed bug (see `regression_virtual_memory_small_request_takes_merged_oversize_block`):
/// with virtual memory, growing next to a free block merges the new memory into it and the
/// request takes the whole merged block unsplit when it reaches `max_split_size`. While
/// it stands, the split rules are not checked for oversize blocks on that path.
const TOLERATE_MERGED_OVERSIZE_BLOCKS: bool = false;

/// The block sizes the rounding and split rules allow for a request rounded to `rounded`.
fn block_size_allowed(size: usize, rounded: usize, config: &AllocConfig, vmm: bool) -> bool {
    if size < rounded || size % MIN_BLOCK_SIZE != 0 {
        return false;
    }
    let excess = size - rounded;
    let max_split = config.max_split_size;
    if vmm && size >= max_split && TOLERATE_MERGED_OVERSIZE_BLOCKS {
        return true;
    }
    match Pool::for_size(rounded) {
        // Small blocks split whenever a minimum block remains.
        Pool::Small => excess == 0,
        // Below max_split_size a large block is split unless the rest is at most 1 MiB
        // (plain segments) or below one minimum block (virtual memory).
        Pool::Large if size < max_split => {
            if vmm {
                excess == 0
            } else {
                excess <= SMALL_SIZE
            }
        }
        // A request of at least max_split_size takes an unsplit block at most
        // max_non_split_rounding larger.
        Pool::Large if rounded >= max_split => excess < config.max_non_split_rounding,
        // A request below max_split_size never takes a cached oversize block; only a
        // new segment rounded up to 2 MiB can reach max_split_size.
        Pool::Large => excess < 2 << 20,
    }
}

fn locate(snap: &[SegmentInfo]) -> BTreeMap<u64, (&BlockInfo, &SegmentInfo)> {
    snap.iter()
        .flat_map(|s| s.blocks.iter().map(move |b| (b.addr.0, (b, s))))
        .collect()
}

/// The block containing `addr`, if any.
fn containing<'a>(
    map: &BTreeMap<u64, (&'a BlockInfo, &'a SegmentInfo)>,
    addr: u64,
) -> Option<(&'a BlockInfo, &'a SegmentInfo)> {
    let (&start, &(b, s)) = map.range(..=addr).next_back()?;
    (addr < start + b.size as u64).then_some((b, s))
}

/// Whether free block `b` of segment `seg` contains a whole physical chunk (virtual
/// memory): memory that could go back to the device.
fn has_whole_chunk(b: &BlockInfo, seg: &SegmentInfo) -> bool {
    let mut at = seg.base.0;
    seg.chunks.iter().any(|&size| {
        let start = at;
        at += size as u64;
        start >= b.addr.0 && at <= b.addr.0 + b.size as u64
    })
}

impl Harness {
    fn on_test_backend(vmm: bool, extra: &str, capacity: Option<usize>) -> Harness {
        let mut conf = if vmm {
            String::new()
        } else {
            "expandable_segments:False".to_string()
        };
        if !extra.is_empty() {
            if !conf.is_empty() {
                conf.push(',');
            }
            conf.push_str(extra);
        }
        let config: AllocConfig = conf.parse().unwrap_or_else(|e| panic!("{conf}: {e}"));
        // The backend has virtual memory either way: the plain path must not use it.
        let dev = Arc::new(
            TestBackend::builder()
                .capacity(capacity.unwrap_or(80 << 30))
                .virtual_memory(PAGE)
                .event_mode(EventMode::Manual)
                .build(),
        );
        Self::new(Device::Test(dev.clone()), dev, config, vmm, capacity)
    }

    fn on_host(extra: &str) -> Harness {
        let config: AllocConfig = extra.parse().unwrap();
        let dev = Arc::new(HostBackend::new());
        Self::new(Device::Host(dev.clone()), dev, config, false, None)
    }

    fn new(
        device: Device,
        backend: Arc<dyn Backend>,
        config: AllocConfig,
        vmm: bool,
        capacity: Option<usize>,
    ) -> Harness {
        // The model expects a fence at every `record_fence` it asks for.
        let mut config = config;
        config.fence_interval_us = 0;
        let alloc =
            ManuallyDrop::new(CachingAllocator::new(backend.clone(), config.clone()).unwrap());
        assert_eq!(alloc.uses_virtual_memory(), vmm, "config {config:?}");
        let streams = [
            StreamId::DEFAULT,
            backend.create_stream().unwrap(),
            backend.create_stream().unwrap(),
        ];
        let limit = config.memory_limit;
        let mut h = Harness {
            alloc,
            panicked: false,
            device,
            backend,
            config,
            vmm,
            capacity,
            limit,
            streams,
            live: Vec::new(),
            pending: Vec::new(),
            next_id: 0,
            my_syncs: 0,
            allocator_syncs: 0,
            fence_open: [false; 3],
            seen_max: BTreeMap::new(),
            ooms: 0,
            step: 0,
        };
        h.reset_seen();
        h
    }

    fn test_dev(&self) -> Option<&TestBackend> {
        match &self.device {
            Device::Test(d) => Some(d),
            Device::Host(_) => None,
        }
    }

    fn manual_events(&self) -> bool {
        matches!(self.device, Device::Test(_))
    }

    fn reset_seen(&mut self) {
        self.seen_max = all_stats(&self.alloc.stats())
            .into_iter()
            .map(|(k, s)| (k, s.current))
            .collect();
    }

    // ------------------------------------------------------------------ ops

    /// Runs `ops`, checking after each. A panic (the test backend's checks panic) fails
    /// the case like any other breach, so that proptest shrinks it.
    fn run(&mut self, ops: &[Op]) -> R {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.run_checked(ops))) {
            Ok(r) => r,
            Err(payload) => {
                self.panicked = true;
                let msg = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(TestCaseError::fail(format!(
                    "step {} panicked: {msg}",
                    self.step
                )))
            }
        }
    }

    fn run_checked(&mut self, ops: &[Op]) -> R {
        self.check()?;
        for op in ops {
            self.step += 1;
            self.apply(op)?;
            self.check().map_err(|e| {
                TestCaseError::fail(format!("after step {} ({op:?}): {e}", self.step))
            })?;
        }
        self.drain()
    }

    fn apply(&mut self, op: &Op) -> R {
        match *op {
            Op::Alloc { size, stream } => self.allocate(size, self.streams[stream as usize]),
            Op::Free(i) => {
                if self.live.is_empty() {
                    return Ok(());
                }
                let l = self.live.swap_remove(i.index(self.live.len()));
                self.free(l)
            }
            Op::FreeRealloc(i) => {
                if self.live.is_empty() {
                    return Ok(());
                }
                let l = self.live.swap_remove(i.index(self.live.len()));
                let (size, stream, waits) = (l.block.size(), l.block.stream(), !l.uses.is_empty());
                let snap = self.alloc.snapshot();
                let block_size = locate(&snap)
                    .get(&l.block.addr().0)
                    .map_or(0, |(b, _)| b.size);
                let max_split = self.config.max_split_size;
                // As in PyTorch, a request just below max_split_size whose new segment
                // (rounded up to 2 MiB) reaches it gets an oversize block that no request
                // below max_split_size may take from the cache, not even its own size.
                let oversize_for_itself =
                    block_size >= max_split && round_size(size, &self.config) < max_split;
                self.free(l)?;
                let before = self.alloc.stats();
                self.allocate(size, stream)?;
                let after = self.alloc.stats();
                // The block just freed fits; only a block at or above max_split_size that
                // a smaller request may not take can force growth (virtual memory merges
                // free neighbours into one), or a block still waiting for another stream.
                if !waits && !oversize_for_itself && (!self.vmm || max_split == usize::MAX) {
                    ensure!(
                        after.num_device_alloc == before.num_device_alloc
                            && after.num_device_map == before.num_device_map
                            && after.reserved_bytes.all.current
                                == before.reserved_bytes.all.current,
                        "allocating {size} bytes right after freeing a block of that size on {stream} grew the cache: device allocs {} -> {}, maps {} -> {}, reserved {} -> {}",
                        before.num_device_alloc,
                        after.num_device_alloc,
                        before.num_device_map,
                        after.num_device_map,
                        before.reserved_bytes.all.current,
                        after.reserved_bytes.all.current
                    );
                }
                Ok(())
            }
            Op::RecordStream(i, s) => {
                if self.live.is_empty() {
                    return Ok(());
                }
                self.record(i.index(self.live.len()), s)
            }
            Op::Sync(s) => {
                self.sync(s);
                Ok(())
            }
            Op::CompleteStream(s) => {
                let stream = self.streams[s as usize];
                if let Some(dev) = self.test_dev() {
                    dev.complete_stream(stream);
                    self.work_done(s);
                }
                Ok(())
            }
            Op::RecordFence(s) => self.record_fence(s),
            Op::EmptyCache => {
                self.alloc
                    .empty_cache()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                // Every event was waited for: nothing may still be pending.
                self.pending.clear();
                self.check_cache_released("empty_cache")
            }
            Op::SetLimit(limit) => {
                self.alloc.set_memory_limit(limit);
                self.limit = limit;
                ensure!(
                    self.alloc.memory_limit() == limit,
                    "memory_limit() = {:?} after setting {limit:?}",
                    self.alloc.memory_limit()
                );
                Ok(())
            }
            Op::ResetPeak => {
                self.alloc.reset_peak_stats();
                for (name, s) in all_stats(&self.alloc.stats()) {
                    ensure!(
                        s.peak == s.current,
                        "after reset_peak_stats, {name}: peak {} != current {}",
                        s.peak,
                        s.current
                    );
                }
                self.reset_seen();
                Ok(())
            }
        }
    }

    /// Pretends work on `block`'s memory is queued on `stream` (test backend).
    fn launch(&self, block: &RawBlock, stream: StreamId) -> R {
        if let Some(dev) = self.test_dev() {
            dev.launch(stream, block.addr(), block.size())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        Ok(())
    }

    fn record_fence(&mut self, stream_no: u8) -> R {
        let stream = self.streams[stream_no as usize];
        let before = self.alloc.stats();
        let records = self.test_dev().map(|d| d.counters().event_records);
        let recorded = self
            .alloc
            .record_fence(stream)
            .map_err(|e| TestCaseError::fail(format!("record_fence({stream}): {e}")))?;
        let after = self.alloc.stats();
        ensure!(
            after.num_fences == before.num_fences + recorded as u64,
            "record_fence({stream}) returned {recorded}, num_fences {} -> {}",
            before.num_fences,
            after.num_fences
        );
        if let (Some(r0), Some(dev)) = (records, self.test_dev()) {
            let r1 = dev.counters().event_records;
            ensure!(
                r1 == r0 + recorded as u64,
                "record_fence({stream}) returned {recorded}, the backend recorded {} events",
                r1 - r0
            );
        }
        if self.manual_events() {
            let open = &mut self.fence_open[stream_no as usize];
            ensure!(
                !(recorded && *open),
                "record_fence({stream}) recorded a fence while the previous one is outstanding"
            );
            *open |= recorded;
        }
        Ok(())
    }

    /// The test synchronised or completed stream number `stream_no`.
    fn work_done(&mut self, stream_no: u8) {
        let stream = self.streams[stream_no as usize];
        self.fence_open[stream_no as usize] = false;
        for p in &mut self.pending {
            p.unsynced.retain(|&x| x != stream);
        }
    }

    fn record(&mut self, live_index: usize, stream_no: u8) -> R {
        let stream = self.streams[stream_no as usize];
        self.launch(&self.live[live_index].block, stream)?;
        let l = &mut self.live[live_index];
        self.alloc
            .record_stream(&l.block, stream)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        if stream != l.block.stream() && !l.uses.contains(&stream) {
            l.uses.push(stream);
        }
        Ok(())
    }

    fn sync(&mut self, stream_no: u8) {
        let stream = self.streams[stream_no as usize];
        self.backend.synchronize_stream(stream).unwrap();
        self.my_syncs += 1;
        self.work_done(stream_no);
    }

    fn allocate(&mut self, size: usize, stream: StreamId) -> R {
        let before = self.alloc.stats();
        let used_before = self.test_dev().map(|d| d.used());
        // Blocks whose streams were all synchronised must be reused from this call on.
        let due: Vec<u64> = self
            .pending
            .iter()
            .filter(|p| p.unsynced.is_empty())
            .map(|p| p.addr)
            .collect();
        let result = self.alloc.allocate(size, stream);
        let after = self.alloc.stats();
        if allocator_waits(&after) != allocator_waits(&before) {
            // The allocator waited for streams or fences itself (garbage collection,
            // releasing chunks, the out-of-memory path): pending blocks may be free now.
            for p in &mut self.pending {
                p.allocator_synced = true;
            }
        }
        let snap = self.alloc.snapshot();
        let map = locate(&snap);
        for addr in due {
            if let Some((b, _)) = map.get(&addr) {
                ensure!(
                    b.state != BlockState::PendingFree,
                    "the block at {addr:#x} was freed after use on streams since synchronised, but after an allocation it is still pending"
                );
            }
            self.pending.retain(|p| p.addr != addr);
        }
        let rounded = round_size(size, &self.config);
        match result {
            Ok(block) => {
                ensure!(
                    after.num_ooms == before.num_ooms,
                    "a successful allocation counted an OOM"
                );
                if let Some(limit) = self.limit {
                    let (r0, r1) = (
                        before.reserved_bytes.all.current as usize,
                        after.reserved_bytes.all.current as usize,
                    );
                    ensure!(
                        r1 <= limit || r1 <= r0,
                        "reserved grew from {r0} to {r1}, past the cap {limit}"
                    );
                }
                ensure!(
                    after.num_alloc_retries <= before.num_alloc_retries + 1,
                    "more than one retry counted for one allocation"
                );
                ensure!(
                    block.size() == size && block.stream() == stream,
                    "handle {block:?} for {size} bytes on {stream}"
                );
                let (b, _) = map.get(&block.addr().0).ok_or_else(|| {
                    TestCaseError::fail(format!(
                        "new block at {} is not in the snapshot",
                        block.addr()
                    ))
                })?;
                ensure!(
                    b.state == BlockState::Allocated,
                    "new block at {} is {:?}",
                    block.addr(),
                    b.state
                );
                // A block freed after use on an unsynchronised stream is never handed out.
                for p in &self.pending {
                    let overlaps = p.addr < block.addr().0 + b.size as u64
                        && block.addr().0 < p.addr + p.size as u64;
                    ensure!(
                        !(overlaps && !p.unsynced.is_empty() && !p.allocator_synced),
                        "new block at {} (+{}) reuses the block at {:#x} freed after use on {:?}, not synchronised",
                        block.addr(),
                        b.size,
                        p.addr,
                        p.unsynced
                    );
                }
                let pattern = match &self.device {
                    Device::Host(host) => {
                        let pat = pattern(self.next_id, size);
                        // SAFETY: the block holds at least `size` bytes of host memory and
                        // belongs to this test alone.
                        unsafe { host.copy_host_to_device(block.addr(), &pat, stream) }.unwrap();
                        Some(pat)
                    }
                    Device::Test(_) => None,
                };
                self.next_id += 1;
                self.launch(&block, stream)?;
                self.live.push(Live {
                    block,
                    uses: Vec::new(),
                    pattern,
                });
                Ok(())
            }
            Err(AllocError::OutOfMemory(report)) => {
                self.ooms += 1;
                ensure!(
                    after.num_ooms == before.num_ooms + 1,
                    "an OOM was not counted: {} -> {}",
                    before.num_ooms,
                    after.num_ooms
                );
                ensure!(
                    after.num_alloc_retries == before.num_alloc_retries + 1,
                    "an OOM is reported only after releasing the cache and retrying; retries {} -> {}",
                    before.num_alloc_retries,
                    after.num_alloc_retries
                );
                ensure!(
                    report.requested == size && report.rounded == rounded,
                    "report for {size}/{rounded}: {report:?}"
                );
                ensure!(
                    report.allocated == after.allocated_bytes.all.current as usize
                        && report.reserved == after.reserved_bytes.all.current as usize,
                    "report's allocated/reserved {}/{} differ from the statistics",
                    report.allocated,
                    report.reserved
                );
                let text = report.to_string();
                ensure!(
                    text.contains(&format_bytes(size)),
                    "report does not name the request ({}): {text}",
                    format_bytes(size)
                );
                // Justified: with every cached byte returned, the device or the cap could
                // still not take the memory the request needs (its size rounded up to
                // 2 MiB at most: a page, or a segment).
                let used = self.test_dev().map_or(0, |d| d.used());
                let need = rounded.div_ceil(PAGE) * PAGE;
                let reserved = after.reserved_bytes.all.current as usize;
                match &report.cause {
                    OomCause::Device => ensure!(
                        self.capacity.is_some_and(|cap| used + need > cap),
                        "device OOM for {size} bytes (rounded {rounded}) with {used} bytes used of {:?} (before: {used_before:?}): {text}",
                        self.capacity
                    ),
                    OomCause::TooLarge => ensure!(
                        rounded > gpuscope_runtime::alloc::rounding::MAX_ALLOCATION,
                        "a request of {rounded} bytes was called too large: {text}"
                    ),
                    OomCause::Limit { limit, .. } => ensure!(
                        Some(*limit) == self.limit && reserved + need > *limit,
                        "OOM at the cap {limit} (set: {:?}) for {size} bytes (rounded {rounded}) with {reserved} reserved: {text}",
                        self.limit
                    ),
                }
                self.pending.clear();
                self.check_cache_released("an out-of-memory error")
            }
            Err(e) => Err(TestCaseError::fail(format!(
                "allocate({size}, {stream}): {e}"
            ))),
        }
    }

    fn free(&mut self, l: Live) -> R {
        if let Some(pat) = &l.pattern {
            self.verify_pattern(&l.block, pat)?;
        }
        let addr = l.block.addr().0;
        let snap = self.alloc.snapshot();
        let size = locate(&snap).get(&addr).map(|(b, _)| b.size).unwrap_or(0);
        self.launch(&l.block, l.block.stream())?;
        self.alloc
            .free(l.block)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let snap = self.alloc.snapshot();
        let map = locate(&snap);
        let (b, _) = containing(&map, addr)
            .ok_or_else(|| TestCaseError::fail(format!("freed block at {addr:#x} vanished")))?;
        if l.uses.is_empty() {
            ensure!(
                b.state == BlockState::Free,
                "block at {addr:#x} freed with no other stream is {:?}",
                b.state
            );
        } else {
            ensure!(
                b.state == BlockState::PendingFree && b.addr.0 == addr && b.size == size,
                "block at {addr:#x} (+{size}) freed after use on {:?} is {:?} at {} (+{})",
                l.uses,
                b.state,
                b.addr,
                b.size
            );
            self.pending.retain(|p| p.addr != addr);
            self.pending.push(PendingRec {
                addr,
                size,
                unsynced: if self.manual_events() {
                    l.uses
                } else {
                    Vec::new()
                },
                allocator_synced: false,
            });
        }
        Ok(())
    }

    fn verify_pattern(&self, block: &RawBlock, pat: &[u8]) -> R {
        let mut back = vec![0u8; pat.len()];
        // SAFETY: the block is live and holds at least `pat.len()` bytes.
        unsafe {
            self.backend
                .copy_device_to_host(&mut back, block.addr(), block.stream())
        }
        .unwrap();
        if back != pat {
            let at = back.iter().zip(pat).position(|(a, b)| a != b).unwrap_or(0);
            return Err(TestCaseError::fail(format!(
                "the block at {} (+{}) was overwritten at offset {at}: {:#04x} instead of {:#04x}",
                block.addr(),
                pat.len(),
                back[at],
                pat[at]
            )));
        }
        Ok(())
    }

    /// Checks the pattern in windows of the block: 4 KiB at each end and 256 bytes every
    /// 64 KiB (cheap enough for every block after every operation; blocks are checked
    /// whole when freed).
    fn verify_windows(&self, block: &RawBlock, pat: &[u8]) -> R {
        const END: usize = 4096;
        const STRIDE: usize = 64 << 10;
        const WINDOW: usize = 256;
        let len = pat.len();
        let windows = [(0, len.min(END)), (len.saturating_sub(END), len)]
            .into_iter()
            .chain((0..len).step_by(STRIDE).map(|o| (o, (o + WINDOW).min(len))));
        let mut back = [0u8; END];
        for (start, end) in windows {
            let back = &mut back[..end - start];
            // SAFETY: the block is live and holds at least `len` bytes.
            unsafe {
                self.backend
                    .copy_device_to_host(back, block.addr().offset(start), block.stream())
            }
            .unwrap();
            if back != &pat[start..end] {
                return self.verify_pattern(block, pat);
            }
        }
        Ok(())
    }

    fn drain(&mut self) -> R {
        for l in std::mem::take(&mut self.live) {
            if let Some(pat) = &l.pattern {
                self.verify_pattern(&l.block, pat)?;
            }
            self.launch(&l.block, l.block.stream())?;
            self.alloc
                .free(l.block)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        self.alloc
            .empty_cache()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        self.pending.clear();
        self.check()
            .map_err(|e| TestCaseError::fail(format!("after the final empty_cache: {e}")))?;
        let s = self.alloc.stats();
        for (name, st) in all_stats(&s) {
            ensure!(
                st.current == 0,
                "after freeing everything and empty_cache, {name}.current = {}",
                st.current
            );
        }
        ensure!(
            self.alloc.snapshot().is_empty(),
            "segments remain after empty_cache"
        );
        ensure!(
            self.alloc.orphan_bytes() == 0,
            "orphan chunks still held after empty_cache"
        );
        if let Some(dev) = self.test_dev() {
            ensure!(
                dev.used() == 0,
                "the backend still holds {} bytes",
                dev.used()
            );
            ensure!(
                dev.live_allocations() == 0,
                "the backend still has {} allocations",
                dev.live_allocations()
            );
        }
        // One device free per device allocation (segments, or chunks).
        ensure!(
            s.num_device_alloc == s.num_device_free,
            "device allocations/frees {}/{}",
            s.num_device_alloc,
            s.num_device_free
        );
        Ok(())
    }

    // ------------------------------------------------------------------ checks

    /// What must hold right after `empty_cache` or an out-of-memory error: no pending
    /// frees, and nothing the device could take back is still cached.
    fn check_cache_released(&self, after: &str) -> R {
        let snap = self.alloc.snapshot();
        for seg in &snap {
            for b in &seg.blocks {
                ensure!(
                    b.state != BlockState::PendingFree,
                    "after {after}, the block at {} is still pending",
                    b.addr
                );
                if self.vmm && b.state == BlockState::Free {
                    ensure!(
                        !has_whole_chunk(b, seg),
                        "after {after}, free block at {} (+{}) still holds a whole chunk",
                        b.addr,
                        b.size
                    );
                }
            }
            if !self.vmm {
                ensure!(
                    !(seg.blocks.len() == 1 && seg.blocks[0].state == BlockState::Free),
                    "after {after}, the free segment at {} (+{}) is still cached",
                    seg.base,
                    seg.size
                );
            }
        }
        ensure!(
            self.alloc.orphan_bytes() == 0,
            "after {after}, {} bytes of orphan chunks are held",
            self.alloc.orphan_bytes()
        );
        Ok(())
    }

    fn check(&mut self) -> R {
        self.alloc
            .check_invariants()
            .map_err(|e| TestCaseError::fail(format!("check_invariants: {e}")))?;
        let stats = self.alloc.stats();
        let snap = self.alloc.snapshot();
        let held = self.alloc.orphan_bytes();
        self.check_snapshot(&snap)?;
        self.check_live(&snap)?;
        check_recount(&stats, &snap, held, self.config.max_split_size)
            .map_err(TestCaseError::fail)?;
        self.check_stat_history(&stats)?;
        self.check_backend(&stats, &snap, held)?;
        self.check_pending(&stats, &snap)?;
        if matches!(self.device, Device::Host(_)) {
            for l in &self.live {
                self.verify_windows(&l.block, l.pattern.as_deref().unwrap_or(&[]))?;
            }
        }
        Ok(())
    }

    fn check_snapshot(&self, snap: &[SegmentInfo]) -> R {
        for w in snap.windows(2) {
            ensure!(
                w[0].base.0 + w[0].size as u64 <= w[1].base.0,
                "segments at {} (+{}) and {} overlap or are out of order",
                w[0].base,
                w[0].size,
                w[1].base
            );
        }
        for seg in snap {
            ensure!(
                seg.size > 0 && !seg.blocks.is_empty(),
                "empty segment at {}",
                seg.base
            );
            if self.vmm {
                ensure!(
                    seg.pages * PAGE == seg.size
                        && seg.chunks.iter().sum::<usize>() == seg.size
                        && seg.chunks.iter().all(|c| c % PAGE == 0),
                    "segment at {} (+{}) has {} pages, chunks {:?}",
                    seg.base,
                    seg.size,
                    seg.pages,
                    seg.chunks
                );
                ensure!(
                    seg.base.0 % PAGE as u64 == 0,
                    "mapped segment at {} is not page aligned",
                    seg.base
                );
            } else {
                ensure!(seg.pages == 0, "plain segment at {} has pages", seg.base);
                match seg.pool {
                    Pool::Small => ensure!(
                        seg.size == SMALL_BUFFER,
                        "small segment of {} bytes",
                        seg.size
                    ),
                    Pool::Large => ensure!(
                        seg.size % (2 << 20) == 0,
                        "large segment of {} bytes",
                        seg.size
                    ),
                }
            }
            let mut at = seg.base.0;
            let mut prev_free = false;
            for b in &seg.blocks {
                ensure!(
                    b.addr.0 == at,
                    "segment {}: block at {} where {at:#x} was expected",
                    seg.base,
                    b.addr
                );
                ensure!(
                    b.size > 0 && b.size % MIN_BLOCK_SIZE == 0,
                    "block at {} of {} bytes",
                    b.addr,
                    b.size
                );
                let free = b.state == BlockState::Free;
                ensure!(
                    !(free && prev_free),
                    "free blocks at {} and before it are not merged",
                    b.addr
                );
                ensure!(b.state != BlockState::Vacant, "vacant block at {}", b.addr);
                if b.state != BlockState::Allocated {
                    ensure!(
                        b.requested == 0,
                        "free block at {} reports {} requested",
                        b.addr,
                        b.requested
                    );
                }
                prev_free = free;
                at += b.size as u64;
            }
            ensure!(
                at == seg.base.0 + seg.size as u64,
                "segment {} (+{}): blocks end at {at:#x}",
                seg.base,
                seg.size
            );
        }
        Ok(())
    }

    fn check_live(&self, snap: &[SegmentInfo]) -> R {
        let map = locate(snap);
        let allocated = map
            .values()
            .filter(|(b, _)| b.state == BlockState::Allocated)
            .count();
        ensure!(
            allocated == self.live.len(),
            "{} allocated blocks in the snapshot, {} live handles",
            allocated,
            self.live.len()
        );
        for l in &self.live {
            let addr: DeviceAddr = l.block.addr();
            let (b, seg) = map.get(&addr.0).ok_or_else(|| {
                TestCaseError::fail(format!(
                    "live block at {addr} is not a block of the snapshot"
                ))
            })?;
            ensure!(
                b.state == BlockState::Allocated,
                "live block at {addr} is {:?}",
                b.state
            );
            ensure!(
                b.requested == l.block.size(),
                "block at {addr}: {} requested, handle says {}",
                b.requested,
                l.block.size()
            );
            ensure!(
                seg.stream == l.block.stream(),
                "block at {addr} of {} lies in a segment of {}",
                l.block.stream(),
                seg.stream
            );
            let rounded = round_size(l.block.size(), &self.config);
            ensure!(
                seg.pool == Pool::for_size(rounded),
                "block at {addr} for {} bytes lies in the {:?} pool",
                l.block.size(),
                seg.pool
            );
            ensure!(
                block_size_allowed(b.size, rounded, &self.config, self.vmm),
                "block at {addr} of {} bytes for a request of {} (rounded {rounded}) breaks the split rules ({})",
                b.size,
                l.block.size(),
                if self.vmm { "virtual memory" } else { "plain" }
            );
        }
        Ok(())
    }

    fn check_stat_history(&mut self, stats: &MemoryStats) -> R {
        for (name, s) in all_stats(stats) {
            ensure!(s.current >= 0, "{name}.current = {} < 0", s.current);
            ensure!(
                s.peak >= s.current,
                "{name}: peak {} < current {}",
                s.peak,
                s.current
            );
            ensure!(
                s.allocated - s.freed == s.current,
                "{name}: allocated {} - freed {} != current {}",
                s.allocated,
                s.freed,
                s.current
            );
            let seen = self.seen_max.entry(name.clone()).or_insert(s.current);
            *seen = (*seen).max(s.current);
            if exact_peak(&name) {
                ensure!(
                    s.peak == *seen,
                    "{name}: peak {} but the highest value seen since the reset is {}",
                    s.peak,
                    *seen
                );
            } else {
                ensure!(
                    s.peak >= *seen,
                    "{name}: peak {} below a value seen, {}",
                    s.peak,
                    *seen
                );
            }
        }
        ensure!(
            stats.num_ooms == self.ooms,
            "num_ooms = {}, but {} allocations failed",
            stats.num_ooms,
            self.ooms
        );
        Ok(())
    }

    fn check_backend(&self, stats: &MemoryStats, snap: &[SegmentInfo], held: usize) -> R {
        ensure!(
            held == 0,
            "{held} bytes of orphan chunks held (no driver call failed)"
        );
        let Some(dev) = self.test_dev() else {
            return Ok(());
        };
        let reserved = stats.reserved_bytes.all.current as usize;
        ensure!(
            dev.used() == reserved,
            "the backend holds {} bytes, reserved_bytes.all.current = {reserved}",
            dev.used()
        );
        let c = dev.counters();
        // Both count the allocations that succeeded.
        ensure!(
            c.device_allocs == stats.num_device_alloc && c.device_frees == stats.num_device_free,
            "backend allocs/refused/frees {}/{}/{}, allocator allocs/frees {}/{}",
            c.device_allocs,
            c.failed_allocs,
            c.device_frees,
            stats.num_device_alloc,
            stats.num_device_free
        );
        ensure!(
            c.maps == stats.num_device_map && c.unmaps == stats.num_device_unmap,
            "backend maps/unmaps {}/{}, allocator {}/{}",
            c.maps,
            c.unmaps,
            stats.num_device_map,
            stats.num_device_unmap
        );
        if self.vmm {
            let chunks: usize = snap.iter().map(|s| s.chunks.len()).sum();
            let bytes: usize = snap.iter().flat_map(|s| &s.chunks).sum();
            ensure!(
                dev.live_allocations() == chunks && bytes == reserved,
                "{} chunks on the backend, {chunks} chunks ({bytes} bytes) in segments for {reserved} reserved bytes",
                dev.live_allocations()
            );
        } else {
            ensure!(
                dev.live_allocations() == snap.len(),
                "{} device allocations for {} segments",
                dev.live_allocations(),
                snap.len()
            );
            ensure!(
                c.maps == 0 && stats.num_device_map == 0,
                "the plain path mapped chunks"
            );
        }
        ensure!(
            c.stream_syncs == self.my_syncs + stats.num_stream_syncs,
            "the backend saw {} stream syncs: {} by the test and {} counted by the allocator",
            c.stream_syncs,
            self.my_syncs,
            stats.num_stream_syncs
        );
        Ok(())
    }

    fn check_pending(&mut self, stats: &MemoryStats, snap: &[SegmentInfo]) -> R {
        let syncs = allocator_waits(stats);
        if syncs != self.allocator_syncs {
            self.allocator_syncs = syncs;
            for p in &mut self.pending {
                p.allocator_synced = true;
            }
            // Which stream it waited for is not visible: any fence may have completed.
            self.fence_open = [false; 3];
        }
        let map = locate(snap);
        for p in &self.pending {
            if p.unsynced.is_empty() || p.allocator_synced {
                continue;
            }
            let ok = map
                .get(&p.addr)
                .is_some_and(|(b, _)| b.state == BlockState::PendingFree && b.size == p.size);
            ensure!(
                ok,
                "the block at {:#x} (+{}) freed after use on unsynchronised {:?} is no longer pending: {:?}",
                p.addr,
                p.size,
                p.unsynced,
                containing(&map, p.addr).map(|(b, _)| b)
            );
        }
        Ok(())
    }
}

/// A pattern of its own for block `id`: its id at both ends, a byte of its own between.
fn pattern(id: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(id % 251) as u8 + 1; len];
    let tag = id.to_le_bytes();
    let n = tag.len().min(len);
    v[..n].copy_from_slice(&tag[..n]);
    let start = len.saturating_sub(8).max(n);
    v[start..].copy_from_slice(&tag[..len - start]);
    v
}

// ------------------------------------------------------------------ properties

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
    virtual_everything_with_capacity: vmm = true, conf = "max_split_size_mb:24,roundup_power2_divisions:[256:1,>:4],garbage_collection_threshold:0.6", capacity = Some(448 << 20);
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

// ------------------------------------------------------------------ fixed cases

/// The checker catches what it claims to: a corrupted pattern and a wrong recount.
#[test]
fn the_checks_can_fail() {
    let mut h = Harness::on_host("");
    h.allocate(4096, StreamId::DEFAULT).unwrap();
    let l = &h.live[0];
    // SAFETY: the block holds 4096 bytes of host memory.
    unsafe {
        h.backend
            .copy_host_to_device(l.block.addr().offset(100), &[0xEE], StreamId::DEFAULT)
    }
    .unwrap();
    assert!(h.check().is_err(), "a corrupted block must be noticed");
    h.live[0].pattern = Some(pattern(0, 4096));
    // SAFETY: as above.
    unsafe {
        h.backend
            .copy_host_to_device(h.live[0].block.addr(), &pattern(0, 4096), StreamId::DEFAULT)
    }
    .unwrap();
    h.check().unwrap();

    let stats = h.alloc.stats();
    let mut snap = h.alloc.snapshot();
    check_recount(&stats, &snap, 0, usize::MAX).unwrap();
    snap[0].blocks[0].size += 512;
    assert!(check_recount(&stats, &snap, 0, usize::MAX).is_err());
    assert!(!block_size_allowed(
        4096 + 512,
        4096,
        &AllocConfig::default(),
        false
    ));
    assert!(block_size_allowed(
        11 << 20,
        10 << 20,
        &"expandable_segments:False".parse().unwrap(),
        false
    ));
    assert!(!block_size_allowed(
        11 << 20,
        10 << 20,
        &AllocConfig::default(),
        true
    ));
    h.drain().unwrap();
}

/// Cross-stream reuse, step by step: a block recorded on another stream stays pending
/// until that stream is synchronised, and is reused after.
#[test]
fn cross_stream_free_waits_for_the_stream() {
    for vmm in [false, true] {
        let mut h = Harness::on_test_backend(vmm, "", None);
        let s1 = h.streams[1];
        h.allocate(1 << 20, StreamId::DEFAULT).unwrap();
        h.check().unwrap();
        let addr = h.live[0].block.addr();
        h.record(0, 1).unwrap();
        let l = h.live.swap_remove(0);
        h.free(l).unwrap();
        h.check().unwrap();
        h.allocate(1 << 20, StreamId::DEFAULT).unwrap();
        assert_ne!(
            h.live[0].block.addr(),
            addr,
            "reused before {s1} was synchronised"
        );
        h.check().unwrap();
        h.sync(1);
        h.check().unwrap();
        h.allocate(1 << 20, StreamId::DEFAULT).unwrap();
        assert_eq!(
            h.live[1].block.addr(),
            addr,
            "the best fit after the sync is the block freed first"
        );
        h.check().unwrap();
        h.drain().unwrap();
    }
}

/// With virtual memory and `max_split_size_mb`, a request below max_split_size must not
/// be served by an unsplit block at or above it (PyTorch keeps oversize blocks for
/// oversize requests). Growing next to a free oversize block maps the new pages onto it,
/// the merged free block is oversize, and the small request takes all of it.
#[test]
fn regression_virtual_memory_small_request_takes_merged_oversize_block() {
    let dev = Arc::new(TestBackend::builder().virtual_memory(PAGE).build());
    let alloc = CachingAllocator::new(dev, "max_split_size_mb:32".parse().unwrap()).unwrap();
    let big = alloc.allocate(40 << 20, StreamId::DEFAULT).unwrap();
    alloc.free(big).unwrap();
    let small = alloc.allocate(2 << 20, StreamId::DEFAULT).unwrap();
    let stats = alloc.stats();
    let block = alloc
        .snapshot()
        .iter()
        .flat_map(|s| s.blocks.clone())
        .find(|b| b.addr == small.addr())
        .unwrap();
    assert_eq!(
        block.size,
        2 << 20,
        "a 2 MiB request took a {} MiB block (allocated_bytes {}, oversize_allocations {})",
        block.size >> 20,
        stats.allocated_bytes.all.current,
        stats.oversize_allocations.current
    );
    alloc.free(small).unwrap();
}

/// `record_stream` accepts a stream the backend never created; the free that follows
/// fails (the event cannot be recorded, the stream cannot be synchronised) after the
/// block was already uncounted and marked pending, with no event to complete it: the
/// block stays pending for good, and its segment can never be returned.
#[test]
fn regression_record_stream_on_unknown_stream_leaks_the_block() {
    let dev = Arc::new(TestBackend::builder().build());
    let alloc = CachingAllocator::new(dev.clone(), AllocConfig::default()).unwrap();
    let a = alloc.allocate(4096, StreamId::DEFAULT).unwrap();
    // Either the bad stream is refused here...
    if alloc.record_stream(&a, StreamId(99)).is_ok() {
        // ...or the free must still give the block back.
        let freed = alloc.free(a);
        alloc.empty_cache().unwrap();
        let s = alloc.stats();
        assert_eq!(
            (
                s.active.all.current,
                s.reserved_bytes.all.current,
                dev.used()
            ),
            (0, 0, 0),
            "free returned {freed:?}; the block is still active and its segment reserved"
        );
    }
}

/// `allocate` accepts a stream the backend never created. The block works, but
/// `empty_cache` then fails on that stream's segment and stops there, so other streams'
/// free segments are not returned either.
#[test]
fn regression_allocate_on_unknown_stream_blocks_empty_cache() {
    let dev = Arc::new(TestBackend::builder().build());
    let alloc =
        CachingAllocator::new(dev.clone(), "expandable_segments:False".parse().unwrap()).unwrap();
    // Either the bad stream is refused here...
    if let Ok(a) = alloc.allocate(4096, StreamId(99)) {
        // ...or the allocator copes with it later.
        let b = alloc.allocate(4096, StreamId::DEFAULT).unwrap();
        alloc.free(a).unwrap();
        alloc.free(b).unwrap();
        let emptied = alloc.empty_cache();
        assert_eq!(
            dev.used(),
            0,
            "empty_cache returned {emptied:?} with {} bytes still reserved (stream 0's free segment included)",
            alloc.stats().reserved_bytes.all.current
        );
    }
}
