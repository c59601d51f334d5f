//! Allocate and free through the allocator under test, with what each must do checked
//! against the model.

use super::*;

impl Harness {
    pub(crate) fn allocate(&mut self, size: usize, stream: StreamId) -> R {
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
        for p in &mut self.pending {
            p.sealed = true;
        }
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

    pub(crate) fn free(&mut self, l: Live) -> R {
        if let Some(pat) = &l.pattern {
            self.verify_pattern(&l.block, pat)?;
        }
        let addr = l.block.addr().0;
        let snap = self.alloc.snapshot();
        let size = locate(&snap).get(&addr).map(|(b, _)| b.size).unwrap_or(0);
        self.launch(&l.block, l.block.stream())?;
        self.note_launch(l.block.stream());
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
                // The streams with work still queued: an idle one gives the block back
                // at the next allocation.
                unsynced: match self.test_dev() {
                    Some(dev) => l
                        .uses
                        .iter()
                        .copied()
                        .filter(|&u| !dev.is_idle(u))
                        .collect(),
                    None => Vec::new(),
                },
                allocator_synced: false,
                uses: l.uses,
                sealed: false,
            });
        }
        Ok(())
    }
}
