//! Virtual memory: arenas, growth at the top, the wilderness, and chunks going back.
//!
//! Each (stream, pool) reserves an address arena the first time it grows (the device's
//! capacity of address space, so it never runs out in practice; a smaller one if the
//! driver refuses). Memory is mapped from the arena's base upwards; the free block that
//! ends at the top of the mapped memory is the arena's *wilderness*:
//!
//! - `allocate` takes the best-fitting free block of the stream's pool, and the
//!   wilderness only when none fits; when the wilderness is too small, the arena grows:
//!   one `cuMemCreate` of what is missing, at least 20 MiB for the large pool (PyTorch's
//!   large segment size) and, for the small pool, half what the arena holds, from 2 to
//!   8 MiB; one `cuMemMap` and one `cuMemSetAccess` at the top.
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
//! refuses a growth; before that the allocator waits until no queued work uses the
//! memory (`fences`), preferring memory that needs no wait.

use crate::backend::{BackendError, DeviceAddr, PhysHandle, StreamId};

use super::block::{BlockState, NIL};
use super::fences::Cover;
use super::memory::GrowError;
use super::rounding::{LARGE_BUFFER, Pool, SMALL_BUFFER};
use super::segment::{Arena, Orphan, PhysChunk, Segment, SegmentMemory, map_chunk};
use super::state::AllocState;

/// The least a growth of an arena of `pool` that maps `mapped` bytes adds: 20 MiB for
/// the large pool (PyTorch's large segment size); for the small pool half what it maps,
/// from 2 MiB (PyTorch's small segment size) to 8 MiB, so that a small pool of many
/// megabytes grows in a few steps. Fewer, larger growths mean fewer device allocations
/// (at most PyTorch's on most traces) for at most one step of unused memory per arena.
fn min_growth(pool: Pool, mapped: usize) -> usize {
    match pool {
        Pool::Small => (mapped / 2).clamp(SMALL_BUFFER, 4 * SMALL_BUFFER),
        Pool::Large => LARGE_BUFFER,
    }
}

impl AllocState {
    /// The arenas of `stream`'s `pool`, oldest first.
    #[inline]
    pub(super) fn arenas_of(&self, stream: StreamId, pool: Pool) -> &[u32] {
        self.arena_lists
            .get(stream.index())
            .map_or(&[][..], |l| &l[pool.index()][..])
    }

    /// The smallest wilderness of `stream`'s `pool` that holds `rounded` bytes.
    #[inline]
    pub(super) fn find_wild(&self, stream: StreamId, pool: Pool, rounded: usize) -> Option<u32> {
        let mut best: Option<(usize, u32)> = None;
        for &a in self.arenas_of(stream, pool) {
            let w = self.arenas[a as usize].wild;
            if w != NIL {
                let size = self.slab.get(w).size;
                if size >= rounded && best.is_none_or(|(s, _)| size < s) {
                    best = Some((size, w));
                }
            }
        }
        best.map(|(_, w)| w)
    }

