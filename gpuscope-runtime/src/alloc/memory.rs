//! Growing when nothing cached fits, and giving memory back to the device.
//!
//! Without virtual memory a segment is one device allocation, sized as PyTorch sizes
//! it, and only whole free segments go back. With virtual memory the work is done by
//! `vmm` (growth at an arena's top, whole chunks going back).
//!
//! Memory goes back only on `empty_cache`, under a `garbage_collection_threshold`, or
//! when the device (or the cap) refuses a growth, never on `free`. Under pressure the
//! allocator gives back first the memory that needs no wait (a completed fence covers
//! it), tries again, then the memory a stream's outstanding fence covers (waiting for
//! that fence), and only last memory that needs a stream synchronisation.

use crate::backend::{BackendError, DeviceAddr, StreamId};

use super::block::BlockState;
use super::fences::Cover;
use super::oom::{AllocError, OomCause};
use super::rounding::{Pool, ROUND_LARGE, segment_size};
use super::segment::{Segment, SegmentMemory};
use super::state::AllocState;

/// Why memory could not be added.
pub(super) enum GrowError {
    NoMemory(OomCause),
    Backend(BackendError),
}

impl From<BackendError> for GrowError {
    fn from(e: BackendError) -> Self {
        if e.is_out_of_memory() {
            GrowError::NoMemory(OomCause::Device)
        } else {
            GrowError::Backend(e)
        }
    }
}

/// The waits memory may need before it goes back, cheapest first.
const WAITS: [Cover; 3] = [Cover::Done, Cover::Fence, Cover::Stream];

impl AllocState {
    /// No free block fits: add memory; when the device (or the cap) refuses, give back
    /// cached memory, cheapest first, and ask again. Returns a free block of at least
    /// `rounded` (in its free index or the wilderness).
    #[cold]
    pub(super) fn grow(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
        requested: usize,
    ) -> Result<u32, AllocError> {
        if let Some(t) = self.config.garbage_collection_threshold {
            let incoming = if self.vmm {
                rounded
            } else {
                segment_size(rounded)
            };
            self.collect_garbage(t, incoming)?;
            if let Some(b) = self.find_merged(stream, pool, rounded) {
                return Ok(b);
            }
        }
        let mut cause = match self.add_memory(stream, pool, rounded) {
            Ok(b) => return Ok(b),
            Err(GrowError::Backend(e)) => return Err(e.into()),
            Err(GrowError::NoMemory(cause)) => cause,
        };
        // Blocks held by other streams' events: wait for them, they may fit.
        self.synchronize_and_free_events()?;
        if let Some(b) = self.find_cached(stream, pool, rounded) {
            return Ok(b);
        }
        self.stats.other.num_alloc_retries += 1;
        for max_wait in WAITS {
            // Each kind of wait that gave memory back earns a new try; the last one is
            // tried whatever it gave (the device may have memory again), as PyTorch does.
            if self.release_cached(max_wait)? == 0 && max_wait != Cover::Stream {
                continue;
            }
            if let Some(b) = self.find_merged(stream, pool, rounded) {
                return Ok(b);
            }
            match self.add_memory(stream, pool, rounded) {
                Ok(b) => return Ok(b),
                Err(GrowError::Backend(e)) => return Err(e.into()),
                Err(GrowError::NoMemory(c)) => cause = c,
            }
        }
        self.stats.other.num_ooms += 1;
        Err(AllocError::OutOfMemory(Box::new(
            self.oom_report(requested, rounded, pool, stream, cause),
        )))
    }

    /// After memory went back: with shared pools, free neighbours of two streams merged
    /// first (`sharing::join_free_neighbours`) may now hold the request. (Giving memory
    /// back alone makes no free block larger, so pools per stream have nothing to look
    /// for.)
    fn find_merged(&mut self, stream: StreamId, pool: Pool, rounded: usize) -> Option<u32> {
        if self.share {
            self.find_cached(stream, pool, rounded)
        } else {
            None
        }
    }

