//! Virtual memory: arenas, pages, and where new memory goes.
//!
//! Each (stream, pool) has an address arena; its segments are the mapped runs inside,
//! kept apart by holes. When nothing cached fits a request, the allocator looks at every
//! hole of the arena together with the free blocks that touch it (the free tail of the
//! run before, the free head of the run after) and picks the place that needs the fewest
//! new pages. It maps those pages there (runs that meet become one segment, and free
//! blocks that meet merge), so the request lands on free memory that was already mapped
//! plus as little as possible.
//!
//! The pages come from, in order: pages held unmapped; whole pages inside free blocks
//! anywhere (once no queued work uses them: after a completed fence of their stream, a
//! wait on its outstanding fence, or else a sync of the stream, see `fences`; then the
//! pages are unmapped and their segment split around the hole); and last a new physical
//! chunk, the only step that grows reserved memory and the only device allocation.

use crate::backend::{BackendError, DeviceAddr, StreamId};

use super::block::{BlockState, NIL};
use super::memory::GrowError;
use super::rounding::Pool;
use super::segment::{Arena, Page, PhysChunk, Segment, SegmentMemory, map_pages, unmap_pages};
use super::state::AllocState;

/// Where to map new pages: `pages` pages at `addr` in arena `arena`, next to the free
/// blocks `touching` (excluded from reclaiming).
struct Placement {
    arena: u32,
    addr: u64,
    pages: usize,
    touching: [u32; 2],
}

/// How many pages a growth adds beyond what it needs: a share of the reserved memory,
/// between a floor and a ceiling, and never past the reserve ratio. Growing a little
/// ahead means fewer device allocations while the working set grows (measured on the
/// traces in `tests/data/traces`: 1/32 of reserved, 2 to 64 pages, roughly halves them).
const GROWTH_SLACK_SHARE: usize = 32;
const GROWTH_SLACK_MIN_PAGES: usize = 2;
const GROWTH_SLACK_MAX_PAGES: usize = 64;

/// Frees per window in which remapping is counted.
const REMAP_WINDOW: u64 = 256;
/// Remapped pages a window may hold before the reserve ratio is loosened.
const REMAP_PAGES_PER_WINDOW: usize = 8;
/// How much the reserve ratio is loosened at a time.
const RATIO_STEP: f64 = 0.01;
/// The loosest reserve ratio adaptation reaches.
const MAX_RESERVE_RATIO: f64 = 1.25;

