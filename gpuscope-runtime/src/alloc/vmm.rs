//! Virtual memory: arenas, growth at the top, the wilderness, and chunks going back.
//!
//! Each pool (each stream's, or one for every stream with `share_across_streams:True`)
//! reserves an address arena the first time it grows (the device's
//! capacity of address space, so it never runs out in practice; a smaller one if the
//! driver refuses). Memory is mapped from the arena's base upwards; the free block that
//! ends at the top of the mapped memory is the arena's *wilderness*:
//!
//! - `allocate` takes the best-fitting free block of the stream's pool, and the wilderness
//!   only when none fits; when the wilderness is too small (and no hole that memory
//!   given back left below a top holds the request for less: `holes`), the arena grows: one
//!   `cuMemCreate` of what is missing, rounded up to whole 20 MiB pages for the large pool
//!   and 2 MiB pages for the small one (the pages of PyTorch's expandable segments; while
//!   nothing has been freed in a large arena since its last growth, at least 5/4 of that
//!   growth, up to 1/16 of the arena); one `cuMemMap` and one `cuMemSetAccess` at the top.
//!   A growth larger than 1/160 of the device is mapped in chunks of at most that, and
//!   past a quarter of the device in single pages (`growth::chunk_limit`; a
//!   `cuMemCreate` and a `cuMemMap` each, one `cuMemSetAccess` for all), so that under
//!   memory pressure the memory later freed inside it can go back chunk by chunk. With shared pools, the arena grown is the one whose wilderness needs
//!   the least, passing over any whose wilderness holds another stream's memory still in
//!   use (a new arena if none is left): growing above it would leave that stream's free
//!   top unable to grow for its own work.
//! - Nothing is unmapped or released on `free`.
//!
//! Because the wilderness is used last, a workload that repeats makes the same choices
//! in every pass after the first: a warm pass sees the same free blocks as the first
//! pass did at each step, plus a wilderness that already holds everything the first
//! pass grew, so it never grows, maps or waits (the replay tests check it on every
//! trace in `tests/data/traces`).
//!
//! Chunks go back to the device only whole, when they lie inside a free block, on
//! `empty_cache`, under a `garbage_collection_threshold`, or when the device or the cap
//! refuses a growth (`release`); before that the allocator waits until no queued work
//! uses the memory (`fences`), preferring memory that needs no wait (`memory`). The
//! holes they leave below a top are mapped again by later growths (`holes`).

use crate::backend::{BackendError, DeviceAddr, PhysHandle, StreamId};

use super::block::{BlockState, NIL};
use super::growth::{chunk_limit, growth_size};
use super::memory::GrowError;
use super::rounding::Pool;
use super::segment::{Arena, PhysChunk, Segment, SegmentMemory};
use super::state::AllocState;

impl AllocState {
    /// The arenas of `stream`'s `pool` (every stream's, when they share), oldest first.
    #[inline]
    pub(super) fn arenas_of(&self, stream: StreamId, pool: Pool) -> &[u32] {
        self.arena_lists
            .get(self.slot(stream))
            .map_or(&[][..], |l| &l[pool.index()][..])
    }