    /// A cached free block (or wilderness) for `rounded` bytes, if any.
    pub(super) fn find_cached(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Option<u32> {
        match self.find_free(stream, pool, rounded) {
            Some(b) => Some(b),
            None if self.vmm => self.find_wild(stream, pool, rounded),
            None => None,
        }
    }

    fn add_memory(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Result<u32, GrowError> {
        if self.vmm {
            return self.grow_mapped(stream, pool, rounded);
        }
        // PyTorch's segment size first, then (for 1-10 MiB requests, whose segments are
        // 20 MiB) just what the request needs.
        let preferred = segment_size(rounded);
        let tight = rounded.div_ceil(ROUND_LARGE) * ROUND_LARGE;
        match self.new_device_segment(stream, pool, preferred) {
            Err(GrowError::NoMemory(_)) if pool == Pool::Large && tight < preferred => {
                self.new_device_segment(stream, pool, tight)
            }
            other => other,
        }
    }

    pub(super) fn check_limit(&self, extra: usize) -> Result<(), GrowError> {
        match &self.limit {
            Some((limit, how)) if self.reserved().saturating_add(extra) > *limit => {
                Err(GrowError::NoMemory(OomCause::Limit {
                    limit: *limit,
                    how: how.clone(),
                }))
            }
            _ => Ok(()),
        }
    }

    /// A plain segment: one device allocation.
    fn new_device_segment(
        &mut self,
        stream: StreamId,
        pool: Pool,
        size: usize,
    ) -> Result<u32, GrowError> {
        self.check_limit(size)?;
        let addr = self.backend.malloc(size)?;
        self.stats.other.num_device_alloc += 1;
        self.stats.other.reserved_bytes.add(pool, size);
        Ok(self.add_segment(addr.0, size, stream, pool, SegmentMemory::Device))
    }

    /// Records a new segment whose memory is in place, as one free block (indexed, or
    /// its arena's wilderness).
    pub(super) fn add_segment(
        &mut self,
        base: u64,
        size: usize,
        stream: StreamId,
        pool: Pool,
        memory: SegmentMemory,
    ) -> u32 {
        let block = self.slab.insert(base, size, 0, stream, pool);
        let seg_index = self.insert_segment(Segment {
            base,
            size,
            stream,
            pool,
            memory,
            head: block,
            last_used: self.tick,
        });
        self.slab.get_mut(block).segment = seg_index;
        self.index_free(block);
        block
    }

    pub(super) fn insert_segment(&mut self, seg: Segment) -> u32 {
        self.count_segment(seg.pool, seg.size, true);
        let arena = seg.arena();
        let base = seg.base;
        let index = match self.vacant_segments.pop() {
            Some(i) => {
                self.segments[i as usize] = Some(seg);
                i
            }
            None => {
                self.segments.push(Some(seg));
                (self.segments.len() - 1) as u32
            }
        };
        if let Some(a) = arena {
            self.arenas[a as usize].segments.insert(base, index);
        }
        index
    }

    pub(super) fn remove_segment(&mut self, index: u32) -> Segment {
        let seg = self.segments[index as usize]
            .take()
            .expect("segment exists");
        self.vacant_segments.push(index);
        self.count_segment(seg.pool, seg.size, false);
        if let Some(a) = seg.arena() {
            self.arenas[a as usize].segments.remove(&seg.base);
        }
        seg
    }

    /// Segment counts (and oversize segment counts) for a segment appearing or going.
    pub(super) fn count_segment(&mut self, pool: Pool, size: usize, added: bool) {
        let oversize = size >= self.config.max_split_size;
        let s = &mut self.stats.other;
        if added {
            s.segment.add(pool, 1);
            if oversize {
                s.oversize_segments.current += 1;
                s.oversize_segments.allocated += 1;
                s.oversize_segments.peak =
                    s.oversize_segments.peak.max(s.oversize_segments.current);
            }
        } else {
            s.segment.sub(pool, 1);
            if oversize {
                s.oversize_segments.current -= 1;
                s.oversize_segments.freed += 1;
            }
        }
    }

    /// Oversize segment counts for a segment that changed size.
    pub(super) fn resize_oversize(&mut self, _pool: Pool, old: usize, new: usize) {
        let limit = self.config.max_split_size;
        let s = &mut self.stats.other.oversize_segments;
        match (old >= limit, new >= limit) {
            (false, true) => {
                s.current += 1;
                s.allocated += 1;
                s.peak = s.peak.max(s.current);
            }
            (true, false) => {
                s.current -= 1;
                s.freed += 1;
            }
            _ => {}
        }
    }

    /// Waits for `stream`'s queued work, so its free memory can be unmapped or freed.
    /// Everything freed on it so far is then idle (its fences included).
    pub(super) fn sync_stream(&mut self, stream: StreamId) -> Result<(), BackendError> {
        self.stats.other.num_stream_syncs += 1;
        self.backend.synchronize_stream(stream)?;
        self.fences.synced(stream, self.tick);
        Ok(())
    }

    /// Plain segments that are one free block, least recently used first.
    fn free_device_segments(&self) -> Vec<u32> {
        let mut out: Vec<(u64, u32)> = self
            .segments
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = s.as_ref()?;
                let head = self.slab.get(s.head);
                (matches!(s.memory, SegmentMemory::Device)
                    && head.state == BlockState::Free
                    && head.next == super::block::NIL)
                    .then_some((s.last_used, i as u32))
            })
            .collect();
        out.sort_unstable();
        out.into_iter().map(|(_, i)| i).collect()
    }