impl AllocState {
    /// Adds `rounded` bytes of room to `stream`'s `pool` with virtual memory. Returns the
    /// free block (indexed) that holds it.
    pub(super) fn grow_mapped(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Result<u32, GrowError> {
        let place = match self.place(stream, pool, rounded) {
            Some(p) => p,
            None => {
                let arena = self.new_arena(stream, pool, rounded)?;
                Placement {
                    arena,
                    addr: self.arenas[arena as usize].base,
                    pages: rounded.div_ceil(self.page),
                    touching: [NIL, NIL],
                }
            }
        };
        // Grow while reserved memory stays within `reserve_ratio` of the peak allocated
        // (and under the cap); past that, take the pages from free blocks elsewhere.
        let need = place.pages.saturating_sub(self.free_pages.len());
        let peak = (self.stats.allocated_bytes.all.peak as usize)
            .max(self.stats.allocated_bytes.all.current as usize + rounded);
        let grown = self.reserved() + need * self.page;
        let under_cap = self.check_limit(need * self.page).is_ok();
        let ratio = self.adapt_reserve_ratio();
        let may_grow = under_cap && grown as f64 <= ratio * peak as f64;
        let want = if may_grow { 0 } else { place.pages };
        let held = self.free_pages.len();
        self.reclaim_pages(want, &place.touching)?;
        self.window_remaps += self.free_pages.len().saturating_sub(held);
        if self.free_pages.len() < place.pages {
            let missing = place.pages - self.free_pages.len();
            // Room under the reserve ratio bounds the slack.
            let ceiling = (self.config.reserve_ratio * peak as f64) as usize;
            let room = ceiling.saturating_sub(self.reserved() + missing * self.page) / self.page;
            let slack = (self.reserved() / GROWTH_SLACK_SHARE / self.page)
                .clamp(GROWTH_SLACK_MIN_PAGES, GROWTH_SLACK_MAX_PAGES)
                .min(room);
            // Slack only where the cap leaves room for it.
            if self.create_chunk(missing + slack).is_err() {
                self.create_chunk(missing)?;
            }
        }
        let start = self.free_pages.len() - place.pages;
        let pages: Vec<Page> = self.free_pages.drain(start..).collect();
        let vm = self
            .backend
            .virtual_memory()
            .expect("virtual memory backend");
        if let Err(e) = map_pages(vm, place.addr, &pages, &self.chunks, self.page) {
            self.free_pages.extend(pages);
            return Err(e.into());
        }
        for p in &pages {
            if let Some(c) = &mut self.chunks[p.chunk as usize] {
                c.mapped = true;
            }
        }
        let bytes = place.pages * self.page;
        self.stats.num_device_map += place.pages as u64;
        self.stats.reserved_bytes.pool_add(pool, bytes);
        let block = self.add_segment(
            place.addr,
            bytes,
            stream,
            pool,
            SegmentMemory::Mapped {
                pages,
                arena: place.arena,
            },
        );
        let seg = self.slab.get(block).segment;
        let seg = self.join_neighbours(seg);
        self.free_block_at(seg, place.addr, rounded)
            .ok_or_else(|| GrowError::Backend(internal("mapped memory does not hold the request")))
    }

    /// The reserve ratio in effect: the configured one, loosened by
    /// [`RATIO_STEP`] after every window of [`REMAP_WINDOW`] frees in which more than
    /// [`REMAP_PAGES_PER_WINDOW`] pages were remapped, up to [`MAX_RESERVE_RATIO`].
    /// Remapping costs tens of microseconds a page (CUDA's `cuMemSetAccess` and
    /// `cuMemUnmap`), so a workload that keeps remapping settles at the lowest ratio
    /// where its steady state needs none.
    fn adapt_reserve_ratio(&mut self) -> f64 {
        let configured = self.config.reserve_ratio;
        if self.effective_ratio < configured {
            self.effective_ratio = configured;
        }
        if self.tick >= self.window_start + REMAP_WINDOW {
            if self.window_remaps > REMAP_PAGES_PER_WINDOW && self.config.adaptive_reserve {
                self.effective_ratio =
                    (self.effective_ratio + RATIO_STEP).min(MAX_RESERVE_RATIO.max(configured));
            }
            self.window_start = self.tick;
            self.window_remaps = 0;
        }
        self.effective_ratio
    }

    /// The free block of segment `seg` that contains `addr` and holds `rounded` bytes.
    fn free_block_at(&self, seg: u32, addr: u64, rounded: usize) -> Option<u32> {
        let mut cur = self.segments[seg as usize].as_ref()?.head;
        while cur != NIL {
            let b = self.slab.get(cur);
            if b.addr <= addr && addr < b.addr + b.size as u64 {
                return (b.state == BlockState::Free && b.size >= rounded).then_some(cur);
            }
            cur = b.next;
        }
        None
    }

    /// The best place in `stream`'s `pool` arenas for `rounded` bytes: the fewest pages
    /// from a new chunk (pages held or reclaimable from free blocks other than the ones
    /// the place merges with cost none), then the fewest pages mapped, then the lowest
    /// address.
    fn place(&self, stream: StreamId, pool: Pool, rounded: usize) -> Option<Placement> {
        let page = self.page;
        let reclaimable = self.free_pages.len() + self.free_interior_pages();
        let interior = |b: u32| {
            if b == NIL {
                0
            } else {
                self.interior_pages(b).map_or(0, |(p0, p1)| p1 - p0)
            }
        };
        let mut best: Option<(usize, Placement)> = None;
        for &a in self.arenas_of(stream, pool) {
            let arena = &self.arenas[a as usize];
            let (mut prev_end, mut left) = (arena.base, NIL);
            let holes = arena
                .segments
                .values()
                .map(|&s| Some(s))
                .chain(std::iter::once(None));
            for seg in holes {
                let (hole_end, right, next_left, next_end) = match seg {
                    Some(s) => {
                        let seg = self.segments[s as usize].as_ref().expect("segment exists");
                        let head = self.slab.get(seg.head);
                        let right = if head.state == BlockState::Free {
                            seg.head
                        } else {
                            NIL
                        };
                        let tail = self.tail_block(s);
                        let next_left = if self.slab.get(tail).state == BlockState::Free {
                            tail
                        } else {
                            NIL
                        };
                        (seg.base, right, next_left, seg.base + seg.size as u64)
                    }
                    None => (arena.end(), NIL, NIL, arena.end()),
                };
                let hole = (hole_end - prev_end) as usize;
                if hole > 0 {
                    let free_left = if left == NIL {
                        0
                    } else {
                        self.slab.get(left).size
                    };
                    let free_right = if right == NIL {
                        0
                    } else {
                        self.slab.get(right).size
                    };
                    let mut consider = |pages: usize, addr: u64, touching: [u32; 2]| {
                        let usable = reclaimable - interior(touching[0]) - interior(touching[1]);
                        let fresh = pages.saturating_sub(usable);
                        let key = (fresh, pages, addr);
                        if best
                            .as_ref()
                            .is_none_or(|(f, b)| key < (*f, b.pages, b.addr))
                        {
                            best = Some((
                                fresh,
                                Placement {
                                    arena: a,
                                    addr,
                                    pages,
                                    touching,
                                },
                            ));
                        }
                    };
                    if free_left + hole >= rounded {
                        let pages = rounded.saturating_sub(free_left).div_ceil(page).max(1);
                        consider(pages, prev_end, [left, NIL]);
                    }
                    if free_right + hole >= rounded {
                        let pages = rounded.saturating_sub(free_right).div_ceil(page).max(1);
                        consider(pages, hole_end - (pages * page) as u64, [NIL, right]);
                    }
                    if free_left + hole + free_right >= rounded {
                        consider(hole / page, prev_end, [left, right]);
                    }
                }
                prev_end = next_end;
                left = next_left;
            }
        }
        best.map(|(_, p)| p)
    }

    /// Whole pages inside all free blocks.
    fn free_interior_pages(&self) -> usize {
        self.pools
            .iter()
            .flat_map(|p| p.iter())
            .flat_map(|index| index.iter(&self.slab))
            .filter_map(|b| self.interior_pages(b))
            .map(|(p0, p1)| p1 - p0)
            .sum()
    }

    fn arenas_of(&self, stream: StreamId, pool: Pool) -> &[u32] {
        self.arena_lists
            .get(stream.index())
            .map_or(&[][..], |l| &l[pool.index()][..])
    }

    /// Reserves a new arena for `stream`'s `pool`, large enough for `at_least` bytes:
    /// twice the device's memory, so that holes never run out.
    fn new_arena(
        &mut self,
        stream: StreamId,
        pool: Pool,
        at_least: usize,
    ) -> Result<u32, GrowError> {
        let page = self.page;
        let size = (2 * self.total_memory).max(at_least).div_ceil(page) * page;
        let vm = self
            .backend
            .virtual_memory()
            .expect("virtual memory backend");
        let base = vm.reserve_address(size)?;
        self.arenas.push(Arena {
            base: base.0,
            size,
            segments: Default::default(),
        });
        let index = (self.arenas.len() - 1) as u32;
        if self.arena_lists.len() <= stream.index() {
            self.arena_lists
                .resize_with(stream.index() + 1, Default::default);
        }
        self.arena_lists[stream.index()][pool.index()].push(index);
        Ok(index)
    }

    /// The last block of segment `seg`.
    fn tail_block(&self, seg: u32) -> u32 {
        let mut cur = self.segments[seg as usize]
            .as_ref()
            .expect("segment exists")
            .head;
        loop {
            let next = self.slab.get(cur).next;
            if next == NIL {
                return cur;
            }
            cur = next;
        }
    }

    /// Joins segment `seg` with the runs of its arena that touch it; returns the joined
    /// segment.
    fn join_neighbours(&mut self, seg: u32) -> u32 {
        let (arena, base, end) = {
            let s = self.segments[seg as usize]
                .as_ref()
                .expect("segment exists");
            let SegmentMemory::Mapped { arena, .. } = &s.memory else {
                return seg;
            };
            (*arena, s.base, s.base + s.size as u64)
        };
        let arena_ref = &self.arenas[arena as usize];
        let before = arena_ref
            .segments
            .range(..base)
            .next_back()
            .map(|(_, &s)| s);
        let after = arena_ref.segments.get(&end).copied();
        let mut joined = seg;
        if let Some(b) = before {
            let s = self.segments[b as usize].as_ref().expect("segment exists");
            if s.base + s.size as u64 == base {
                joined = self.join(b, joined);
            }
        }
        if let Some(a) = after {
            joined = self.join(joined, a);
        }
        joined
    }

    /// Appends segment `right` (which starts where `left` ends) to `left`, merging the
    /// free blocks that meet. Returns `left`.
    fn join(&mut self, left: u32, right: u32) -> u32 {
        let tail = self.tail_block(left);
        let right_seg = self.remove_segment(right);
        let head = right_seg.head;
        let SegmentMemory::Mapped {
            pages: right_pages, ..
        } = right_seg.memory
        else {
            unreachable!("only mapped segments join");
        };
        let tail_free = self.slab.get(tail).state == BlockState::Free;
        let head_free = self.slab.get(head).state == BlockState::Free;
        if tail_free {
            self.unindex_free(tail);
        }
        if head_free {
            self.unindex_free(head);
        }
        {
            let l = self.segments[left as usize]
                .as_mut()
                .expect("segment exists");
            let old_size = l.size;
            l.size += right_seg.size;
            l.last_used = l.last_used.max(right_seg.last_used);
            if let SegmentMemory::Mapped { pages, .. } = &mut l.memory {
                pages.extend(right_pages);
            }
            let (pool, new_size) = (l.pool, l.size);
            self.resize_oversize(pool, old_size, new_size);
        }
        self.slab.get_mut(tail).next = head;
        self.slab.get_mut(head).prev = tail;
        let mut cur = head;
        while cur != NIL {
            let b = self.slab.get_mut(cur);
            b.segment = left;
            cur = b.next;
        }
        if tail_free && head_free {
            let (size, next, freed_at) = {
                let h = self.slab.get(head);
                (h.size, h.next, h.freed_at)
            };
            let t = self.slab.get_mut(tail);
            t.size += size;
            t.next = next;
            // The merged block holds memory freed at both ticks: keep the newer.
            t.freed_at = t.freed_at.max(freed_at);
            if next != NIL {
                self.slab.get_mut(next).prev = tail;
            }
            self.slab.remove(head);
            self.index_free(tail);
        } else {
            if tail_free {
                self.index_free(tail);
            }
            if head_free {
                self.index_free(head);
            }
        }
        left
    }

    /// Takes a free block out of its free index, uncounting it as an inactive split.
    pub(super) fn unindex_free(&mut self, index: u32) {
        let b = self.slab.get(index);
        let (stream, pool, size, split) = (b.stream, b.pool, b.size, b.is_split());
        self.pools[stream.index()][pool.index()].remove(&mut self.slab, index);
        if split {
            self.stats.inactive_split.sub(pool, 1);
            self.stats.inactive_split_bytes.sub(pool, size);
        }
    }

    /// Puts a free block into its free index, counting it as an inactive split if it is
    /// one.
    pub(super) fn index_free(&mut self, index: u32) {
        let b = self.slab.get(index);
        let (stream, pool, size, split) = (b.stream, b.pool, b.size, b.is_split());
        if split {
            self.stats.inactive_split.add(pool, 1);
            self.stats.inactive_split_bytes.add(pool, size);
        }
        self.pools[stream.index()][pool.index()].insert(&mut self.slab, index);
    }

    /// Creates `pages` pages, one physical chunk each (CUDA maps a chunk only whole, so
    /// a page that moves on its own is a chunk of its own), and adds them to the held
    /// pages. One growth counts as one device allocation; every chunk is counted in
    /// `num_device_chunks`.
    fn create_chunk(&mut self, pages: usize) -> Result<(), GrowError> {
        let bytes = pages * self.page;
        self.check_limit(bytes)?;
        let vm = self
            .backend
            .virtual_memory()
            .expect("virtual memory backend");
        let mut created = Vec::with_capacity(pages);
        for _ in 0..pages {
            match vm.create_chunk(self.page) {
                Ok(h) => created.push(h),
                Err(e) => {
                    for h in created {
                        // SAFETY: created just above and never mapped.
                        let _ = unsafe { vm.release_chunk(h, self.page) };
                    }
                    return Err(e.into());
                }
            }
        }
        self.stats.num_device_alloc += 1;
        self.stats.num_device_chunks += pages as u64;
        self.stats.reserved_bytes.add_unpooled(bytes);
        for handle in created {
            let chunk = PhysChunk {
                handle,
                mapped: false,
            };
            let index = match self.vacant_chunks.pop() {
                Some(i) => {
                    self.chunks[i as usize] = Some(chunk);
                    i
                }
                None => {
                    self.chunks.push(Some(chunk));
                    (self.chunks.len() - 1) as u32
                }
            };
            self.free_pages.push(Page { chunk: index });
        }
        // Pages are taken from the end: keep them in creation order.
        let n = self.free_pages.len();
        self.free_pages[n - pages..].reverse();
        Ok(())
    }

    /// The whole pages inside free block `index`, as a page range of its segment.
    fn interior_pages(&self, index: u32) -> Option<(usize, usize)> {
        let b = self.slab.get(index);
        let seg = self.segments[b.segment as usize].as_ref()?;
        if !matches!(seg.memory, SegmentMemory::Mapped { .. }) {
            return None;
        }
        let start = (b.addr - seg.base) as usize;
        let p0 = start.div_ceil(self.page);
        let p1 = (start + b.size) / self.page;
        (p1 > p0).then_some((p0, p1))
    }

    /// Makes at least `need` pages held unmapped, from free blocks anywhere but
    /// `exclude`, as far as there are whole free pages: whole free segments first, then
    /// the blocks with the most whole pages, least recently used first.
    fn reclaim_pages(&mut self, need: usize, exclude: &[u32]) -> Result<(), BackendError> {
        if self.free_pages.len() >= need {
            return Ok(());
        }
        let mut candidates: Vec<(bool, usize, u64, u32)> = Vec::new();
        for pools in &self.pools {
            for index in pools {
                for b in index.iter(&self.slab) {
                    if exclude.contains(&b) {
                        continue;
                    }
                    if let Some((p0, p1)) = self.interior_pages(b) {
                        let block = self.slab.get(b);
                        let whole = !block.is_split();
                        candidates.push((whole, p1 - p0, block.freed_at, b));
                    }
                }
            }
        }
        // Whole free segments first, then the blocks with the most whole pages, least
        // recently freed first.
        candidates.sort_unstable_by(|a, b| {
            b.0.cmp(&a.0)
                .then(b.1.cmp(&a.1))
                .then(a.2.cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        let order: Vec<u32> = candidates.into_iter().map(|c| c.3).collect();
        self.unmap_from(&order, need)
    }

    /// Unmaps whole pages inside the free blocks `blocks`, in order, until at least
    /// `want` pages are held, each block once no queued work uses it (`wait_freed`: no
    /// wait after a completed fence, a wait on the stream's fence, or a stream sync, at
    /// most once per stream). From a block with more whole pages than still wanted,
    /// only its last pages are taken.
    fn unmap_from(&mut self, blocks: &[u32], want: usize) -> Result<(), BackendError> {
        for &b in blocks {
            let held = self.free_pages.len();
            if held >= want {
                break;
            }
            if self.slab.get(b).state != BlockState::Free {
                continue;
            }
            let Some((p0, p1)) = self.interior_pages(b) else {
                continue;
            };
            let (stream, freed_at) = {
                let block = self.slab.get(b);
                (block.stream, block.freed_at)
            };
            self.wait_freed(stream, freed_at)?;
            let take = (p1 - p0).min(want - held);
            self.carve(b, p1 - take, p1)?;
        }
        Ok(())
    }

    /// Unmaps pages `p0..p1` of free block `index`'s segment, which lie inside the block
    /// (the caller waited until no queued work uses it), splitting the segment around
    /// the hole.
    fn carve(&mut self, index: u32, p0: usize, p1: usize) -> Result<(), BackendError> {
        let page = self.page;
        let (addr, size, seg_index, prev, next, stream, pool, freed_at) = {
            let b = self.slab.get(index);
            (
                b.addr, b.size, b.segment, b.prev, b.next, b.stream, b.pool, b.freed_at,
            )
        };
        self.unindex_free(index);
        let old = self.remove_segment(seg_index);
        let SegmentMemory::Mapped { mut pages, arena } = old.memory else {
            unreachable!("only mapped segments have pages");
        };
        let (base, seg_size) = (old.base, old.size);
        let right_pages: Vec<Page> = pages.split_off(p1);
        let hole: Vec<Page> = pages.split_off(p0);
        let left_pages = pages;

        let vm = self
            .backend
            .virtual_memory()
            .expect("virtual memory backend");
        // SAFETY: the pages lie inside a free block no queued work uses (the caller
        // waited for it).
        let unmapped = unsafe { unmap_pages(vm, base + (p0 * page) as u64, p1 - p0, page) };
        for p in &hole {
            if let Some(c) = &mut self.chunks[p.chunk as usize] {
                c.mapped = false;
            }
        }
        self.free_pages.extend(hole.iter().rev());
        self.stats.num_device_unmap += (p1 - p0) as u64;
        self.stats.reserved_bytes.pool_sub(pool, (p1 - p0) * page);

        let hole_start = base + (p0 * page) as u64;
        let hole_end = base + (p1 * page) as u64;
        let left_piece = (hole_start - addr) as usize;
        let right_piece = (addr + size as u64 - hole_end) as usize;

        // Before the hole: the blocks before `index`, and `index` shrunk to the free
        // bytes before the hole (the segment's head stays: the hole starts past the
        // base, so `index` is the head only if free bytes precede the hole).
        let mut index_used = false;
        if p0 > 0 {
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
                size: p0 * page,
                stream,
                pool,
                memory: SegmentMemory::Mapped {
                    pages: left_pages,
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
        // After the hole: the free bytes after it, then the blocks after `index`.
        if p1 * page < seg_size {
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
                size: seg_size - p1 * page,
                stream,
                pool,
                memory: SegmentMemory::Mapped {
                    pages: right_pages,
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
        unmapped
    }

    /// Points every block of segment `seg` at it.
    fn relabel(&mut self, seg: u32) {
        let mut cur = self.segments[seg as usize]
            .as_ref()
            .expect("segment exists")
            .head;
        while cur != NIL {
            let b = self.slab.get_mut(cur);
            b.segment = seg;
            cur = b.next;
        }
    }

    /// Unmaps every whole free page, then releases every chunk with no page mapped.
    pub(super) fn release_free_pages(&mut self) -> Result<(), BackendError> {
        let free: Vec<u32> = self
            .pools
            .iter()
            .flat_map(|p| p.iter())
            .flat_map(|index| index.iter(&self.slab))
            .collect();
        self.unmap_from(&free, usize::MAX)?;
        self.release_unmapped_chunks()
    }

    /// Unmaps a whole free segment's pages (the caller waited until no queued work uses
    /// them) and releases the chunks that leaves with no page mapped.
    pub(super) fn release_segment_pages(&mut self, seg: u32) -> Result<(), BackendError> {
        let head = self.segments[seg as usize]
            .as_ref()
            .expect("segment exists")
            .head;
        if let Some((p0, p1)) = self.interior_pages(head) {
            self.carve(head, p0, p1)?;
        }
        self.release_unmapped_chunks()
    }

    /// Releases every chunk none of whose pages is mapped.
    fn release_unmapped_chunks(&mut self) -> Result<(), BackendError> {
        let releasable: Vec<u32> = self
            .chunks
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().filter(|c| !c.mapped).map(|_| i as u32))
            .collect();
        if releasable.is_empty() {
            return Ok(());
        }
        self.free_pages.retain(|p| !releasable.contains(&p.chunk));
        self.stats.num_device_free += 1;
        let vm = self
            .backend
            .virtual_memory()
            .expect("virtual memory backend");
        let mut first_error = None;
        for i in releasable {
            let c = self.chunks[i as usize].take().expect("chunk exists");
            self.vacant_chunks.push(i);
            let bytes = self.page;
            self.stats.reserved_bytes.sub_unpooled(bytes);
            self.stats.num_device_chunks_released += 1;
            // SAFETY: none of the chunk's pages is mapped.
            if let Err(e) = unsafe { vm.release_chunk(c.handle, bytes) } {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
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

fn internal(what: &str) -> BackendError {
    BackendError::Driver {
        call: "gpuscope allocator",
        message: format!("internal error: {what}"),
    }
}