    /// Grows `stream`'s `pool` so that its wilderness holds `rounded` bytes: one new
    /// chunk mapped at the top of an arena. Returns the wilderness block.
    pub(super) fn grow_mapped(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Result<u32, GrowError> {
        let page = self.page;
        let (arena, have) = match self.growable_arena(stream, pool, rounded) {
            Some(found) => found,
            None => (self.new_arena(stream, pool, rounded)?, 0),
        };
        let need = (rounded - have).div_ceil(page) * page;
        let (room, mapped) = {
            let a = &self.arenas[arena as usize];
            (a.room(), a.mapped)
        };
        let preferred = (need.max(min_growth(pool, mapped)).div_ceil(page) * page).min(room);
        // The preferred size where the cap leaves room for it, else what is needed.
        let mut size = if self.check_limit(preferred).is_ok() {
            preferred
        } else {
            need
        };
        self.check_limit(size)?;
        let handle = match self.create_chunk(size) {
            Ok(h) => h,
            Err(e) if e.is_out_of_memory() && size > need => {
                size = need;
                self.create_chunk(size)?
            }
            Err(e) => return Err(e.into()),
        };
        let top = self.arenas[arena as usize].top;
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        let mut calls = [0u64; 3];
        let mapped = map_chunk(vm, top, size, handle, &mut calls);
        self.stats.num_device_map += calls[0];
        self.stats.num_set_access += calls[1];
        self.stats.num_device_unmap += calls[2];
        if let Err(failure) = mapped {
            let mapped_at = failure.still_mapped.then_some(top);
            self.give_back_chunk(handle, size, mapped_at);
            return Err(failure.error.into());
        }
        let chunk = self.insert_chunk(PhysChunk { handle, size });
        Ok(self.extend_arena(arena, chunk, size))
    }

    /// The newest arena of `stream`'s `pool` whose wilderness plus the address space
    /// above it holds `rounded`, with the wilderness's size.
    fn growable_arena(&self, stream: StreamId, pool: Pool, rounded: usize) -> Option<(u32, usize)> {
        let page = self.page;
        self.arenas_of(stream, pool).iter().rev().find_map(|&a| {
            let arena = &self.arenas[a as usize];
            let have = if arena.wild == NIL {
                0
            } else {
                self.slab.get(arena.wild).size
            };
            let need = rounded.saturating_sub(have).div_ceil(page) * page;
            (arena.room() >= need).then_some((a, have))
        })
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
            self.stats.num_address_reserve += 1;
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
        if self.arena_lists.len() <= stream.index() {
            self.arena_lists
                .resize_with(stream.index() + 1, Default::default);
        }
        self.arena_lists[stream.index()][pool.index()].push(index);
        Ok(index)
    }

    /// One `cuMemCreate` of `size` bytes, counted when it succeeds (as PyTorch counts
    /// device allocations).
    fn create_chunk(&mut self, size: usize) -> Result<PhysHandle, BackendError> {
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        let handle = vm.create_chunk(size)?;
        self.stats.num_device_alloc += 1;
        Ok(handle)
    }

    fn insert_chunk(&mut self, chunk: PhysChunk) -> u32 {
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

    /// A chunk that is no longer part of any segment goes back to the device: unmapped
    /// from `mapped_at` first if it is still mapped there. What fails to go back becomes
    /// an orphan, still counted as reserved, and is tried again with the next release.
    fn give_back_chunk(&mut self, handle: PhysHandle, size: usize, mapped_at: Option<u64>) {
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        if let Some(addr) = mapped_at {
            self.stats.num_device_unmap += 1;
            // SAFETY: the chunk is in no segment, so no block (and no queued work on
            // memory handed out) uses it.
            if unsafe { vm.unmap(DeviceAddr(addr), size) }.is_err() {
                self.adopt_orphan(Orphan {
                    handle,
                    size,
                    mapped: Some(addr),
                });
                return;
            }
        }
        self.stats.num_device_free += 1;
        // SAFETY: the chunk is not mapped anywhere.
        if unsafe { vm.release_chunk(handle, size) }.is_err() {
            self.adopt_orphan(Orphan {
                handle,
                size,
                mapped: None,
            });
        }
    }

    fn adopt_orphan(&mut self, orphan: Orphan) {
        self.stats.reserved_bytes.add_unpooled(orphan.size);
        self.orphans.push(orphan);
    }

    /// Tries again to give every orphan back; the first error, if any.
    pub(super) fn release_orphans(&mut self) -> Result<(), BackendError> {
        let Some(vm) = self.backend.virtual_memory() else {
            return Ok(());
        };
        let mut first_error = None;
        let orphans = std::mem::take(&mut self.orphans);
        for mut o in orphans {
            if let Some(addr) = o.mapped {
                self.stats.num_device_unmap += 1;
                // SAFETY: as in `give_back_chunk`.
                match unsafe { vm.unmap(DeviceAddr(addr), o.size) } {
                    Ok(()) => o.mapped = None,
                    Err(e) => {
                        first_error.get_or_insert(e);
                        self.orphans.push(o);
                        continue;
                    }
                }
            }
            self.stats.num_device_free += 1;
            // SAFETY: not mapped anywhere.
            match unsafe { vm.release_chunk(o.handle, o.size) } {
                Ok(()) => self.stats.reserved_bytes.sub_unpooled(o.size),
                Err(e) => {
                    first_error.get_or_insert(e);
                    self.orphans.push(o);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Adds chunk `chunk` (`size` bytes, mapped at the arena's top) to the arena: the
    /// segment at the top grows (or a new one starts after a hole) and the new memory
    /// joins the wilderness. Returns the wilderness.
    fn extend_arena(&mut self, arena: u32, chunk: u32, size: usize) -> u32 {
        let (top, stream, pool) = {
            let a = &self.arenas[arena as usize];
            (a.top, a.stream, a.pool)
        };
        let top_seg = self
            .top_segment(arena)
            .filter(|&s| self.segment(s).end() == top);
        self.arenas[arena as usize].top = top + size as u64;
        self.arenas[arena as usize].mapped += size;
        self.stats.reserved_bytes.add(pool, size);
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
        let tail = self.tail_block(seg);
        if self.slab.get(tail).state == BlockState::Free {
            // The wilderness grows.
            self.unindex_free(tail);
            self.slab.get_mut(tail).size += size;
            self.index_free(tail);
            tail
        } else {
            let block = self.slab.insert(top, size, seg, stream, pool);
            self.slab.get_mut(block).prev = tail;
            self.slab.get_mut(tail).next = block;
            self.index_free(block);
            block
        }
    }

    /// The segment of arena `arena` with the highest base, if any.
    fn top_segment(&self, arena: u32) -> Option<u32> {
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
    #[inline]
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

    #[inline]
    fn place_free(&mut self, index: u32, stream: StreamId, pool: Pool) {
        if self.vmm {
            if let Some(a) = self.wild_arena(index) {
                self.arenas[a as usize].wild = index;
                return;
            }
        }
        self.pools[stream.index()][pool.index()].insert(&mut self.slab, index);
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

    #[inline]
    fn unplace_free(&mut self, index: u32, stream: StreamId, pool: Pool) {
        if self.vmm {
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
        self.pools[stream.index()][pool.index()].remove(&mut self.slab, index);
    }

    /// After the top of `arena` moved: the free block at the new top becomes the
    /// wilderness (out of the free index).
    fn refresh_wild(&mut self, arena: u32) {
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
            self.pools[stream.index()][pool.index()].remove(&mut self.slab, want);
            self.arenas[arena as usize].wild = want;
        }
    }

    /// The chunks of free block `index`'s segment that lie wholly inside it, as a range
    /// of the segment's chunk list, with the byte offset of the first.
    fn chunks_inside(&self, index: u32) -> Option<(usize, usize, usize)> {
        let b = self.slab.get(index);
        let seg = self.segments[b.segment as usize].as_ref()?;
        let SegmentMemory::Mapped { chunks, .. } = &seg.memory else {
            return None;
        };
        let start = (b.addr - seg.base) as usize;
        let end = start + b.size;
        let (mut off, mut first, mut c0_off) = (0usize, None, 0usize);
        let mut last = 0;
        for (i, &c) in chunks.iter().enumerate() {
            let size = self.chunks[c as usize].as_ref().expect("live chunk").size;
            if off >= start && off + size <= end {
                if first.is_none() {
                    first = Some(i);
                    c0_off = off;
                }
                last = i + 1;
            }
            off += size;
            if off >= end {
                break;
            }
        }
        first.map(|f| (f, last, c0_off))
    }

    /// Free blocks anywhere (indexed or wildernesses) that hold a whole chunk, least
    /// recently freed first.
    pub(super) fn releasable_blocks(&self) -> Vec<u32> {
        let mut out: Vec<(u64, u32)> = self
            .pools
            .iter()
            .flat_map(|p| p.iter())
            .flat_map(|index| index.iter(&self.slab))
            .chain(self.arenas.iter().map(|a| a.wild).filter(|&w| w != NIL))
            .filter(|&b| self.chunks_inside(b).is_some())
            .map(|b| (self.slab.get(b).freed_at, b))
            .collect();
        out.sort_unstable();
        out.into_iter().map(|(_, b)| b).collect()
    }

    /// Gives back the whole chunks inside free block `index` if what it must wait for
    /// is at most `max_wait` (waiting for it). Returns the bytes given back.
    pub(super) fn release_block_chunks(
        &mut self,
        index: u32,
        max_wait: Cover,
    ) -> Result<usize, BackendError> {
        if self.slab.get(index).state != BlockState::Free {
            return Ok(0);
        }
        let Some((c0, c1, _)) = self.chunks_inside(index) else {
            return Ok(0);
        };
        let (stream, freed_at) = {
            let b = self.slab.get(index);
            (b.stream, b.freed_at)
        };
        if !self.wait_freed_upto(stream, freed_at, max_wait)? {
            return Ok(0);
        }
        self.carve(index, c0, c1)
    }

    /// Unmaps and releases chunks `c0..c1` of free block `index`'s segment, which lie
    /// inside the block (the caller waited until no queued work uses them), splitting
    /// the segment around the hole. Returns the bytes given back. If an unmap fails,
    /// only the chunks unmapped before it go, and the error is returned.
    fn carve(&mut self, index: u32, c0: usize, c1: usize) -> Result<usize, BackendError> {
        let seg_index = self.slab.get(index).segment;
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        // Unmap first; stop at the first failure.
        let (base, chunk_list) = {
            let s = self.segment(seg_index);
            let SegmentMemory::Mapped { chunks, .. } = &s.memory else {
                unreachable!("only mapped segments have chunks");
            };
            (s.base, chunks.clone())
        };
        let offset_of = |state: &AllocState, i: usize| -> usize {
            chunk_list[..i]
                .iter()
                .map(|&c| state.chunks[c as usize].as_ref().expect("live chunk").size)
                .sum()
        };
        let start = offset_of(self, c0);
        let mut end = start;
        let mut unmapped = c0;
        let mut error = None;
        for &c in &chunk_list[c0..c1] {
            let size = self.chunks[c as usize].as_ref().expect("live chunk").size;
            self.stats.num_device_unmap += 1;
            // SAFETY: the chunk lies inside a free block that no queued work uses.
            if let Err(e) = unsafe { vm.unmap(DeviceAddr(base + end as u64), size) } {
                error = Some(e);
                break;
            }
            end += size;
            unmapped += 1;
        }
        if unmapped == c0 {
            return Err(error.expect("an unmap failed"));
        }
        let c1 = unmapped;
        let hole_bytes = end - start;
        // Release the unmapped chunks.
        for &c in &chunk_list[c0..c1] {
            let chunk = self.chunks[c as usize].take().expect("live chunk");
            self.vacant_chunks.push(c);
            self.stats.num_device_free += 1;
            // SAFETY: unmapped just above.
            if unsafe { vm.release_chunk(chunk.handle, chunk.size) }.is_err() {
                self.adopt_orphan(Orphan {
                    handle: chunk.handle,
                    size: chunk.size,
                    mapped: None,
                });
            }
        }
        self.split_segment_around(index, c0, c1, start, hole_bytes);
        error.map_or(Ok(hole_bytes), Err)
    }

    /// Removes chunks `c0..c1` (bytes `start..start+hole` of the segment, inside free
    /// block `index`, already unmapped) from `index`'s segment: what lies before the
    /// hole and after it become segments of their own.
    fn split_segment_around(
        &mut self,
        index: u32,
        c0: usize,
        c1: usize,
        start: usize,
        hole: usize,
    ) {
        let (addr, size, seg_index, prev, next, stream, pool, freed_at) = {
            let b = self.slab.get(index);
            (
                b.addr, b.size, b.segment, b.prev, b.next, b.stream, b.pool, b.freed_at,
            )
        };
        self.unindex_free(index);
        let old = self.remove_segment(seg_index);
        let SegmentMemory::Mapped { mut chunks, arena } = old.memory else {
            unreachable!("only mapped segments have chunks");
        };
        self.stats.reserved_bytes.sub(pool, hole);
        self.arenas[arena as usize].mapped -= hole;
        let base = old.base;
        let right_chunks = chunks.split_off(c1);
        chunks.truncate(c0);
        let left_chunks = chunks;
        let hole_start = base + start as u64;
        let hole_end = hole_start + hole as u64;
        let left_piece = (hole_start - addr) as usize;
        let right_piece = (addr + size as u64 - hole_end) as usize;
        // The arena's top comes down when the hole reaches it.
        if hole_end == self.arenas[arena as usize].top {
            let top = if left_chunks.is_empty() {
                self.top_segment(arena)
                    .map_or(self.arenas[arena as usize].base, |s| self.segment(s).end())
            } else {
                hole_start
            };
            self.arenas[arena as usize].top = top;
        }
        let mut index_used = false;
        if !left_chunks.is_empty() {
            if left_piece > 0 {
                let b = self.slab.get_mut(index);
                b.size = left_piece;
                b.next = NIL;
                index_used = true;
            } else {
                self.slab.get_mut(prev).next = NIL;
            }
            let seg = self.insert_segment(Segment {
                base,
                size: start,
                stream,
                pool,
                memory: SegmentMemory::Mapped {
                    chunks: left_chunks,
                    arena,
                },
                head: old.head,
                last_used: old.last_used,
            });
            self.relabel(seg);
            if left_piece > 0 {
                self.index_free(index);
            }
        }
        if !right_chunks.is_empty() {
            let first = if right_piece > 0 {
                let r = if index_used {
                    self.slab.insert(hole_end, right_piece, 0, stream, pool)
                } else {
                    index_used = true;
                    let b = self.slab.get_mut(index);
                    b.addr = hole_end;
                    b.size = right_piece;
                    index
                };
                let b = self.slab.get_mut(r);
                b.prev = NIL;
                b.next = next;
                b.freed_at = freed_at;
                if next != NIL {
                    self.slab.get_mut(next).prev = r;
                }
                r
            } else {
                self.slab.get_mut(next).prev = NIL;
                next
            };
            let seg = self.insert_segment(Segment {
                base: hole_end,
                size: old.size - start - hole,
                stream,
                pool,
                memory: SegmentMemory::Mapped {
                    chunks: right_chunks,
                    arena,
                },
                head: first,
                last_used: old.last_used,
            });
            self.relabel(seg);
            if right_piece > 0 {
                self.index_free(first);
            }
        }
        if !index_used {
            self.slab.remove(index);
        }
        self.refresh_wild(arena);
    }

    /// Points every block of segment `seg` at it.
    fn relabel(&mut self, seg: u32) {
        let mut cur = self.segment(seg).head;
        while cur != NIL {
            let b = self.slab.get_mut(cur);
            b.segment = seg;
            cur = b.next;
        }
    }

    /// Gives back every whole chunk inside a free block whose memory needs at most
    /// `max_wait` before it can go (waiting for it), least recently freed first, until
    /// `enough` returns true. Returns the bytes given back.
    pub(super) fn release_free_chunks(
        &mut self,
        max_wait: Cover,
        mut enough: impl FnMut(&AllocState) -> bool,
    ) -> Result<usize, BackendError> {
        let mut released = 0;
        for b in self.releasable_blocks() {
            if enough(self) {
                break;
            }
            released += self.release_block_chunks(b, max_wait)?;
        }
        Ok(released)
    }

    /// Frees the address space of arenas with nothing mapped (the allocator is going away).
    pub(super) fn release_empty_arenas(&mut self) {
        let Some(vm) = self.backend.virtual_memory() else {
            return;
        };
        for a in &mut self.arenas {
            if a.segments.is_empty() && a.size > 0 {
                // SAFETY: nothing is mapped in an arena without segments.
                let _ = unsafe { vm.free_address(DeviceAddr(a.base), a.size) };
                a.size = 0;
            }
        }
    }
}
