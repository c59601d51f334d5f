//! Out-of-memory injection: the test backend refuses every n-th device allocation
//! (n = 2..=7) on a device of limited capacity, while a shipped trace or a random
//! sequence runs, on the plain path and on the virtual memory path.
//!
//! Every allocation either succeeds or fails with [`AllocError::OutOfMemory`], whose
//! report names the request, what is allocated, reserved and free, and the largest free
//! block, all equal to what the allocator and the device say. After each failure the
//! invariants hold, the statistics equal a recount, the device holds exactly the reserved
//! bytes, nothing that could be released is still cached, and, every few failures,
//! freeing everything and emptying the cache leaves nothing allocated, nothing reserved
//! and nothing held by the device. `num_ooms` counts the failures; `num_alloc_retries`
//! counts the allocations that released the cache and asked the device again (a failure
//! that such a retry fixes is a retry, not an OOM; a final failure is both, as in
//! PyTorch).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use gpuscope_runtime::alloc::rounding::{Pool, round_size};
use gpuscope_runtime::alloc::{
    AllocConfig, AllocError, BlockState, CachingAllocator, MemoryStats, OomCause, OutOfMemory,
    RawBlock, SegmentInfo, StatArray,
};
use gpuscope_runtime::backend::test::{EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::format_bytes;
use gpuscope_runtime::trace::{Trace, TraceOp};

const PAGE: usize = 2 << 20;
const MIB: usize = 1 << 20;

fn trace(name: &str) -> Trace {
    let path =
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/traces")).join(name);
    Trace::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A tiny deterministic generator (SplitMix64), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// Sizes from 1 byte to 48 MiB, mostly small, many near the pool boundaries.
    fn size(&mut self) -> usize {
        match self.below(100) {
            0..=34 => self.range(1, 8192),
            35..=49 => self.range(8193, MIB),
            50..=61 => self.range(MIB - 2048, MIB + 2048),
            62..=79 => self.range(MIB + 1, 10 * MIB),
            80..=91 => self.range(10 * MIB - 8192, 10 * MIB + 8192),
            _ => self.range(10 * MIB, 48 * MIB),
        }
    }
}

/// An allocator on a failing device, with what the test knows about it.
struct Run {
    alloc: CachingAllocator,
    dev: Arc<TestBackend>,
    config: AllocConfig,
    vmm: bool,
    capacity: usize,
    streams: Vec<StreamId>,
    live: HashMap<u64, RawBlock>,
    failures: u64,
    retried_successes: u64,
    drains: u64,
    /// Drain everything every this many failures.
    drain_every: u64,
}

impl Run {
    fn new(vmm: bool, fail_every: u64, capacity: usize, conf: &str) -> Run {
        let dev = Arc::new(
            TestBackend::builder()
                .capacity(capacity)
                .virtual_memory(PAGE)
                .event_mode(EventMode::Manual)
                .fail_every(fail_every)
                .build(),
        );
        let mut text = if vmm {
            String::from("expandable_segments:True")
        } else {
            String::from("expandable_segments:False")
        };
        if !conf.is_empty() {
            text.push(',');
            text.push_str(conf);
        }
        let config: AllocConfig = text.parse().unwrap();
        let alloc = CachingAllocator::new(dev.clone(), config.clone()).unwrap();
        assert_eq!(alloc.uses_virtual_memory(), vmm);
        let streams = vec![
            StreamId::DEFAULT,
            dev.create_stream().unwrap(),
            dev.create_stream().unwrap(),
        ];
        Run {
            alloc,
            dev,
            config,
            vmm,
            capacity,
            streams,
            live: HashMap::new(),
            failures: 0,
            retried_successes: 0,
            drains: 0,
            drain_every: 3,
        }
    }

    fn what(&self) -> String {
        format!(
            "{} path, config {}",
            if self.vmm { "virtual memory" } else { "plain" },
            self.config
        )
    }

    /// Allocates as `id`; on failure checks the report and the allocator's state.
    fn allocate(&mut self, id: u64, size: usize, stream: StreamId) {
        let before = self.alloc.stats();
        let failed_before = self.dev.counters().failed_allocs;
        let result = self.alloc.allocate(size, stream);
        let after = self.alloc.stats();
        let refused = self.dev.counters().failed_allocs - failed_before;
        let retries = after.num_alloc_retries - before.num_alloc_retries;
        match result {
            Ok(block) => {
                assert_eq!(
                    after.num_ooms,
                    before.num_ooms,
                    "{}: a success counted an OOM",
                    self.what()
                );
                assert!(
                    retries <= 1,
                    "{}: {retries} retries counted for one allocation",
                    self.what()
                );
                if refused == 0 {
                    assert_eq!(
                        retries,
                        0,
                        "{}: a retry counted though the device refused nothing",
                        self.what()
                    );
                }
                self.retried_successes += retries;
                self.live.insert(id, block);
            }
            Err(AllocError::OutOfMemory(report)) => {
                self.failures += 1;
                assert_eq!(
                    after.num_ooms,
                    before.num_ooms + 1,
                    "{}: the OOM was not counted once",
                    self.what()
                );
                assert_eq!(
                    retries,
                    1,
                    "{}: an OOM comes after exactly one release-and-retry",
                    self.what()
                );
                assert!(
                    refused >= 2,
                    "{}: OOM after the device refused {refused} allocations (first try and retry)",
                    self.what()
                );
                self.check_report(&report, size, stream, &after);
                self.check_state("after an out-of-memory error");
                self.check_released();
                if self.failures % self.drain_every == 0 {
                    self.drain_and_check_zero();
                }
            }
            Err(e) => panic!(
                "{}: allocate({size}, {stream}) failed with something else than OOM: {e}",
                self.what()
            ),
        }
    }

    fn free(&mut self, id: u64) {
        if let Some(b) = self.live.remove(&id) {
            self.alloc.free(b).unwrap();
        }
    }

    fn check_report(
        &self,
        report: &OutOfMemory,
        size: usize,
        stream: StreamId,
        stats: &MemoryStats,
    ) {
        let snap = self.alloc.snapshot();
        let rounded = round_size(size, &self.config);
        let largest_free = snap
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state == BlockState::Free)
            .map(|b| b.size)
            .max()
            .unwrap_or(0);
        let allocated = stats.allocated_bytes.all.current as usize;
        let reserved = stats.reserved_bytes.all.current as usize;
        let w = self.what();
        assert_eq!(
            (report.requested, report.rounded),
            (size, rounded),
            "{w}: {report:?}"
        );
        assert_eq!(report.pool, Pool::for_size(rounded), "{w}");
        assert_eq!(report.stream, stream, "{w}");
        assert_eq!(report.allocated, allocated, "{w}: report's allocated bytes");
        assert_eq!(report.reserved, reserved, "{w}: report's reserved bytes");
        assert_eq!(
            report.largest_free_block, largest_free,
            "{w}: report's largest free block"
        );
        assert_eq!(report.total_capacity, self.capacity, "{w}");
        assert_eq!(
            report.device_free,
            self.capacity - self.dev.used(),
            "{w}: report's free device memory"
        );
        assert_eq!(report.cause, OomCause::Device, "{w}");
        assert_eq!(report.expandable, self.vmm, "{w}");
        let mut live_sizes: Vec<usize> = snap
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state == BlockState::Allocated)
            .map(|b| b.size)
            .collect();
        live_sizes.sort_unstable_by(|a, b| b.cmp(a));
        live_sizes.truncate(5);
        let reported: Vec<usize> = report.largest_live.iter().map(|a| a.size).collect();
        assert_eq!(
            reported, live_sizes,
            "{w}: the report's largest live allocations"
        );

        let text = report.to_string();
        for (what, bytes) in [
            ("the request", size),
            ("the rounded request", rounded),
            ("allocated bytes", allocated),
            ("reserved bytes", reserved),
            ("reserved but unallocated bytes", reserved - allocated),
            ("the largest free block", largest_free),
            ("free device memory", report.device_free),
        ] {
            let b = format_bytes(bytes);
            assert!(
                text.contains(&b),
                "{w}: the report does not name {what} ({b}):\n{text}"
            );
        }
        assert!(text.contains("largest free block"), "{w}:\n{text}");
        assert!(text.contains(&stream.to_string()), "{w}:\n{text}");
    }

    /// Invariants, statistics against a recount, and the device against the statistics.
    fn check_state(&self, when: &str) {
        let w = self.what();
        self.alloc
            .check_invariants()
            .unwrap_or_else(|e| panic!("{w}, {when}: {e}"));
        let stats = self.alloc.stats();
        let snap = self.alloc.snapshot();
        let held = self.alloc.orphan_bytes();
        if let Err(e) = check_recount(&stats, &snap, held) {
            panic!("{w}, {when}: {e}");
        }
        assert_eq!(
            self.dev.used(),
            stats.reserved_bytes.all.current as usize,
            "{w}, {when}: the device holds what the allocator reserved"
        );
        let allocated = snap
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state == BlockState::Allocated)
            .count();
        assert_eq!(
            allocated,
            self.live.len(),
            "{w}, {when}: allocated blocks vs live handles"
        );
        for b in self.live.values() {
            let found = snap.iter().flat_map(|s| &s.blocks).any(|x| {
                x.addr == b.addr() && x.state == BlockState::Allocated && x.requested == b.size()
            });
            assert!(
                found,
                "{w}, {when}: live block at {} is not allocated in the snapshot",
                b.addr()
            );
        }
    }

    /// After an OOM the allocator waited for all events and released everything it
    /// could before giving up.
    fn check_released(&self) {
        let w = self.what();
        assert_eq!(
            self.alloc.orphan_bytes(),
            0,
            "{w}: orphan chunks held after an OOM"
        );
        for seg in self.alloc.snapshot() {
            for b in &seg.blocks {
                assert_ne!(
                    b.state,
                    BlockState::PendingFree,
                    "{w}: a pending free survived the OOM path"
                );
                if self.vmm && b.state == BlockState::Free {
                    let mut at = seg.base.0;
                    for &size in &seg.chunks {
                        let (start, end) = (at, at + size as u64);
                        at = end;
                        assert!(
                            !(start >= b.addr.0 && end <= b.addr.0 + b.size as u64),
                            "{w}: free block at {} (+{}) kept a whole chunk through an OOM",
                            b.addr,
                            b.size
                        );
                    }
                }
            }
            if !self.vmm {
                assert!(
                    !(seg.blocks.len() == 1 && seg.blocks[0].state == BlockState::Free),
                    "{w}: a whole free segment at {} survived an OOM",
                    seg.base
                );
            }
        }
    }

    /// Frees everything, empties the cache and checks that nothing is left anywhere.
    fn drain_and_check_zero(&mut self) {
        let w = self.what();
        for (_, b) in self.live.drain() {
            self.alloc.free(b).unwrap();
        }
        assert_eq!(
            self.alloc.stats().allocated_bytes.all.current,
            0,
            "{w}: allocated bytes after freeing everything"
        );
        self.alloc.empty_cache().unwrap();
        let s = self.alloc.stats();
        for (name, a) in stat_arrays(&s) {
            assert_eq!(
                (a.all.current, a.small_pool.current, a.large_pool.current),
                (0, 0, 0),
                "{w}: {name} after empty_cache"
            );
        }
        assert_eq!(
            self.dev.used(),
            0,
            "{w}: device memory still in use after empty_cache"
        );
        assert_eq!(
            self.dev.live_allocations(),
            0,
            "{w}: device allocations left after empty_cache"
        );
        assert!(
            self.alloc.snapshot().is_empty(),
            "{w}: segments left after empty_cache"
        );
        self.check_state("after draining");
        self.drains += 1;
    }

    fn finish(mut self) -> (u64, u64) {
        self.check_state("at the end");
        self.drain_and_check_zero();
        let s = self.alloc.stats();
        assert_eq!(s.num_ooms, self.failures, "{}: num_ooms", self.what());
        assert_eq!(
            s.num_alloc_retries,
            self.failures + self.retried_successes,
            "{}: num_alloc_retries",
            self.what()
        );
        (self.failures, self.retried_successes)
    }
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

