//! Growing when nothing cached fits, and giving memory back to the device.
//!
//! Without virtual memory a segment is one device allocation, sized as PyTorch sizes
//! it, and only whole free segments go back (on `empty_cache`, or when the device
//! refuses an allocation). With virtual memory the work is done by `pages`.
//!
//! Free memory of a stream is given back only once no queued work uses it:
//! `wait_freed` (see `fences`) waits for nothing, a fence, or the stream, by block.

use crate::backend::{BackendError, DeviceAddr, StreamId};

use super::block::BlockState;
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

impl AllocState {
    /// No free block fits: add memory, releasing cached memory and retrying once if the
    /// device refuses. Returns a free block (in its free index) of at least `rounded`.
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
        }
        match self.add_memory(stream, pool, rounded) {
            Ok(b) => return Ok(b),
            Err(GrowError::Backend(e)) => return Err(e.into()),
            Err(GrowError::NoMemory(_)) => {}
        }
        // Wait for blocks held by other streams' events, then give every cached byte
        // back to the device and ask again.
        self.synchronize_and_free_events()?;
        if let Some(b) = self.find_free(stream, pool, rounded) {
            return Ok(b);
        }
        self.release_cached()?;
        self.stats.num_alloc_retries += 1;
        match self.add_memory(stream, pool, rounded) {
            Ok(b) => Ok(b),
            Err(GrowError::Backend(e)) => Err(e.into()),
            Err(GrowError::NoMemory(cause)) => {
                self.stats.num_ooms += 1;
                Err(AllocError::OutOfMemory(Box::new(
                    self.oom_report(requested, rounded, pool, stream, cause),
                )))
            }
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
            Some((limit, how)) if self.reserved() + extra > *limit => {
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
        self.stats.num_device_alloc += 1;
        self.stats.reserved_bytes.add(pool, size);
        Ok(self.add_segment(addr.0, size, stream, pool, SegmentMemory::Device))
    }

    /// Records a new segment whose memory is in place, as one free block (indexed).
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
        self.pools[stream.index()][pool.index()].insert(&mut self.slab, block);
        block
    }

    pub(super) fn insert_segment(&mut self, seg: Segment) -> u32 {
        self.count_segment(seg.pool, seg.size, true);
        let arena = match &seg.memory {
            SegmentMemory::Mapped { arena, .. } => Some(*arena),
            SegmentMemory::Device => None,
        };
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
        if let SegmentMemory::Mapped { arena, .. } = &seg.memory {
            self.arenas[*arena as usize].segments.remove(&seg.base);
        }
        seg
    }

    /// Segment counts (and oversize segment counts) for a segment appearing or going.
    pub(super) fn count_segment(&mut self, pool: Pool, size: usize, added: bool) {
        let oversize = size >= self.config.max_split_size;
        let s = &mut self.stats;
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
        let s = &mut self.stats.oversize_segments;
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
        self.backend.synchronize_stream(stream)?;
        self.stats.num_stream_syncs += 1;
        self.fences.synced(stream, self.tick);
        Ok(())
    }

    /// Segments that are one free block (not waiting for events), with their stream and
    /// last use.
    pub(super) fn free_segments(&self) -> Vec<(u32, StreamId, u64)> {
        self.segments
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = s.as_ref()?;
                let head = self.slab.get(s.head);
                (head.state == BlockState::Free && head.next == super::block::NIL).then_some((
                    i as u32,
                    s.stream,
                    s.last_used,
                ))
            })
            .collect()
    }

    /// When the memory of whole free segment `seg` was last freed.
    fn segment_freed_at(&self, seg: u32) -> u64 {
        let head = self.segments[seg as usize]
            .as_ref()
            .expect("segment exists")
            .head;
        self.slab.get(head).freed_at
    }

    /// Returns a whole free plain segment to the device (the caller waited until no
    /// queued work uses it: `wait_freed`).
    fn release_device_segment(&mut self, seg_index: u32) -> Result<(), BackendError> {
        let head = self.segments[seg_index as usize]
            .as_ref()
            .expect("segment exists")
            .head;
        let seg = self.remove_segment(seg_index);
        self.pools[seg.stream.index()][seg.pool.index()].remove(&mut self.slab, head);
        self.slab.remove(head);
        self.stats.reserved_bytes.sub(seg.pool, seg.size);
        self.stats.num_device_free += 1;
        // SAFETY: the segment is free and the caller waited for the work that used it.
        unsafe { self.backend.free(DeviceAddr(seg.base), seg.size) }
    }

    /// Gives every cached byte that can go back to the device: whole free segments
    /// (plain), or every whole free page and then every chunk with no page mapped
    /// (virtual memory).
    pub fn release_cached(&mut self) -> Result<(), BackendError> {
        if self.vmm {
            return self.release_free_pages();
        }
        // A stream is synchronised at most once: the sync covers all its frees so far.
        for (seg, stream, _) in self.free_segments() {
            self.wait_freed(stream, self.segment_freed_at(seg))?;
            self.release_device_segment(seg)?;
        }
        Ok(())
    }

    /// Waits for outstanding events, then releases everything cached.
    pub fn empty_cache(&mut self) -> Result<(), BackendError> {
        self.synchronize_and_free_events()?;
        self.release_cached()
    }

    /// Releases the least recently used free segments until reserved memory plus
    /// `incoming` is under `threshold` of the cap (or of the device).
    fn collect_garbage(&mut self, threshold: f64, incoming: usize) -> Result<(), BackendError> {
        let cap = self.limit().unwrap_or(self.total_memory);
        let target = (cap as f64 * threshold) as usize;
        if self.reserved() + incoming <= target {
            return Ok(());
        }
        let mut free = self.free_segments();
        free.sort_unstable_by_key(|&(i, _, used)| (used, i));
        for (seg, stream, _) in free {
            if self.reserved() + incoming <= target {
                break;
            }
            self.wait_freed(stream, self.segment_freed_at(seg))?;
            if self.vmm {
                self.release_segment_pages(seg)?;
            } else {
                self.release_device_segment(seg)?;
            }
        }
        Ok(())
    }
}
