//! `Run`: an allocator on a failing device, with what the test knows about it, and
//! the checks after each step and each failure.

use super::recount::check_recount;
use super::*;

/// An allocator on a failing device, with what the test knows about it.
pub(crate) struct Run {
    pub(crate) alloc: CachingAllocator,
    pub(crate) dev: Arc<TestBackend>,
    pub(crate) config: AllocConfig,
    pub(crate) vmm: bool,
    pub(crate) capacity: usize,
    pub(crate) streams: Vec<StreamId>,
    pub(crate) live: HashMap<u64, RawBlock>,
    pub(crate) failures: u64,
    pub(crate) retried_successes: u64,
    pub(crate) drains: u64,
    /// Drain everything every this many failures.
    pub(crate) drain_every: u64,
}

impl Run {
    pub(crate) fn new(vmm: bool, fail_every: u64, capacity: usize, conf: &str) -> Run {
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

    pub(crate) fn what(&self) -> String {
        format!(
            "{} path, config {}",
            if self.vmm { "virtual memory" } else { "plain" },
            self.config
        )
    }

    /// Allocates as `id`; on failure checks the report and the allocator's state.
    pub(crate) fn allocate(&mut self, id: u64, size: usize, stream: StreamId) {
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

    pub(crate) fn free(&mut self, id: u64) {
        if let Some(b) = self.live.remove(&id) {
            self.alloc.free(b).unwrap();
        }
    }

    pub(crate) fn check_report(
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
    pub(crate) fn check_state(&self, when: &str) {
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
    pub(crate) fn check_released(&self) {
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
    pub(crate) fn drain_and_check_zero(&mut self) {
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
        for (name, a) in s.named_arrays() {
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

    pub(crate) fn finish(mut self) -> (u64, u64) {
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