/// Compares the current values of the statistics, per pool, with a recount from the
/// snapshot (`held`: bytes of pages held outside both pools).
fn check_recount(stats: &MemoryStats, snap: &[SegmentInfo], held: usize) -> Result<(), String> {
    let mut count: HashMap<&str, [i64; 2]> = HashMap::new();
    for seg in snap {
        let p = seg.pool.index();
        let mut add = |name: &'static str, v: usize| count.entry(name).or_default()[p] += v as i64;
        add("segment", 1);
        add("reserved_bytes", seg.size);
        for b in &seg.blocks {
            match b.state {
                BlockState::Allocated => {
                    add("allocation", 1);
                    add("allocated_bytes", b.size);
                    add("requested_bytes", b.requested);
                    add("active", 1);
                    add("active_bytes", b.size);
                }
                BlockState::PendingFree => {
                    add("active", 1);
                    add("active_bytes", b.size);
                }
                BlockState::Free if seg.blocks.len() > 1 => {
                    add("inactive_split", 1);
                    add("inactive_split_bytes", b.size);
                }
                _ => {}
            }
        }
    }
    for (name, a) in stat_arrays(stats) {
        let [small, large] = count.get(name).copied().unwrap_or_default();
        let unpooled = if name == "reserved_bytes" {
            held as i64
        } else {
            0
        };
        let want = (small, large, small + large + unpooled);
        let got = (a.small_pool.current, a.large_pool.current, a.all.current);
        if got != want {
            return Err(format!(
                "{name} (small, large, all): statistics {got:?}, recount {want:?}"
            ));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ traces

fn replay_with_failures(name: &str, vmm: bool, fail_every: u64, capacity: usize) -> (u64, u64) {
    let t = trace(name);
    let mut run = Run::new(vmm, fail_every, capacity, "");
    for (i, op) in t.ops().iter().enumerate() {
        match *op {
            TraceOp::Alloc { id, size, stream } => {
                let stream = run.streams[stream as usize];
                run.allocate(id, size, stream);
            }
            TraceOp::Free { id } => run.free(id),
            TraceOp::RecordStream { id, stream } => {
                if let Some(b) = run.live.get(&id) {
                    run.alloc
                        .record_stream(b, run.streams[stream as usize])
                        .unwrap();
                }
            }
        }
        if i % 256 == 0 {
            run.check_state(&format!("op {i} of {name}"));
        }
    }
    run.finish()
}

#[test]
fn trace_with_every_nth_device_allocation_failing_plain() {
    let mut total = (0, 0);
    for n in 2..=7 {
        let (failures, retried) = replay_with_failures("bert_infer.csv", false, n, 640 << 20);
        total = (total.0 + failures, total.1 + retried);
    }
    // The plain path retries after every refusal; the retry is the next attempt, which
    // succeeds unless capacity is short: most refusals are absorbed by retries.
    assert!(total.1 > 0, "no allocation was saved by a retry");
    assert!(
        total.0 > 0,
        "no allocation failed: the capacity is not limiting"
    );
}

#[test]
fn trace_with_every_nth_device_allocation_failing_virtual_memory() {
    let mut total = (0, 0);
    for n in 2..=7 {
        let (failures, retried) = replay_with_failures("bert_infer.csv", true, n, 580 << 20);
        total = (total.0 + failures, total.1 + retried);
    }
    // A growth first asks for at least 20 MiB, then for what it needs, then releases
    // the cache and asks again: refusals are absorbed by the later attempts until the
    // capacity is short.
    assert!(total.0 > 0, "nothing failed");
    assert!(total.1 > 0, "no allocation was saved by a retry");
}

#[test]
fn two_stream_trace_with_failures() {
    for vmm in [false, true] {
        for n in [3, 5] {
            replay_with_failures("prefetch_train.csv", vmm, n, 1600 << 20);
        }
    }
}

// ------------------------------------------------------------------ random sequences

fn random_with_failures(
    seed: u64,
    vmm: bool,
    fail_every: u64,
    conf: &str,
    ops: usize,
) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut run = Run::new(vmm, fail_every, 256 << 20, conf);
    let mut ids: Vec<u64> = Vec::new();
    let mut next_id = 0;
    for i in 0..ops {
        match rng.below(100) {
            0..=49 => {
                let stream = run.streams[rng.below(3)];
                run.allocate(next_id, rng.size(), stream);
                ids.push(next_id);
                next_id += 1;
            }
            50..=84 if !ids.is_empty() => {
                let id = ids.swap_remove(rng.below(ids.len()));
                run.free(id);
            }
            85..=92 if !ids.is_empty() => {
                let id = ids[rng.below(ids.len())];
                if let Some(b) = run.live.get(&id) {
                    run.alloc
                        .record_stream(b, run.streams[rng.below(3)])
                        .unwrap();
                }
            }
            93..=97 => run
                .dev
                .synchronize_stream(run.streams[rng.below(3)])
                .unwrap(),
            98 => run.alloc.empty_cache().unwrap(),
            _ => {}
        }
        ids.retain(|id| run.live.contains_key(id));
        if i % 16 == 0 {
            run.check_state(&format!("op {i} (seed {seed})"));
        }
    }
    run.finish()
}

#[test]
fn random_sequences_with_every_nth_device_allocation_failing() {
    let ops = if cfg!(debug_assertions) { 1500 } else { 6000 };
    let mut failures = 0;
    for n in 2..=7 {
        for vmm in [false, true] {
            for conf in [
                "",
                "max_split_size_mb:24,garbage_collection_threshold:0.7",
                "roundup_power2_divisions:4",
            ] {
                let seed = n * 1000 + vmm as u64 * 100 + conf.len() as u64;
                failures += random_with_failures(seed, vmm, n, conf, ops).0;
            }
        }
    }
    assert!(failures > 0);
}

// ------------------------------------------------------------------ fixed cases

/// A device refusal that releasing the cache fixes counts as a retry, not an OOM.
#[test]
fn release_and_retry_counts_a_retry_not_an_oom() {
    let dev = Arc::new(TestBackend::builder().capacity(64 * MIB).build());
    let alloc =
        CachingAllocator::new(dev.clone(), "expandable_segments:False".parse().unwrap()).unwrap();
    let s1 = dev.create_stream().unwrap();
    let a = alloc.allocate(50 * MIB, StreamId::DEFAULT).unwrap();
    alloc.free(a).unwrap(); // cached: a free 50 MiB segment
    let b = alloc.allocate(1024, StreamId::DEFAULT).unwrap(); // a 2 MiB small segment
    // Another stream cannot use stream 0's cache: 52 + 20 MiB does not fit in 64 MiB.
    let c = alloc.allocate(20 * MIB, s1).unwrap();
    let s = alloc.stats();
    assert_eq!((s.num_alloc_retries, s.num_ooms), (1, 0));
    assert_eq!(dev.counters().failed_allocs, 1);
    assert_eq!(
        s.num_device_free, 1,
        "the cached segment went back to the device"
    );
    assert_eq!(s.reserved_bytes.all.current as usize, 22 * MIB);
    assert_eq!(dev.used(), 22 * MIB);
    alloc.check_invariants().unwrap();
    alloc.free(b).unwrap();
    alloc.free(c).unwrap();
}

/// An injected refusal is retried once; the second attempt succeeds.
#[test]
fn injected_refusal_is_retried() {
    // Plain: the 2nd device allocation is refused.
    let dev = Arc::new(TestBackend::builder().fail_allocation(2).build());
    let alloc =
        CachingAllocator::new(dev.clone(), "expandable_segments:False".parse().unwrap()).unwrap();
    let a = alloc.allocate(4096, StreamId::DEFAULT).unwrap();
    let b = alloc.allocate(30 * MIB, StreamId::DEFAULT).unwrap();
    let s = alloc.stats();
    assert_eq!(
        (s.num_alloc_retries, s.num_ooms, s.num_device_alloc),
        (1, 0, 2)
    );
    alloc.free(a).unwrap();
    alloc.free(b).unwrap();

    // Virtual memory: a refused 20 MiB growth is asked for again at what the request
    // needs; only when that is refused too does the allocator release its cache and
    // retry.
    let dev = Arc::new(
        TestBackend::builder()
            .virtual_memory(PAGE)
            .fail_allocation(1)
            .build(),
    );
    let alloc = CachingAllocator::new(dev.clone(), AllocConfig::default()).unwrap();
    let a = alloc.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    let s = alloc.stats();
    assert_eq!((s.num_alloc_retries, s.num_ooms), (0, 0));
    assert_eq!(s.reserved_bytes.all.current as usize, 4 * MIB);
    alloc.free(a).unwrap();

    let dev = Arc::new(
        TestBackend::builder()
            .virtual_memory(PAGE)
            .fail_allocation(1)
            .fail_allocation(2)
            .build(),
    );
    let alloc = CachingAllocator::new(dev.clone(), AllocConfig::default()).unwrap();
    let a = alloc.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    let s = alloc.stats();
    assert_eq!((s.num_alloc_retries, s.num_ooms), (1, 0));
    assert_eq!(dev.counters().failed_allocs, 2);
    assert_eq!(s.num_device_alloc, 1);
    alloc.free(a).unwrap();
    alloc.empty_cache().unwrap();
    assert_eq!(dev.used(), 0);
}

/// A request that cannot fit: one retry, one OOM, and a report with the figures.
#[test]
fn oom_report_names_the_figures() {
    for vmm in [false, true] {
        let dev = Arc::new(
            TestBackend::builder()
                .capacity(64 * MIB)
                .virtual_memory(PAGE)
                .build(),
        );
        let conf = if vmm {
            "expandable_segments:True"
        } else {
            "expandable_segments:False"
        };
        let alloc = CachingAllocator::new(dev.clone(), conf.parse().unwrap()).unwrap();
        // A 3 MiB block in a 20 MiB segment (plain) leaves 17 MiB free that cannot be
        // returned while the block lives.
        let a = alloc.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
        let err = alloc.allocate(62 * MIB, StreamId::DEFAULT).unwrap_err();
        let AllocError::OutOfMemory(report) = &err else {
            panic!("expected OOM, got {err}")
        };
        let s = alloc.stats();
        assert_eq!((s.num_alloc_retries, s.num_ooms), (1, 1));
        assert_eq!(report.requested, 62 * MIB);
        assert_eq!(report.allocated, 3 * MIB);
        let text = err.to_string();
        assert!(
            text.contains("tried to allocate 62.00 MiB (62.00 MiB requested)"),
            "{text}"
        );
        assert!(text.contains("3.00 MiB allocated"), "{text}");
        assert!(text.contains("64.00 MiB"), "{text}");
        // Plain: a 20 MiB segment; virtual memory: a growth of at least 20 MiB. The
        // free 17 MiB hold no whole chunk, so nothing can go back.
        assert_eq!(report.reserved, 20 * MIB, "{text}");
        assert_eq!(report.largest_free_block, 17 * MIB, "{text}");
        assert!(text.contains("largest free block 17.00 MiB"), "{text}");
        alloc.check_invariants().unwrap();
        alloc.free(a).unwrap();
        alloc.empty_cache().unwrap();
        assert_eq!(dev.used(), 0);
    }
}

/// The checks here can fail: a recount that disagrees is reported.
#[test]
fn recount_detects_a_mismatch() {
    let dev = Arc::new(TestBackend::builder().build());
    let alloc = CachingAllocator::new(dev, AllocConfig::default()).unwrap();
    let a = alloc.allocate(4096, StreamId::DEFAULT).unwrap();
    let stats = alloc.stats();
    let mut snap = alloc.snapshot();
    check_recount(&stats, &snap, 0).unwrap();
    snap[0].blocks[0].state = BlockState::Free;
    assert!(check_recount(&stats, &snap, 0).is_err());
    assert!(check_recount(&stats, &alloc.snapshot(), PAGE).is_err());
    alloc.free(a).unwrap();
}