    /// Returns whole free plain segment `seg` to the device if what its memory must wait
    /// for is at most `max_wait` (waiting for it). Returns the bytes given back.
    fn release_device_segment(&mut self, seg: u32, max_wait: Cover) -> Result<usize, BackendError> {
        let (head, stream) = {
            let s = self.segment(seg);
            (s.head, s.stream)
        };
        let freed_at = self.slab.get(head).freed_at;
        if !self.wait_freed_upto(stream, freed_at, max_wait)? {
            return Ok(0);
        }
        self.stats.other.num_device_free += 1;
        let (base, size) = {
            let s = self.segment(seg);
            (s.base, s.size)
        };
        // SAFETY: the segment is free and no queued work uses it (waited above).
        unsafe { self.backend.free(DeviceAddr(base), size) }?;
        let seg = self.remove_segment(seg);
        self.unindex_free(head);
        self.slab.remove(head);
        self.stats.other.reserved_bytes.sub(seg.pool, seg.size);
        Ok(seg.size)
    }

    /// Gives back every cached byte whose memory needs at most `max_wait` before it can
    /// go: whole free segments (plain), or every whole chunk inside a free block
    /// (virtual memory), and chunks left over from failed driver calls. Returns the
    /// bytes given back.
    pub fn release_cached(&mut self, max_wait: Cover) -> Result<usize, BackendError> {
        let orphans = self.release_orphans();
        let released = if self.vmm {
            self.release_free_chunks(max_wait, max_wait, |_| false)?
        } else {
            let mut released = 0;
            for seg in self.free_device_segments() {
                released += self.release_device_segment(seg, max_wait)?;
            }
            released
        };
        orphans.map(|()| released)
    }

    /// Waits for outstanding events, then releases everything cached.
    pub fn empty_cache(&mut self) -> Result<(), BackendError> {
        self.synchronize_and_free_events()?;
        self.release_cached(Cover::Stream).map(|_| ())
    }

    /// Gives back least recently used free memory until reserved memory plus
    /// `incoming` is under `threshold` of the cap (or of the device).
    fn collect_garbage(&mut self, threshold: f64, incoming: usize) -> Result<(), BackendError> {
        let cap = self.limit().unwrap_or(self.total_memory);
        let target = (cap as f64 * threshold) as usize;
        let enough = |st: &AllocState| st.reserved() + incoming <= target;
        if enough(self) {
            return Ok(());
        }
        if self.vmm {
            // Garbage collection waits only for the memory it gives back, not to merge.
            self.release_free_chunks(Cover::Stream, Cover::Done, enough)?;
        } else {
            for seg in self.free_device_segments() {
                if enough(self) {
                    break;
                }
                self.release_device_segment(seg, Cover::Stream)?;
            }
        }
        Ok(())
    }
}
