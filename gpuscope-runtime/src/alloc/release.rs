//! Giving virtual memory back: whole chunks inside free blocks are unmapped and
//! released (`empty_cache`, garbage collection, memory pressure), each once no queued
//! work uses it (`fences`), and the segment is split around the hole. A chunk a failed
//! driver call leaves outside every segment is an *orphan*: still held and counted as
//! reserved, given back with the next release.

use crate::backend::{BackendError, DeviceAddr, PhysHandle};

use super::block::{BlockState, NIL};
use super::fences::Cover;
use super::segment::{Orphan, Segment, SegmentMemory};
use super::state::AllocState;

impl AllocState {
    /// A chunk that is no longer part of any segment goes back to the device: unmapped
    /// from `mapped_at` first if it is still mapped there. What fails to go back becomes
    /// an orphan, still counted as reserved, and is tried again with the next release.
    pub(super) fn give_back_chunk(
        &mut self,
        handle: PhysHandle,
        size: usize,
        mapped_at: Option<u64>,
    ) {
        let backend = self.backend.clone();
        let vm = backend.virtual_memory().expect("virtual memory backend");
        if let Some(addr) = mapped_at {
            self.stats.other.num_device_unmap += 1;
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
        self.stats.other.num_device_free += 1;
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
        self.stats.other.reserved_bytes.add_unpooled(orphan.size);
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
                self.stats.other.num_device_unmap += 1;
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
            self.stats.other.num_device_free += 1;
            // SAFETY: not mapped anywhere.
            match unsafe { vm.release_chunk(o.handle, o.size) } {
                Ok(()) => self.stats.other.reserved_bytes.sub_unpooled(o.size),
                Err(e) => {
                    first_error.get_or_insert(e);
                    self.orphans.push(o);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
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

    /// Every free block: the free indexes' and the wildernesses.
    pub(super) fn free_blocks(&self) -> impl Iterator<Item = u32> + '_ {
        self.pools
            .iter()
            .flat_map(|p| p.iter())
            .flat_map(|index| index.iter(&self.slab))
            .chain(self.arenas.iter().map(|a| a.wild).filter(|&w| w != NIL))
    }

    /// Free blocks anywhere (indexed or wildernesses) that hold a whole chunk, least
    /// recently freed first.
    pub(super) fn releasable_blocks(&self) -> Vec<u32> {
        let mut out: Vec<(u64, u32)> = self
            .free_blocks()
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
            self.stats.other.num_device_unmap += 1;
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
            self.stats.other.num_device_free += 1;
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
        // Free neighbours (another stream's memory, not merged: `sharing`) change places
        // in their segments: out of the index until the segments are rebuilt.
        let free_prev = prev != NIL && self.slab.get(prev).state == BlockState::Free;
        let free_next = next != NIL && self.slab.get(next).state == BlockState::Free;
        for (b, free) in [(prev, free_prev), (next, free_next)] {
            if free {
                self.unindex_free(b);
            }
        }
        let old = self.remove_segment(seg_index);
        let SegmentMemory::Mapped { mut chunks, arena } = old.memory else {
            unreachable!("only mapped segments have chunks");
        };
        self.stats.other.reserved_bytes.sub(pool, hole);
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
        for (b, free) in [(prev, free_prev), (next, free_next)] {
            if free {
                self.index_free(b);
            }
        }
        self.refresh_wild(arena);
    }

    /// Points every block of segment `seg` at it.
    pub(super) fn relabel(&mut self, seg: u32) {
        let mut cur = self.segment(seg).head;
        while cur != NIL {
            let b = self.slab.get_mut(cur);
            b.segment = seg;
            cur = b.next;
        }
    }

    /// Gives back every whole chunk inside a free block whose memory needs at most
    /// `max_wait` before it can go (waiting for it), least recently freed first, until
    /// `enough` returns true, after merging the free neighbours of two streams that
    /// `join_wait` at most lets merge (`sharing`). Returns the bytes given back.
    pub(super) fn release_free_chunks(
        &mut self,
        max_wait: Cover,
        join_wait: Cover,
        mut enough: impl FnMut(&AllocState) -> bool,
    ) -> Result<usize, BackendError> {
        self.join_free_neighbours(join_wait.min(max_wait))?;
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
