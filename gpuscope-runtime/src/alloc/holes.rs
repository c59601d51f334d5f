//! Holes: address ranges of an arena below its top that memory given back left unmapped
//! (`release`), mapped again in place when a pool must grow.
//!
//! Without this, an arena grows only at its top: after memory pressure gave back the
//! free chunks scattered through it, the working set would be mapped afresh above the
//! holes, climb the arena pass after pass and reserve new address space when it reaches
//! the end. PyTorch's expandable segments map pages back into such ranges
//! (`map_block`); here a growth fills the lowest hole that, with the free memory of the
//! segments on either side, holds the request, when that maps no more than growing at
//! a top would. A hole filled whole joins the segments on either side into one.
//!
//! A pool that never gave memory back has no holes, so nothing here runs and a
//! repeating workload's passes stay alike (`vmm`).

use crate::backend::StreamId;

use super::block::BlockState;
use super::growth::{chunk_limit, growth_size};
use super::memory::GrowError;
use super::rounding::Pool;
use super::segment::{PhysChunk, SegmentMemory};
use super::state::AllocState;

/// A hole that can hold a request, and what filling it takes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Hole {
    arena: u32,
    /// The unmapped range.
    start: u64,
    end: u64,
    /// The segment that ends at `start`, if one does.
    below: Option<u32>,
    /// The segment that starts at `end`.
    above: u32,
    /// The bytes to map from `start`: whole pages of the pool, at most the hole.
    map: usize,
    /// The least that holds the request, in pages of the device.
    need: usize,
}