    /// The smallest wilderness of `stream`'s `pool` that holds `rounded` bytes and may
    /// serve `stream` (`sharing`).
    #[inline]
    pub(super) fn find_wild(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Option<u32> {
        let mut best: Option<(usize, u32)> = None;
        for i in 0..self.arenas_of(stream, pool).len() {
            let w = self.arenas[self.arenas_of(stream, pool)[i] as usize].wild;
            if w != NIL {
                let size = self.slab.get(w).size;
                if size >= rounded
                    && best.is_none_or(|(s, _)| size < s)
                    && self.clean_for(w, stream)
                {
                    best = Some((size, w));
                }
            }
        }
        best.map(|(_, w)| w)
    }

    /// Grows `stream`'s `pool` so that its wilderness holds `rounded` bytes: new chunks
    /// mapped at the top of an arena (one, unless the growth is larger than
    /// `growth::chunk_limit`). Returns the wilderness block.
    pub(super) fn grow_mapped(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Result<u32, GrowError> {
        let page = self.page;
        let top = self.growable_arena(stream, pool, rounded);
        // A hole that memory given back left below a top, when filling it maps no more
        // than growing the top would (`holes`).
        if let Some(hole) = self.find_hole(stream, pool, rounded) {
            let at_top = top.map_or(rounded, |(_, have)| rounded - have);
            if hole.need() <= at_top.div_ceil(page) * page {
                let block = self.fill_hole(hole, stream, pool)?;
                debug_assert!(
                    self.slab.get(block).size >= rounded,
                    "a filled hole holds the request"
                );
                return Ok(block);
            }
        }
        let (arena, have) = match top {
            Some(found) => found,
            None => (self.new_arena(stream, pool, rounded)?, 0),
        };
        // Callers look for cached memory first, after anything that merges blocks.
        debug_assert!(
            have < rounded,
            "growing a wilderness that holds the request"
        );
        let need = (rounded - have).div_ceil(page) * page;
        let (room, step) = {
            let a = &self.arenas[arena as usize];
            (
                a.room(),
                growth_size(pool, rounded - have, a.mapped, a.growth_run, page),
            )
        };
        debug_assert!(step >= need, "a growth maps at least what is missing");
        let preferred = step.min(room);
        // The preferred size where the cap leaves room for it, else what is needed.
        let size = if self.check_limit(preferred).is_ok() {
            preferred
        } else {
            need
        };
        self.check_limit(size)?;
        // In chunks of at most `largest` (single pages past a quarter of the device):
        // memory freed later goes back under pressure chunk by chunk
        // (`growth::chunk_limit`).
        let capacity = self.limit().unwrap_or(self.total_memory);
        let reserved_after = self.reserved() + size;
        let largest = chunk_limit(
            capacity,
            self.config.max_chunk_size,
            page,
            reserved_after,
            self.config.page_chunk_threshold,
        );
        let (wild, size) = self.map_growth(arena, stream, size, need, largest)?;
        if pool == Pool::Large {
            self.arenas[arena as usize].growth_run = Some(size);
        }
        Ok(wild)
    }

    /// Maps `size` bytes at the top of `arena` for `stream` (or only `need`, when the
    /// device is short of `size`), in chunks of at most `largest` (`map_chunks`), and
    /// adds them to the arena. Returns the wilderness and the bytes mapped.
    fn map_growth(
        &mut self,
        arena: u32,
        stream: StreamId,
        size: usize,
        need: usize,
        largest: usize,
    ) -> Result<(u32, usize), BackendError> {
        let top = self.arenas[arena as usize].top;
        let pieces = self.map_chunks(top, size, need, largest)?;
        let mut wild = NIL;
        let mut done = 0;
        for (handle, piece) in pieces {
            let chunk = self.insert_chunk(PhysChunk {
                handle,
                size: piece,
            });
            wild = self.extend_arena(arena, chunk, piece, stream);
            done += piece;
        }
        Ok((wild, done))
    }

    /// Maps `size` bytes (or only `need`, when the device is short of `size`) at `at`, a
    /// range of an arena's reservation that nothing maps, in chunks of at most `largest`:
    /// a `cuMemCreate` and a `cuMemMap` for each, then one `cuMemSetAccess` for them
    /// all. Returns the chunks, in address order. On failure nothing stays: what was
    /// mapped is unmapped and released (no work has used it).
    pub(super) fn map_chunks(
        &mut self,
        at: u64,
        mut size: usize,
        need: usize,
        largest: usize,
    ) -> Result<Vec<(PhysHandle, usize)>, BackendError> {
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        let mut pieces: Vec<(PhysHandle, usize)> = Vec::new();
        let mut done = 0;
        let mut failure = None;
        while done < size {
            let piece = (size - done).min(largest);
            let handle = match self.create_chunk(piece) {
                Ok(h) => h,
                // The device is short of the preferred growth: what is missing will do.
                Err(e) if e.is_out_of_memory() && size > need => {
                    size = need.max(done);
                    continue;
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            };
            self.stats.other.num_device_map += 1;
            // SAFETY: a new chunk, and a range of an arena's reservation that nothing
            // maps (the caller's).
            if let Err(e) = unsafe { vm.map(DeviceAddr(at + done as u64), piece, handle) } {
                self.give_back_chunk(handle, piece, None);
                failure = Some(e);
                break;
            }
            pieces.push((handle, piece));
            done += piece;
        }
        if failure.is_none() {
            self.stats.other.num_set_access += 1;
            // SAFETY: `done` bytes from `at` were mapped just above, side by side.
            failure = unsafe { vm.set_access(DeviceAddr(at), done) }.err();
        }
        if let Some(e) = failure {
            let mut addr = at;
            for (handle, piece) in pieces {
                // Never made accessible, so nothing used it.
                self.give_back_chunk(handle, piece, Some(addr));
                addr += piece as u64;
            }
            return Err(e);
        }
        Ok(pieces)
    }

    /// The arena of `stream`'s `pool` that needs the least growth to hold `rounded` (the
    /// largest wilderness that may serve `stream`, the newest on a tie) among those with
    /// the address space for it, with its wilderness's size. An arena whose wilderness
    /// holds memory of another stream still at work is passed over: growing above it
    /// would leave that stream's free top unable to grow when its own work needs it
    /// (it grows elsewhere, in a new arena if need be).
    fn growable_arena(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Option<(u32, usize)> {
        let page = self.page;
        let mut best: Option<(u32, usize)> = None;
        for i in (0..self.arenas_of(stream, pool).len()).rev() {
            let a = self.arenas_of(stream, pool)[i];
            let wild = self.arenas[a as usize].wild;
            let have = if wild == NIL {
                0
            } else if self.clean_for(wild, stream) {
                self.slab.get(wild).size
            } else {
                continue;
            };
            let need = rounded.saturating_sub(have).div_ceil(page) * page;
            if self.arenas[a as usize].room() >= need && best.is_none_or(|(_, h)| have > h) {
                best = Some((a, have));
            }
        }
        best
    }

    /// Reserves a new arena for `stream`'s `pool` that holds at least `at_least` bytes:
    /// the device's capacity of address space, or less if the driver refuses that.
    fn new_arena(
        &mut self,
        stream: StreamId,
        pool: Pool,
        at_least: usize,
    ) -> Result<u32, GrowError> {
        let page = self.page;
        let least = at_least.div_ceil(page) * page;
        let mut size = self.total_memory.max(least).div_ceil(page) * page;
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        let base = loop {
            self.stats.other.num_address_reserve += 1;
            match vm.reserve_address(size) {
                Ok(base) => break base,
                Err(e) if size > least => {
                    tracing::debug!(target: "gpuscope::alloc", "reserving {size} bytes of address space failed ({e}); trying less");
                    size = (size / 2).max(least).div_ceil(page) * page;
                }
                Err(e) => return Err(e.into()),
            }
        };
        self.arenas.push(Arena::new(base.0, size, stream, pool));
        let index = (self.arenas.len() - 1) as u32;
        let slot = self.slot(stream);
        if self.arena_lists.len() <= slot {
            self.arena_lists.resize_with(slot + 1, Default::default);
        }
        self.arena_lists[slot][pool.index()].push(index);
        Ok(index)
    }

    /// One `cuMemCreate` of `size` bytes, counted when it succeeds (as PyTorch counts
    /// device allocations).
    fn create_chunk(&mut self, size: usize) -> Result<PhysHandle, BackendError> {
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        let handle = vm.create_chunk(size)?;
        self.stats.other.num_device_alloc += 1;
        Ok(handle)
    }

    pub(super) fn insert_chunk(&mut self, chunk: PhysChunk) -> u32 {
        match self.vacant_chunks.pop() {
            Some(i) => {
                self.chunks[i as usize] = Some(chunk);
                i
            }
            None => {
                self.chunks.push(Some(chunk));
                (self.chunks.len() - 1) as u32
            }
        }
    }

    /// Adds chunk `chunk` (`size` bytes, mapped at the arena's top) to the arena for
    /// `stream`: the segment at the top grows (or a new one starts after a hole) and the
    /// new memory joins the wilderness (unless it holds memory of another stream still
    /// at work: then the new memory is the wilderness). Returns the wilderness.
    fn extend_arena(&mut self, arena: u32, chunk: u32, size: usize, stream: StreamId) -> u32 {
        let (top, pool) = {
            let a = &self.arenas[arena as usize];
            (a.top, a.pool)
        };
        let top_seg = self
            .top_segment(arena)
            .filter(|&s| self.segment(s).end() == top);
        self.arenas[arena as usize].top = top + size as u64;
        self.arenas[arena as usize].mapped += size;
        self.stats.other.reserved_bytes.add(pool, size);
        let Some(seg) = top_seg else {
            let block = self.add_segment(
                top,
                size,
                stream,
                pool,
                SegmentMemory::Mapped {
                    chunks: vec![chunk],
                    arena,
                },
            );
            debug_assert_eq!(self.arenas[arena as usize].wild, block);
            return block;
        };
        let old_size = {
            let s = self.segments[seg as usize]
                .as_mut()
                .expect("segment exists");
            let old = s.size;
            s.size += size;
            if let SegmentMemory::Mapped { chunks, .. } = &mut s.memory {
                chunks.push(chunk);
            }
            old
        };
        self.resize_oversize(pool, old_size, old_size + size);
        // The wilderness grows (`growable_arena` passes over a top of another stream's
        // memory still in use; should one get here, it stays out of the new wilderness).
        self.free_after_tail(seg, top, size, stream, pool)
    }

    /// Makes `size` bytes just mapped at `at`, the end of segment `seg` (which the caller
    /// grew to cover them), free memory: the segment's free tail grows when it may serve
    /// `stream`, else a free block of their own follows it (memory another stream may
    /// still use is never handed out with it). Returns the free block that ends there.
    pub(super) fn free_after_tail(
        &mut self,
        seg: u32,
        at: u64,
        size: usize,
        stream: StreamId,
        pool: Pool,
    ) -> u32 {
        let tail = self.tail_block(seg);
        let tail_free = self.slab.get(tail).state == BlockState::Free;
        if tail_free && self.is_clean_for(tail, stream) {
            self.unindex_free(tail);
            self.slab.get_mut(tail).size += size;
            self.index_free(tail);
            return tail;
        }
        if tail_free {
            self.unindex_free(tail);
        }
        let block = self.slab.insert(at, size, seg, stream, pool);
        self.slab.get_mut(block).prev = tail;
        self.slab.get_mut(tail).next = block;
        if tail_free {
            self.index_free(tail);
        }
        self.index_free(block);
        block
    }

    /// The segment of arena `arena` with the highest base, if any.
    pub(super) fn top_segment(&self, arena: u32) -> Option<u32> {
        self.arenas[arena as usize]
            .segments
            .values()
            .next_back()
            .copied()
    }

    pub(super) fn segment(&self, seg: u32) -> &Segment {
        self.segments[seg as usize]
            .as_ref()
            .expect("segment exists")
    }

    /// The last block of segment `seg`.
    pub(super) fn tail_block(&self, seg: u32) -> u32 {
        let mut cur = self.segment(seg).head;
        loop {
            let next = self.slab.get(cur).next;
            if next == NIL {
                return cur;
            }
            cur = next;
        }
    }

    /// The arena whose wilderness free block `index` would be (it is the last block of a
    /// mapped segment that ends at its arena's top).
    #[inline(always)]
    fn wild_arena(&self, index: u32) -> Option<u32> {
        let b = self.slab.get(index);
        if b.next != NIL {
            return None;
        }
        let seg = self.segments[b.segment as usize].as_ref()?;
        let arena = seg.arena()?;
        (seg.end() == self.arenas[arena as usize].top).then_some(arena)
    }

    /// Puts free block `index` where free blocks go: its arena's wilderness when it is
    /// the top block of its arena, else its pool's free index. Counts it as an inactive
    /// split when it is one.
    #[inline]
    pub(super) fn index_free(&mut self, index: u32) {
        let b = self.slab.get(index);
        let (stream, pool, size, split) = (b.stream, b.pool, b.size, b.is_split());
        if split {
            self.stats.inactive_split.add(pool, 1);
            self.stats.inactive_split_bytes.add(pool, size);
        }
        self.place_free(index, stream, pool);
    }

    /// [`Self::index_free`] without the inactive-split statistics (the hot paths count
    /// them once per operation, net, as PyTorch does).
    #[inline(always)]
    pub(super) fn place_free(&mut self, index: u32, stream: StreamId, pool: Pool) {
        if self.vmm {
            if let Some(a) = self.wild_arena(index) {
                self.arenas[a as usize].wild = index;
                return;
            }
        }
        let slot = self.slot(stream);
        self.pools[slot][pool.index()].insert(&mut self.slab, index);
    }

    /// Takes free block `index` out of its free index or wilderness, uncounting it as an
    /// inactive split.
    #[inline]
    pub(super) fn unindex_free(&mut self, index: u32) {
        let b = self.slab.get(index);
        let (stream, pool, size, split) = (b.stream, b.pool, b.size, b.is_split());
        if split {
            self.stats.inactive_split.sub(pool, 1);
            self.stats.inactive_split_bytes.sub(pool, size);
        }
        self.unplace_free(index, stream, pool);
    }

    /// [`Self::unindex_free`] without the inactive-split statistics.
    #[inline(always)]
    pub(super) fn unplace_free(&mut self, index: u32, stream: StreamId, pool: Pool) {
        // The wilderness is the last block of its segment: any other goes straight on.
        if self.vmm && self.slab.get(index).next == NIL {
            let seg = self.slab.get(index).segment;
            if let Some(a) = self.segments[seg as usize]
                .as_ref()
                .and_then(Segment::arena)
            {
                if self.arenas[a as usize].wild == index {
                    self.arenas[a as usize].wild = NIL;
                    return;
                }
            }
        }
        let slot = self.slot(stream);
        self.pools[slot][pool.index()].remove(&mut self.slab, index);
    }

    /// After the top of `arena` moved: the free block at the new top becomes the
    /// wilderness (out of the free index).
    pub(super) fn refresh_wild(&mut self, arena: u32) {
        let a = &self.arenas[arena as usize];
        let (old, stream, pool) = (a.wild, a.stream, a.pool);
        let want = self
            .top_segment(arena)
            .map(|s| self.tail_block(s))
            .filter(|&t| self.slab.get(t).state == BlockState::Free && self.wild_arena(t).is_some())
            .unwrap_or(NIL);
        if old == want {
            return;
        }
        self.arenas[arena as usize].wild = NIL;
        if old != NIL && self.slab.get(old).state == BlockState::Free {
            self.place_free(old, stream, pool);
        }
        if want != NIL {
            let slot = self.slot(stream);
            self.pools[slot][pool.index()].remove(&mut self.slab, want);
            self.arenas[arena as usize].wild = want;
        }
    }
}
