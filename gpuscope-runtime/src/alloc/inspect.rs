//! Looking at the allocator: snapshots, the out-of-memory report, and the invariant
//! check that tests (and curious users) run.

use std::collections::HashMap;

use crate::backend::{DeviceAddr, StreamId};

use super::block::{BlockState, NIL};
use super::oom::{LiveAllocation, OomCause, OutOfMemory};
use super::rounding::Pool;
use super::segment::SegmentMemory;
use super::snapshot::{BlockInfo, SegmentInfo};
use super::state::AllocState;
use super::stats::MemoryStats;

impl AllocState {
    pub(super) fn largest_free_block(&self) -> usize {
        self.slab
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Free)
            .map(|b| b.size)
            .max()
            .unwrap_or(0)
    }

    /// The `n` largest live allocations, largest first.
    pub fn largest_live(&self, n: usize) -> Vec<LiveAllocation> {
        let mut live: Vec<LiveAllocation> = self
            .slab
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Allocated)
            .map(|b| LiveAllocation {
                addr: DeviceAddr(b.addr),
                requested: b.requested,
                size: b.size,
                stream: b.stream,
            })
            .collect();
        live.sort_by(|a, b| b.size.cmp(&a.size).then(a.addr.cmp(&b.addr)));
        live.truncate(n);
        live
    }

    pub fn device_description(&self) -> String {
        let b = &self.backend;
        format!("{}:{} ({})", b.kind(), b.ordinal(), b.name())
    }

    pub(super) fn oom_report(
        &self,
        requested: usize,
        rounded: usize,
        pool: Pool,
        stream: StreamId,
        cause: OomCause,
    ) -> OutOfMemory {
        let info = self.backend.mem_info().ok();
        OutOfMemory {
            device: self.device_description(),
            requested,
            rounded,
            pool,
            stream,
            total_capacity: info.map_or(self.total_memory, |i| i.total),
            device_free: info.map_or(0, |i| i.free),
            allocated: self.stats.allocated_bytes.current() as usize,
            reserved: self.reserved(),
            largest_free_block: self.largest_free_block(),
            cause,
            largest_live: self.largest_live(5),
            config: self.config.to_string(),
            expandable: self.vmm,
        }
    }

    /// Every segment and its blocks, in address order.
    pub fn snapshot(&self) -> Vec<SegmentInfo> {
        let mut out: Vec<SegmentInfo> = self
            .segments
            .iter()
            .flatten()
            .map(|seg| {
                let mut blocks = Vec::new();
                let mut cur = seg.head;
                while cur != NIL {
                    let b = self.slab.get(cur);
                    blocks.push(BlockInfo {
                        addr: DeviceAddr(b.addr),
                        size: b.size,
                        requested: if b.state == BlockState::Allocated {
                            b.requested
                        } else {
                            0
                        },
                        state: b.state,
                        stream: b.stream,
                    });
                    cur = b.next;
                }
                SegmentInfo {
                    base: DeviceAddr(seg.base),
                    size: seg.size,
                    stream: seg.stream,
                    pool: seg.pool,
                    pages: match &seg.memory {
                        SegmentMemory::Device => 0,
                        SegmentMemory::Mapped { .. } => seg.size / self.page,
                    },
                    chunks: match &seg.memory {
                        SegmentMemory::Device => Vec::new(),
                        SegmentMemory::Mapped { chunks, .. } => chunks
                            .iter()
                            .filter_map(|&c| self.chunks.get(c as usize)?.as_ref())
                            .map(|c| c.size)
                            .collect(),
                    },
                    blocks,
                }
            })
            .collect();
        out.sort_by_key(|s| s.base);
        out
    }

    /// Bytes of physical chunks held outside any segment (left over from failed
    /// driver calls, given back with the next release).
    pub fn orphan_bytes(&self) -> usize {
        self.orphans.iter().map(|o| o.size).sum()
    }

    /// Checks every structural invariant and that the statistics equal a recount.
    pub fn validate(&self) -> Result<(), String> {
        let mut recount = MemoryStats::default();
        let mut in_index = vec![false; self.slab.blocks.len()];
        for (s, pools) in self.pools.iter().enumerate() {
            for (p, index) in pools.iter().enumerate() {
                let mut bytes = 0;
                let mut n = 0;
                for i in index.iter(&self.slab) {
                    let b = self.slab.get(i);
                    if b.state != BlockState::Free
                        || self.slot(b.stream) != s
                        || b.pool.index() != p
                    {
                        return Err(format!(
                            "block #{i} in free index ({s}, {p}) is {:?} of ({}, {:?})",
                            b.state, b.stream, b.pool
                        ));
                    }
                    if in_index[i as usize] {
                        return Err(format!("block #{i} is in a free index twice"));
                    }
                    in_index[i as usize] = true;
                    bytes += b.size;
                    n += 1;
                }
                if n != index.len() || bytes != index.bytes() {
                    return Err(format!(
                        "free index ({s}, {p}) counts {} blocks / {} bytes, holds {n} / {bytes}",
                        index.len(),
                        index.bytes()
                    ));
                }
            }
        }
        let mut seen_blocks = 0;
        let mut ranges = Vec::new();
        let mut registered = 0usize;
        let mut chunk_owner: HashMap<u32, usize> = HashMap::new();
        for (si, seg) in self.segments.iter().enumerate() {
            let Some(seg) = seg else { continue };
            ranges.push((seg.base, seg.size));
            recount.segment.add(seg.pool, 1);
            recount.reserved_bytes.add(seg.pool, seg.size);
            if let SegmentMemory::Mapped { chunks, arena } = &seg.memory {
                let mut bytes = 0;
                for &c in chunks {
                    let chunk = self
                        .chunks
                        .get(c as usize)
                        .and_then(Option::as_ref)
                        .ok_or(format!("segment {si}: chunk {c} does not exist"))?;
                    bytes += chunk.size;
                    if let Some(other) = chunk_owner.insert(c, si) {
                        return Err(format!("chunk {c} is mapped in segments {other} and {si}"));
                    }
                }
                if bytes != seg.size {
                    return Err(format!(
                        "segment {si}: chunks hold {bytes} bytes for {} bytes",
                        seg.size
                    ));
                }
                let a = self
                    .arenas
                    .get(*arena as usize)
                    .ok_or(format!("segment {si}: no arena {arena}"))?;
                if seg.base < a.base || seg.base + seg.size as u64 > a.end() {
                    return Err(format!("segment {si} lies outside its arena {arena}"));
                }
                if a.segments.get(&seg.base) != Some(&(si as u32)) {
                    return Err(format!("segment {si} is not registered in arena {arena}"));
                }
                registered += 1;
            }
            let (mut cur, mut prev, mut offset, mut prev_free) = (seg.head, NIL, 0usize, false);
            while cur != NIL {
                let b = self.slab.get(cur);
                seen_blocks += 1;
                if b.segment as usize != si || b.prev != prev || b.addr != seg.base + offset as u64
                {
                    return Err(format!(
                        "block #{cur} of segment {si} is misplaced (addr {:#x}, expected {:#x})",
                        b.addr,
                        seg.base + offset as u64
                    ));
                }
                // Streams share segments when they share pools (`sharing`).
                if (b.stream != seg.stream && !self.share)
                    || b.pool != seg.pool
                    || b.size == 0
                    || b.size % 512 != 0
                {
                    return Err(format!(
                        "block #{cur}: stream/pool/size disagree with segment {si}"
                    ));
                }
                let free = b.state == BlockState::Free;
                // Free neighbours stay apart only while one holds memory of another stream
                // that was still at work when they met (`sharing`).
                if free && prev_free && !(self.share && self.slab.get(prev).stream != b.stream) {
                    return Err(format!(
                        "blocks before #{cur} and #{cur} are both free: not merged"
                    ));
                }
                let wild = seg
                    .arena()
                    .is_some_and(|a| self.arenas.get(a as usize).is_some_and(|a| a.wild == cur));
                if wild && in_index[cur as usize] {
                    return Err(format!("block #{cur} is a wilderness and in a free index"));
                }
                if free != (in_index[cur as usize] || wild) {
                    return Err(format!(
                        "block #{cur} is {:?} but in_index={} wilderness={wild}",
                        b.state, in_index[cur as usize]
                    ));
                }
                let uses = self.stream_uses.get(&cur);
                if b.used_elsewhere != uses.is_some() {
                    return Err(format!(
                        "block #{cur}: used_elsewhere={} but stream uses {:?}",
                        b.used_elsewhere, uses
                    ));
                }
                let waiting = uses.map_or(0, |u| u.pending_events);
                if (b.state == BlockState::PendingFree) != (waiting > 0) {
                    return Err(format!(
                        "block #{cur} is {:?} and waits for {waiting} events",
                        b.state
                    ));
                }
                match b.state {
                    BlockState::Allocated => {
                        recount.allocation.add(b.pool, 1);
                        recount.allocated_bytes.add(b.pool, b.size);
                        recount.requested_bytes.add(b.pool, b.requested);
                        recount.active.add(b.pool, 1);
                        recount.active_bytes.add(b.pool, b.size);
                    }
                    BlockState::PendingFree => {
                        recount.active.add(b.pool, 1);
                        recount.active_bytes.add(b.pool, b.size);
                    }
                    BlockState::Free if b.is_split() => {
                        recount.inactive_split.add(b.pool, 1);
                        recount.inactive_split_bytes.add(b.pool, b.size);
                    }
                    BlockState::Free => {}
                    BlockState::Vacant => {
                        return Err(format!("vacant block #{cur} linked in segment {si}"));
                    }
                }
                prev_free = free;
                offset += b.size;
                prev = cur;
                cur = b.next;
            }
            if offset != seg.size {
                return Err(format!(
                    "segment {si}: blocks cover {offset} bytes of {}",
                    seg.size
                ));
            }
        }
        if let Some(stale) = self
            .stream_uses
            .keys()
            .find(|&&i| self.slab.get(i).state == BlockState::Vacant)
        {
            return Err(format!("vacant block #{stale} has stream uses"));
        }
        let live = self.slab.live_indices().count();
        if live != seen_blocks {
            return Err(format!(
                "{live} blocks in the slab, {seen_blocks} linked in segments"
            ));
        }
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            if w[0].0 + w[0].1 as u64 > w[1].0 {
                return Err(format!(
                    "segments at {:#x} and {:#x} overlap",
                    w[0].0, w[1].0
                ));
            }
        }
        let live_chunks = self.chunks.iter().filter(|c| c.is_some()).count();
        if live_chunks != chunk_owner.len() {
            return Err(format!(
                "{live_chunks} chunks exist, {} are mapped in segments",
                chunk_owner.len()
            ));
        }
        let in_arenas: usize = self.arenas.iter().map(|a| a.segments.len()).sum();
        if in_arenas != registered {
            return Err(format!(
                "arenas list {in_arenas} segments, {registered} exist"
            ));
        }
        for (ai, a) in self.arenas.iter().enumerate() {
            self.check_arena(ai, a)?;
            let mut prev_end = 0u64;
            for (&base, &si) in &a.segments {
                let seg = self
                    .segments
                    .get(si as usize)
                    .and_then(Option::as_ref)
                    .ok_or(format!("arena {ai}: missing segment {si}"))?;
                if base == prev_end {
                    return Err(format!(
                        "arena {ai}: segments touch at {base:#x} but are not joined"
                    ));
                }
                prev_end = seg.base + seg.size as u64;
            }
        }
        let held = self.orphan_bytes();
        // Every stat, all pools together and each pool; orphan chunks are reserved but
        // in no pool.
        let kept_stats = self.stats.snapshot();
        for ((name, counted), (_, kept)) in recount
            .named_arrays()
            .into_iter()
            .zip(kept_stats.named_arrays())
        {
            let extra = if name == "reserved_bytes" {
                held as i64
            } else {
                0
            };
            for (pool, c, k) in [
                ("all", counted.all.current + extra, kept.all.current),
                (
                    "small_pool",
                    counted.small_pool.current,
                    kept.small_pool.current,
                ),
                (
                    "large_pool",
                    counted.large_pool.current,
                    kept.large_pool.current,
                ),
            ] {
                if c != k {
                    return Err(format!("{name}.{pool}: recount {c}, statistics say {k}"));
                }
            }
        }
        Ok(())
    }

    /// An arena's top is the end of its highest segment, and its wilderness is the free
    /// block at the top, if there is one.
    fn check_arena(&self, ai: usize, a: &super::segment::Arena) -> Result<(), String> {
        let top_seg = a
            .segments
            .values()
            .next_back()
            .map(|&si| {
                self.segments
                    .get(si as usize)
                    .and_then(Option::as_ref)
                    .map(|s| (si, s))
                    .ok_or(format!("arena {ai}: missing segment {si}"))
            })
            .transpose()?;
        let want_top = top_seg.map_or(a.base, |(_, s)| s.end());
        let mapped: usize = a
            .segments
            .values()
            .filter_map(|&si| self.segments.get(si as usize)?.as_ref())
            .map(|s| s.size)
            .sum();
        if mapped != a.mapped {
            return Err(format!(
                "arena {ai}: counts {} bytes mapped, its segments hold {mapped}",
                a.mapped
            ));
        }
        if a.top != want_top {
            return Err(format!(
                "arena {ai}: top {:#x}, its highest segment ends at {want_top:#x}",
                a.top
            ));
        }
        let tail = top_seg.map(|(_, s)| {
            let mut t = s.head;
            while self.slab.get(t).next != NIL {
                t = self.slab.get(t).next;
            }
            t
        });
        let free_tail = tail.filter(|&t| self.slab.get(t).state == BlockState::Free);
        let want_wild = free_tail.unwrap_or(NIL);
        if a.wild != want_wild {
            return Err(format!(
                "arena {ai}: wilderness #{}, but the free block at its top is #{}",
                a.wild, want_wild
            ));
        }
        Ok(())
    }
}