impl Hole {
    fn size(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// The least a fill maps (what growing a top would otherwise map).
    pub(super) fn need(&self) -> usize {
        self.need
    }
}

impl AllocState {
    /// The lowest hole of `stream`'s `pool` arenas (oldest arena first) that holds
    /// `rounded` bytes once mapped, with the free tail of the segment below it and, when
    /// the hole is mapped whole, the free head of the segment above.
    pub(super) fn find_hole(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Option<Hole> {
        let page = self.page;
        for i in 0..self.arenas_of(stream, pool).len() {
            let arena = self.arenas_of(stream, pool)[i];
            let a = &self.arenas[arena as usize];
            // Every byte below the top mapped: no hole.
            if a.mapped as u64 == a.top - a.base {
                continue;
            }
            let spans: Vec<(u64, u64, u32)> = a
                .segments
                .values()
                .map(|&s| {
                    let seg = self.segment(s);
                    (seg.base, seg.end(), s)
                })
                .collect();
            let mut below: Option<(u64, u32)> = None;
            let mut floor = a.base;
            for (base, end, seg) in spans {
                if base > floor {
                    if let Some(hole) =
                        self.hole_for(arena, floor, base, below, seg, stream, pool, rounded, page)
                    {
                        return Some(hole);
                    }
                }
                below = Some((end, seg));
                floor = end;
            }
        }
        None
    }

    /// The hole `start..end` of `arena` (between segment `below`, when it ends at
    /// `start`, and segment `above`), if it can hold `rounded` bytes.
    #[allow(clippy::too_many_arguments)]
    fn hole_for(
        &mut self,
        arena: u32,
        start: u64,
        end: u64,
        below: Option<(u64, u32)>,
        above: u32,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
        page: usize,
    ) -> Option<Hole> {
        let below = below.filter(|&(e, _)| e == start).map(|(_, s)| s);
        let free_below = match below {
            Some(s) => {
                let tail = self.tail_block(s);
                self.serves(tail, stream)
            }
            None => 0,
        };
        let head = self.segment(above).head;
        let free_above = self.serves(head, stream);
        let size = (end - start) as usize;
        if free_below >= rounded {
            // Held already, by a block the best fit passes over (`max_split_size`).
            return None;
        }
        let short = rounded - free_below;
        let (map, need) = if short <= size {
            // Mapped from `start`, in whole pages of the pool (`growth_size`), at most
            // the hole; what is missing, in pages of the device, where no more is left.
            (
                growth_size(pool, short, 0, None, page).min(size),
                short.div_ceil(page) * page,
            )
        } else if free_below + size + free_above >= rounded {
            (size, size)
        } else {
            return None;
        };
        Some(Hole {
            arena,
            start,
            end,
            below,
            above,
            map,
            need: need.min(size),
        })
    }

    /// The size of free block `index` if it may serve `stream`, else 0.
    fn serves(&mut self, index: u32, stream: StreamId) -> usize {
        if self.slab.get(index).state == BlockState::Free && self.clean_for(index, stream) {
            self.slab.get(index).size
        } else {
            0
        }
    }

    /// Maps whole pages of the pool (or only what is needed, when the cap or the device
    /// is short of them) at the hole's start for `stream`: the segment below grows
    /// into the hole (or a segment starts there), and when the hole is filled whole it
    /// joins the segment above. Returns the free block that holds the request.
    pub(super) fn fill_hole(
        &mut self,
        hole: Hole,
        stream: StreamId,
        pool: Pool,
    ) -> Result<u32, GrowError> {
        // The pool's pages where the cap leaves room for them, else what is needed.
        let size = if self.check_limit(hole.map).is_ok() {
            hole.map
        } else {
            hole.need
        };
        self.check_limit(size)?;
        let capacity = self.limit().unwrap_or(self.total_memory);
        let largest = chunk_limit(
            capacity,
            self.config.max_chunk_size,
            self.page,
            self.reserved() + size,
            self.config.page_chunk_threshold,
        );
        let pieces = self.map_chunks(hole.start, size, hole.need, largest)?;
        let size = pieces.iter().map(|&(_, piece)| piece).sum::<usize>();
        let chunks: Vec<u32> = pieces
            .into_iter()
            .map(|(handle, size)| self.insert_chunk(PhysChunk { handle, size }))
            .collect();
        self.arenas[hole.arena as usize].mapped += size;
        self.stats.other.reserved_bytes.add(pool, size);
        let (seg, block) = match hole.below {
            Some(seg) => (seg, self.grow_segment_up(seg, chunks, size, stream)),
            None => {
                let block = self.add_segment(
                    hole.start,
                    size,
                    stream,
                    pool,
                    SegmentMemory::Mapped {
                        chunks,
                        arena: hole.arena,
                    },
                );
                (self.slab.get(block).segment, block)
            }
        };
        if size < hole.size() {
            return Ok(block);
        }
        Ok(self.join_segments(seg, hole.above, stream))
    }

    /// Adds `chunks` (`size` bytes, mapped just above segment `seg`) to it: its free tail
    /// grows when it may serve `stream`, else the new memory is a free block of its own.
    /// Returns the free block that ends at the new end.
    fn grow_segment_up(
        &mut self,
        seg: u32,
        chunks: Vec<u32>,
        size: usize,
        stream: StreamId,
    ) -> u32 {
        let (old_size, end, pool) = {
            let s = self.segments[seg as usize]
                .as_mut()
                .expect("segment exists");
            let old = s.size;
            s.size += size;
            if let SegmentMemory::Mapped { chunks: list, .. } = &mut s.memory {
                list.extend(chunks);
            }
            (old, s.base + old as u64, s.pool)
        };
        self.resize_oversize(pool, old_size, old_size + size);
        self.free_after_tail(seg, end, size, stream, pool)
    }

    /// Joins segment `upper`, which starts where segment `lower` ends, into `lower`; the
    /// free blocks that meet merge when they may (`merge::absorb_neighbours`). Returns the
    /// block at the join's lower side after the merge.
    fn join_segments(&mut self, lower: u32, upper: u32, stream: StreamId) -> u32 {
        let low_tail = self.tail_block(lower);
        let up_head = self.segment(upper).head;
        // Out of the indexes while their segments change (a split's statistics go by
        // their neighbours).
        let tail_free = self.slab.get(low_tail).state == BlockState::Free;
        let head_free = self.slab.get(up_head).state == BlockState::Free;
        if tail_free {
            self.unindex_free(low_tail);
            // A free tail of another stream grew into the hole only because that stream's
            // work on it is done (`free_after_tail`): the memory, old and new, is clean,
            // and it merges on the requesting stream's rule, as the request's fit was
            // counted. Left with its stream it would keep apart from free memory of its
            // own stream still in use above (which no free block may) and could not
            // take the free head the fit counted.
            if self.slab.get(low_tail).stream != stream {
                debug_assert!(self.is_clean_for(low_tail, stream));
                let b = self.slab.get_mut(low_tail);
                b.stream = stream;
                b.freed_at = 0;
            }
        }
        if head_free {
            self.unindex_free(up_head);
        }
        let up = self.remove_segment(upper);
        let SegmentMemory::Mapped { chunks, .. } = up.memory else {
            unreachable!("holes lie between mapped segments");
        };
        let (pool, old_size) = {
            let s = self.segments[lower as usize]
                .as_mut()
                .expect("segment exists");
            let old = s.size;
            s.size += up.size;
            s.last_used = s.last_used.max(up.last_used);
            if let SegmentMemory::Mapped { chunks: list, .. } = &mut s.memory {
                list.extend(chunks);
            }
            (s.pool, old)
        };
        // `remove_segment` counted the upper segment out; its bytes are the lower's now.
        self.resize_oversize(pool, old_size, old_size + up.size);
        self.slab.get_mut(low_tail).next = up_head;
        self.slab.get_mut(up_head).prev = low_tail;
        self.relabel(lower);
        if head_free {
            self.index_free(up_head);
        }
        if tail_free {
            // The free memory that meets at the join merges on `merge`'s rule; what the
            // merged neighbours counted as inactive splits goes with them.
            let (blocks, bytes) = self.absorb_neighbours(low_tail, stream);
            self.stats.inactive_split.change(pool, blocks);
            self.stats.inactive_split_bytes.change(pool, bytes);
            self.index_free(low_tail);
        }
        let arena = self.segment(lower).arena().expect("a mapped segment");
        self.refresh_wild(arena);
        low_tail
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::alloc::{AllocConfig, CachingAllocator, Pool};
    use crate::backend::StreamId;
    use crate::backend::test::{EventMode, TestBackend};

    const MIB: usize = 1 << 20;

    /// An allocator on a simulated 80 GiB device that maps page by page (20 MiB chunks),
    /// so that whatever is freed can go back.
    fn paged() -> CachingAllocator {
        paged_with("", EventMode::Immediate).1
    }

    /// [`paged`] with `conf` and streams whose work ends as `events` say.
    fn paged_with(conf: &str, events: EventMode) -> (Arc<TestBackend>, CachingAllocator) {
        let backend = Arc::new(
            TestBackend::builder()
                .capacity(80 << 30)
                .virtual_memory(2 * MIB)
                .event_mode(events)
                .build(),
        );
        let config = AllocConfig {
            max_chunk_size: Some(20 * MIB),
            ..conf.parse().unwrap()
        };
        (
            backend.clone(),
            CachingAllocator::new(backend, config).unwrap(),
        )
    }

    /// The large pool's segments, as (offset from the first's base, size) in MiB.
    fn segments(alloc: &CachingAllocator, base: u64) -> Vec<(u64, usize)> {
        let mut out: Vec<_> = alloc
            .snapshot()
            .into_iter()
            .filter(|s| s.pool == Pool::Large)
            .map(|s| ((s.base.0 - base) >> 20, s.size / MIB))
            .collect();
        out.sort_unstable();
        out
    }

    /// Three 300 MiB blocks side by side from one cached growth of 1 GiB (the first at
    /// the arena's base, returned first), the middle one freed, then the cache emptied:
    /// a 300 MiB hole between two live blocks.
    fn hole_between_live_blocks(alloc: &CachingAllocator) -> [crate::alloc::RawBlock; 2] {
        let s = StreamId::DEFAULT;
        alloc.free(alloc.allocate(1 << 30, s).unwrap()).unwrap();
        let a = alloc.allocate(300 * MIB, s).unwrap();
        let b = alloc.allocate(300 * MIB, s).unwrap();
        let c = alloc.allocate(300 * MIB, s).unwrap();
        alloc.free(b).unwrap();
        alloc.empty_cache().unwrap();
        let base = a.addr().0;
        assert_eq!(segments(alloc, base), vec![(0, 300), (600, 300)]);
        [a, c]
    }

    /// A growth after memory went back maps the hole it left, not new memory at the top:
    /// the arena keeps its top and its address space, and the hole's pages are the same
    /// addresses as before. Filled whole, the hole joins the segments on either side.
    #[test]
    fn a_growth_maps_the_hole_that_memory_given_back_left() {
        let alloc = paged();
        let s = StreamId::DEFAULT;
        let [a, c] = hole_between_live_blocks(&alloc);
        let base = a.addr().0;
        let before = alloc.stats();
        let d = alloc.allocate(200 * MIB, s).unwrap();
        assert_eq!(d.addr().0 - base, 300 * MIB as u64, "at the hole's start");
        let e = alloc.allocate(100 * MIB, s).unwrap();
        assert_eq!(e.addr().0 - base, 500 * MIB as u64, "the rest of the hole");
        let after = alloc.stats();
        assert_eq!(after.num_address_reserve, before.num_address_reserve);
        assert_eq!(after.num_device_alloc - before.num_device_alloc, 15);
        // One segment: the hole filled whole joined the two.
        assert_eq!(segments(&alloc, base), vec![(0, 900)]);
        assert_eq!(after.reserved_bytes.all.current as usize, 900 * MIB);
        alloc.check_invariants().unwrap();
        for blk in [a, c, d, e] {
            alloc.free(blk).unwrap();
        }
        alloc.check_invariants().unwrap();
    }

    /// The free memory on both sides of a hole counts: a request larger than the hole
    /// fits in the free tail below it, the hole and the free head above it, merged into
    /// one block at the lower free tail, mapping only the hole.
    #[test]
    fn free_memory_on_both_sides_of_a_hole_joins_it() {
        let alloc = paged();
        let s = StreamId::DEFAULT;
        let [a, c] = hole_between_live_blocks(&alloc);
        let base = a.addr().0;
        alloc.free(a).unwrap();
        alloc.free(c).unwrap();
        let before = alloc.stats();
        let big = alloc.allocate(800 * MIB, s).unwrap();
        assert_eq!(big.addr().0, base);
        let after = alloc.stats();
        assert_eq!(
            after.num_device_alloc - before.num_device_alloc,
            15,
            "only the hole is mapped"
        );
        assert_eq!(segments(&alloc, base), vec![(0, 900)]);
        alloc.check_invariants().unwrap();
        alloc.free(big).unwrap();
        alloc.check_invariants().unwrap();
    }

    /// With streams sharing pools, a hole joins a free tail of a stream whose work is
    /// done and the free head above it that the same stream freed later, still in use:
    /// the tail, grown for another stream, takes that stream's rule, so the two stay
    /// apart (the head may not serve it) and no free block holds memory of one stream
    /// next to its own free memory unmerged.
    #[test]
    fn a_clean_tail_of_another_stream_joins_a_hole_for_the_requester() {
        use crate::backend::Backend;
        let (dev, alloc) = paged_with("share_across_streams:True", EventMode::Manual);
        let (a, b) = (StreamId::DEFAULT, dev.create_stream().unwrap());
        alloc.free(alloc.allocate(1 << 30, a).unwrap()).unwrap();
        let p = alloc.allocate(290 * MIB, a).unwrap();
        let q = alloc.allocate(10 * MIB, a).unwrap();
        let gone = alloc.allocate(300 * MIB, a).unwrap();
        let c = alloc.allocate(300 * MIB, a).unwrap();
        let base = p.addr().0;
        assert_eq!(c.addr().0 - base, 600 * MIB as u64);
        alloc.free(q).unwrap();
        alloc.free(gone).unwrap();
        // Waits for `a` (its frees are done after) and leaves a hole at 300..600 MiB
        // above `a`'s free 10 MiB, which shares a page with `p`.
        alloc.empty_cache().unwrap();
        assert_eq!(segments(&alloc, base), vec![(0, 300), (600, 300)]);
        // `a` works on `c` and frees it: the free head above the hole is `a`'s, busy.
        dev.launch(a, c.addr(), 300 * MIB).unwrap();
        alloc.free(c).unwrap();
        // 305 MiB: the tail, the hole and 5 MiB left free next to `c`.
        let big = alloc.allocate(305 * MIB, b).unwrap();
        assert_eq!(
            big.addr().0 - base,
            290 * MIB as u64,
            "the tail and the hole"
        );
        assert_eq!(segments(&alloc, base), vec![(0, 900)]);
        alloc.check_invariants().unwrap();
        alloc.free(big).unwrap();
        alloc.free(p).unwrap();
        alloc.check_invariants().unwrap();
        dev.complete_stream(a);
        dev.complete_stream(b);
        alloc.empty_cache().unwrap();
        assert_eq!(dev.used(), 0);
    }

    /// Growing the top stays the choice when it maps less than a hole would: a free top
    /// of 300 MiB needs 100 MiB more for a 400 MiB request, the hole below it 300.
    #[test]
    fn the_top_grows_when_it_needs_less_than_the_hole() {
        let alloc = paged();
        let s = StreamId::DEFAULT;
        let [a, c] = hole_between_live_blocks(&alloc);
        let base = a.addr().0;
        alloc.free(c).unwrap();
        let before = alloc.stats();
        let big = alloc.allocate(400 * MIB, s).unwrap();
        assert_eq!(big.addr().0 - base, 600 * MIB as u64);
        assert_eq!(alloc.stats().num_device_alloc - before.num_device_alloc, 5);
        assert_eq!(segments(&alloc, base), vec![(0, 300), (600, 400)]);
        alloc.check_invariants().unwrap();
        alloc.free(big).unwrap();
        alloc.free(a).unwrap();
    }
}
