//! The allocator under test, the model of what it must do, and the operations applied
//! to both (`allocate.rs`: allocate and free, checked; `checks.rs`: what is checked
//! after every operation).

mod allocate;
mod checks;

use super::ops::Op;
use super::recount::*;
use super::*;

pub(crate) struct Live {
    pub(crate) block: RawBlock,
    /// Other streams the block was recorded on.
    pub(crate) uses: Vec<StreamId>,
    /// The pattern written into it (host backend).
    pub(crate) pattern: Option<Vec<u8>>,
}

/// A block freed after use on other streams.
pub(crate) struct PendingRec {
    pub(crate) addr: u64,
    pub(crate) size: usize,
    /// Streams the test has not synchronised since the free.
    pub(crate) unsynced: Vec<StreamId>,
    /// Whether the allocator synchronised some stream itself since the free (then the
    /// block may have been released; which stream it synchronised is not visible).
    pub(crate) allocator_synced: bool,
    /// The other streams the block was used on.
    pub(crate) uses: Vec<StreamId>,
    /// Whether an allocation has come since the free: it asked the streams (an idle
    /// one gives the block back, a busy one gets an event), so work queued on them
    /// later no longer delays the block.
    pub(crate) sealed: bool,
}

/// Where the allocator runs.
pub(crate) enum Device {
    Test(Arc<TestBackend>),
    Host(Arc<HostBackend>),
}

pub(crate) struct Harness {
    /// Not dropped after a panic (see `run`): its state may be broken, and its drop
    /// would panic again.
    pub(crate) alloc: ManuallyDrop<CachingAllocator>,
    /// A step panicked.
    pub(crate) panicked: bool,
    pub(crate) device: Device,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) config: AllocConfig,
    pub(crate) vmm: bool,
    pub(crate) capacity: Option<usize>,
    /// The cap set with `set_memory_limit`.
    pub(crate) limit: Option<usize>,
    pub(crate) streams: [StreamId; 3],
    pub(crate) live: Vec<Live>,
    pub(crate) pending: Vec<PendingRec>,
    pub(crate) next_id: u64,
    /// Streams the test synchronised.
    pub(crate) my_syncs: u64,
    /// Allocator synchronisations seen so far (per stream plus all streams plus fence
    /// waits).
    pub(crate) allocator_syncs: u64,
    /// Streams with a fence the test recorded and knows to be outstanding (not
    /// synchronised or completed since, and no allocator wait since).
    pub(crate) fence_open: [bool; 3],
    /// Highest current values seen since the last peak reset, by flat stat name.
    pub(crate) seen_max: BTreeMap<String, i64>,
    pub(crate) ooms: u64,
    pub(crate) step: usize,
}

/// Waits the allocator made that may have completed events: stream syncs, waits for
/// all events, fence waits.
pub(crate) fn allocator_waits(s: &MemoryStats) -> u64 {
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

impl Harness {
    pub(crate) fn on_test_backend(vmm: bool, extra: &str, capacity: Option<usize>) -> Harness {
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

    pub(crate) fn on_host(extra: &str) -> Harness {
        let config: AllocConfig = extra.parse().unwrap();
        let dev = Arc::new(HostBackend::new());
        Self::new(Device::Host(dev.clone()), dev, config, false, None)
    }

    pub(crate) fn new(
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

    pub(crate) fn test_dev(&self) -> Option<&TestBackend> {
        match &self.device {
            Device::Test(d) => Some(d),
            Device::Host(_) => None,
        }
    }

    pub(crate) fn manual_events(&self) -> bool {
        matches!(self.device, Device::Test(_))
    }

    pub(crate) fn reset_seen(&mut self) {
        self.seen_max = all_stats(&self.alloc.stats())
            .into_iter()
            .map(|(k, s)| (k, s.current))
            .collect();
    }

    // ------------------------------------------------------------------ ops

    /// Runs `ops`, checking after each. A panic (the test backend's checks panic) fails
    /// the case like any other breach, so that proptest shrinks it.
    pub(crate) fn run(&mut self, ops: &[Op]) -> R {
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

    pub(crate) fn run_checked(&mut self, ops: &[Op]) -> R {
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

    pub(crate) fn apply(&mut self, op: &Op) -> R {
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
    pub(crate) fn launch(&self, block: &RawBlock, stream: StreamId) -> R {
        if let Some(dev) = self.test_dev() {
            dev.launch(stream, block.addr(), block.size())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        Ok(())
    }

    pub(crate) fn record_fence(&mut self, stream_no: u8) -> R {
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
        if recorded {
            // The fence's event is queued work on the stream.
            self.note_launch(stream);
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
    pub(crate) fn work_done(&mut self, stream_no: u8) {
        let stream = self.streams[stream_no as usize];
        self.fence_open[stream_no as usize] = false;
        for p in &mut self.pending {
            p.unsynced.retain(|&x| x != stream);
        }
    }

    /// Work was queued on `stream`: the frees not sealed yet that wait for it now
    /// wait for that work too (test backend; on the host, work is done when queued).
    pub(crate) fn note_launch(&mut self, stream: StreamId) {
        if self.test_dev().is_none() {
            return;
        }
        for p in &mut self.pending {
            if !p.sealed && p.uses.contains(&stream) && !p.unsynced.contains(&stream) {
                p.unsynced.push(stream);
            }
        }
    }

    pub(crate) fn record(&mut self, live_index: usize, stream_no: u8) -> R {
        let stream = self.streams[stream_no as usize];
        self.launch(&self.live[live_index].block, stream)?;
        self.note_launch(stream);
        let l = &mut self.live[live_index];
        self.alloc
            .record_stream(&l.block, stream)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        if stream != l.block.stream() && !l.uses.contains(&stream) {
            l.uses.push(stream);
        }
        Ok(())
    }

    pub(crate) fn sync(&mut self, stream_no: u8) {
        let stream = self.streams[stream_no as usize];
        self.backend.synchronize_stream(stream).unwrap();
        self.my_syncs += 1;
        self.work_done(stream_no);
    }

    pub(crate) fn drain(&mut self) -> R {
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
}

/// A pattern of its own for block `id`: its id at both ends, a byte of its own between.
pub(crate) fn pattern(id: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(id % 251) as u8 + 1; len];
    let tag = id.to_le_bytes();
    let n = tag.len().min(len);
    v[..n].copy_from_slice(&tag[..n]);
    let start = len.saturating_sub(8).max(n);
    v[start..].copy_from_slice(&tag[..len - start]);
    v
}
