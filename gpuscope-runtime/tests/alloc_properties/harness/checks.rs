//! The checks after every operation: the snapshot, the live blocks, the statistics,
//! the backend's view, pending frees, and the blocks' contents (host backend).

use super::*;

impl Harness {
    pub(crate) fn verify_pattern(&self, block: &RawBlock, pat: &[u8]) -> R {
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
    pub(crate) fn verify_windows(&self, block: &RawBlock, pat: &[u8]) -> R {
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

    /// What must hold right after `empty_cache` or an out-of-memory error: no pending
    /// frees, and nothing the device could take back is still cached.
    pub(crate) fn check_cache_released(&self, after: &str) -> R {
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

    pub(crate) fn check(&mut self) -> R {
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

    pub(crate) fn check_snapshot(&self, snap: &[SegmentInfo]) -> R {
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
            let mut prev_stream = None;
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
                // Sharing streams, free neighbours of two streams may stay apart.
                let apart = self.vmm
                    && self.config.share_across_streams
                    && prev_stream.is_some_and(|s| s != b.stream);
                ensure!(
                    !(free && prev_free) || apart,
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
                prev_stream = Some(b.stream);
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

    pub(crate) fn check_live(&self, snap: &[SegmentInfo]) -> R {
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
            // Streams that share pools share segments (virtual memory's default).
            let shared = self.vmm && self.config.share_across_streams;
            ensure!(
                shared || seg.stream == l.block.stream(),
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

    pub(crate) fn check_stat_history(&mut self, stats: &MemoryStats) -> R {
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

    pub(crate) fn check_backend(
        &self,
        stats: &MemoryStats,
        snap: &[SegmentInfo],
        held: usize,
    ) -> R {
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

    pub(crate) fn check_pending(&mut self, stats: &MemoryStats, snap: &[SegmentInfo]) -> R {
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
