//! The allocator's state and its hot paths, behind the lock of
//! [`CachingAllocator`](super::CachingAllocator).
//!
//! * malloc: process completed cross-stream events, round the size, take the best-fitting
//!   free block of the stream's pool and split it; when none fits, grow (see
//!   `memory`).
//! * free: a block other streams used waits for the work queued on those streams before
//!   it (the next malloc asks each such stream once for all the frees since the last:
//!   `events`); any other merges with its free neighbours at once and returns to its
//!   pool. Every free
//!   stamps the block (`freed_at`) and its stream (for fences) with a new tick.
//!
//! Segment and chunk management lives in `memory` and `vmm`, reports and checks in
//! `inspect`.
//! Free memory goes back (chunks unmapped, segments released) only once no
//! queued work uses it: `fences` decides, from the block's `freed_at` and the stream's
//! fences, whether that needs no wait, a wait on a fence event, or a stream sync.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::backend::{Backend, BackendError, StreamId};
use crate::trace_format::TraceOp;

use super::block::{BlockSlab, BlockState, NIL};
use super::config::AllocConfig;
use super::events::PendingFrees;
use super::fences::Fences;
use super::free_index::FreeIndex;
use super::live_stats::LiveStats;
use super::oom::AllocError;
use super::oom::OomCause;
use super::rounding::{MAX_ALLOCATION, Pool, ROUND_LARGE, round_size, should_split};
use super::segment::{Arena, Orphan, PhysChunk, Segment};

/// An allocation trace being recorded.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    pub ops: Vec<TraceOp>,
    pub next_id: u64,
    /// Trace ids of the blocks allocated while recording, by block index.
    pub ids: FxHashMap<u32, u64>,
}

/// Other streams an allocated block was used on (`record_stream`), and, once it is
/// freed, how many of their events (or deferred waits, see `PendingFrees::defer`) it
/// still waits for.
#[derive(Debug, Default)]
pub(super) struct StreamUses {
    /// Inline for up to two streams, so `record_stream` allocates nothing.
    pub streams: SmallVec<[StreamId; 2]>,
    pub pending_events: u32,
}

pub(crate) struct AllocState {
    pub(super) backend: Arc<dyn Backend>,
    pub config: AllocConfig,
    /// Whether segments are built from virtual memory (chunks mapped into arenas).
    pub(super) vmm: bool,
    /// Whether every stream's memory is one pool (virtual memory with
    /// `share_across_streams`): free indexes and arenas are then kept in slot 0, and a
    /// free block serves another stream once its stream's work before the free is seen
    /// done (`sharing`).
    pub(super) share: bool,
    /// Streams a query found busy during the current allocation (not asked again in it).
    pub(super) polled_busy: SmallVec<[StreamId; 2]>,
    /// Virtual memory granularity: chunks and mappings are multiples of it.
    pub(super) page: usize,
    pub slab: BlockSlab,
    pub(super) segments: Vec<Option<Segment>>,
    pub(super) vacant_segments: Vec<u32>,
    /// Free indexes by slot (the stream's, or 0 for all when they share), then pool.
    pub(super) pools: Vec<[FreeIndex; 2]>,
    pub(super) chunks: Vec<Option<PhysChunk>>,
    pub(super) vacant_chunks: Vec<u32>,
    /// Chunks a failed driver call left outside any segment, still held.
    pub(super) orphans: Vec<Orphan>,
    /// Address arenas (virtual memory), and their indices by slot, then pool.
    pub(super) arenas: Vec<Arena>,
    pub(super) arena_lists: Vec<[Vec<u32>; 2]>,
    pub(super) pending: PendingFrees,
    /// Blocks used on other streams (`Block::used_elsewhere`), by block index.
    pub(super) stream_uses: FxHashMap<u32, StreamUses>,
    /// Stream fences (`record_fence`).
    pub(super) fences: Fences,
    pub stats: LiveStats,
    pub(super) limit: Option<(usize, String)>,
    pub(super) total_memory: usize,
    pub(super) tick: u64,
    /// Streams the backend confirmed it has.
    known_streams: Vec<bool>,
    /// Devices (ordinals) granted access to every chunk mapped (`peer_access`).
    pub(super) peers: Vec<usize>,
    pub recording: Option<Recording>,
    scratch: Vec<u32>,
}

impl AllocState {
    pub fn new(backend: Arc<dyn Backend>, config: AllocConfig) -> Result<Self, BackendError> {
        let total_memory = backend.mem_info()?.total;
        let (vmm, page) = match backend.virtual_memory() {
            Some(vm) if config.expandable_segments => (true, vm.granularity()),
            _ => (false, ROUND_LARGE),
        };
        let mut state = AllocState {
            backend,
            vmm,
            share: vmm && config.share_across_streams,
            polled_busy: SmallVec::new(),
            page,
            slab: BlockSlab::default(),
            segments: Vec::new(),
            vacant_segments: Vec::new(),
            pools: Vec::new(),
            chunks: Vec::new(),
            vacant_chunks: Vec::new(),
            orphans: Vec::new(),
            arenas: Vec::new(),
            arena_lists: Vec::new(),
            pending: PendingFrees::default(),
            stream_uses: FxHashMap::default(),
            fences: Fences::default(),
            stats: LiveStats::default(),
            limit: None,
            total_memory,
            tick: 0,
            known_streams: Vec::new(),
            peers: Vec::new(),
            recording: None,
            scratch: Vec::new(),
            config,
        };
        state.stats.other.max_split_size = if state.config.max_split_size == usize::MAX {
            -1
        } else {
            state.config.max_split_size as i64
        };
        state.update_limit();
        Ok(state)
    }

    /// Whether segments are built from virtual memory.
    pub fn uses_virtual_memory(&self) -> bool {
        self.vmm
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Recomputes the cap on reserved memory from the configuration.
    pub fn update_limit(&mut self) {
        let fraction = self.config.per_process_memory_fraction;
        let mut limit: Option<(usize, String)> = None;
        if fraction < 1.0 {
            let bytes = (self.total_memory as f64 * fraction) as usize;
            limit = Some((bytes, format!("per_process_memory_fraction {fraction}")));
        }
        if let Some(bytes) = self.config.memory_limit {
            if limit.as_ref().is_none_or(|(l, _)| bytes < *l) {
                limit = Some((bytes, format!("memory_limit_mb {}", bytes >> 20)));
            }
        }
        self.limit = limit;
    }

    /// The cap on reserved memory, if any.
    pub fn limit(&self) -> Option<usize> {
        self.limit.as_ref().map(|(l, _)| *l)
    }

    pub(super) fn reserved(&self) -> usize {
        self.stats.other.reserved_bytes.all.current as usize
    }

    #[inline]
    fn ensure_stream(&mut self, stream: StreamId) {
        let slot = self.slot(stream);
        if self.pools.len() <= slot {
            self.pools.resize_with(slot + 1, Default::default);
        }
    }

    /// Refuses a stream the backend never created (checked once per stream).
    #[inline(always)]
    pub(super) fn check_stream(&mut self, stream: StreamId) -> Result<(), AllocError> {
        if self
            .known_streams
            .get(stream.index())
            .copied()
            .unwrap_or(false)
        {
            return Ok(());
        }
        if !self.backend.has_stream(stream) {
            return Err(AllocError::Backend(BackendError::InvalidHandle {
                what: "stream",
                detail: format!(
                    "{stream} is not a stream of {}: create streams with the device's backend",
                    self.backend.name()
                ),
            }));
        }
        if self.known_streams.len() <= stream.index() {
            self.known_streams.resize(stream.index() + 1, false);
        }
        self.known_streams[stream.index()] = true;
        Ok(())
    }

    // ----------------------------------------------------------------- malloc

    pub fn malloc(&mut self, size: usize, stream: StreamId) -> Result<u32, AllocError> {
        self.check_stream(stream)?;
        if size > MAX_ALLOCATION {
            return Err(self.too_large(size, stream));
        }
        self.polled_busy.clear();
        if !self.pending.is_empty() {
            self.process_events()?;
        }
        let rounded = round_size(size, &self.config);
        let pool = Pool::for_size(rounded);
        self.ensure_stream(stream);
        let block = match self.find_free(stream, pool, rounded) {
            Some(b) => b,
            None => {
                let wild = if self.vmm {
                    self.find_wild(stream, pool, rounded)
                } else {
                    None
                };
                match wild {
                    Some(w) => w,
                    None => self.grow(stream, pool, rounded, size)?,
                }
            }
        };
        Ok(self.take_block(block, rounded, size, stream))
    }

    #[cold]
    fn too_large(&mut self, size: usize, stream: StreamId) -> AllocError {
        self.stats.other.num_ooms += 1;
        AllocError::OutOfMemory(Box::new(self.oom_report(
            size,
            size,
            Pool::Large,
            stream,
            OomCause::TooLarge,
        )))
    }

    /// The best-fitting free block of the stream's pool that may serve it, within
    /// `max_split_size` rules.
    #[inline(always)]
    pub(super) fn find_free(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Option<u32> {
        let mut index = self.pools[self.slot(stream)][pool.index()].find(&self.slab, rounded)?;
        if self.share && !self.clean_for(index, stream) {
            index = self.find_usable(stream, pool, rounded)?;
        }
        if pool == Pool::Large {
            let size = self.slab.get(index).size;
            let max_split = self.config.max_split_size;
            if rounded < max_split && size >= max_split {
                return None;
            }
            if rounded >= max_split
                && size >= rounded.saturating_add(self.config.max_non_split_rounding)
            {
                return None;
            }
        }
        Some(index)
    }

    /// Hands out free block `index` for `rounded` bytes to `stream`, splitting off the
    /// rest (which keeps the block's stream and free tick).
    #[inline(always)]
    fn take_block(&mut self, index: u32, rounded: usize, requested: usize, to: StreamId) -> u32 {
        let (stream, pool, size, (left, left_bytes)) = {
            let b = self.slab.get(index);
            (b.stream, b.pool, b.size, b.split_share())
        };
        self.unplace_free(index, stream, pool);
        // Inactive splits, net: the block leaves them if it was one, the rest joins them.
        let (mut split_blocks, mut split_bytes) = (-left, -left_bytes);
        if should_split(pool, size, rounded, &self.config, self.vmm) {
            let (addr, segment, next, freed_at) = {
                let b = self.slab.get(index);
                (b.addr, b.segment, b.next, b.freed_at)
            };
            let rest =
                self.slab
                    .insert(addr + rounded as u64, size - rounded, segment, stream, pool);
            {
                let r = self.slab.get_mut(rest);
                r.prev = index;
                r.next = next;
                // The rest was freed when the block was: fences and syncs go by it.
                r.freed_at = freed_at;
            }
            if next != NIL {
                self.slab.get_mut(next).prev = rest;
            }
            let b = self.slab.get_mut(index);
            b.next = rest;
            b.size = rounded;
            self.place_free(rest, stream, pool);
            // The rest is split off `index`, so it is an inactive split.
            split_blocks += 1;
            split_bytes += (size - rounded) as i64;
        }
        self.stats.inactive_split.change(pool, split_blocks);
        self.stats.inactive_split_bytes.change(pool, split_bytes);
        if let Some(rec) = &mut self.recording {
            let id = rec.next_id;
            rec.next_id += 1;
            rec.ops.push(TraceOp::Alloc {
                id,
                size: requested,
                stream: to.0,
            });
            rec.ids.insert(index, id);
        }
        let b = self.slab.get_mut(index);
        b.state = BlockState::Allocated;
        b.stream = to;
        b.requested = requested;
        let size = b.size;
        let s = &mut self.stats;
        s.allocation.add(pool, 1);
        s.allocated_bytes.add(pool, size);
        s.active.add(pool, 1);
        s.active_bytes.add(pool, size);
        s.requested_bytes.add(pool, requested);
        if size >= self.config.max_split_size {
            let o = &mut s.other.oversize_allocations;
            o.current += 1;
            o.allocated += 1;
            o.peak = o.peak.max(o.current);
        }
        index
    }

    // ------------------------------------------------------------------- free

    /// Checks that a handle names a block this allocator has allocated.
    pub fn check_handle(&self, index: u32, generation: u32) -> Result<(), AllocError> {
        match self.slab.blocks.get(index as usize) {
            Some(b) if b.generation == generation && b.state == BlockState::Allocated => Ok(()),
            _ => Err(AllocError::InvalidBlock(format!(
                "block #{index} (generation {generation}) is not allocated by this allocator: freed twice, or from another device"
            ))),
        }
    }

    pub fn free(&mut self, index: u32, generation: u32) -> Result<(), AllocError> {
        self.check_handle(index, generation)?;
        let (pool, size, requested, used_elsewhere) = {
            let b = self.slab.get(index);
            (b.pool, b.size, b.requested, b.used_elsewhere)
        };
        self.stats.allocation.sub(pool, 1);
        self.stats.allocated_bytes.sub(pool, size);
        self.stats.requested_bytes.sub(pool, requested);
        if size >= self.config.max_split_size {
            self.stats.other.oversize_allocations.current -= 1;
            self.stats.other.oversize_allocations.freed += 1;
        }
        if let Some(rec) = &mut self.recording {
            if let Some(id) = rec.ids.remove(&index) {
                rec.ops.push(TraceOp::Free { id });
            }
        }
        if !used_elsewhere {
            self.free_block(index);
            return Ok(());
        }
        // One lookup: the streams the block waits for, each now a pending wait.
        let streams = match self.stream_uses.get_mut(&index) {
            Some(uses) if !uses.streams.is_empty() => {
                uses.pending_events = uses.streams.len() as u32;
                std::mem::take(&mut uses.streams)
            }
            _ => {
                // Nothing to wait for after all: an ordinary free.
                self.stream_uses.remove(&index);
                self.slab.get_mut(index).used_elsewhere = false;
                self.free_block(index);
                return Ok(());
            }
        };
        self.slab.get_mut(index).state = BlockState::PendingFree;
        // No driver call here: the next poll (`seal_frees`) asks each stream once for
        // every such free since the last.
        for &s in &streams {
            self.pending.add(s, index);
        }
        Ok(())
    }

    /// Seals the cross-stream frees noted since the last poll (`PendingFrees::seal`):
    /// the blocks of idle streams come back now; a busy stream whose event cannot be
    /// recorded is waited for instead (slower, still correct), and when that fails too,
    /// its frees keep waiting and later polls retry them (the error is returned).
    fn seal_frees(&mut self) -> Result<(), BackendError> {
        if self.pending.all_sealed() {
            return Ok(());
        }
        // The blocks of idle streams, in the poll's scratch list (no allocation in a
        // steady state).
        let mut done = std::mem::take(&mut self.scratch);
        done.clear();
        let mut failed = Vec::new();
        // A stream found idle has finished every free on it so far: memory it freed may
        // serve other streams without another query (`sharing`); one found busy is not
        // asked again in the same allocation.
        let (fences, tick, busy) = (&mut self.fences, self.tick, &mut self.polled_busy);
        self.pending.seal(
            &*self.backend,
            &mut self.stats.other,
            &mut done,
            &mut failed,
            |stream, idle| {
                if idle {
                    fences.synced(stream, tick);
                } else if !busy.contains(&stream) {
                    busy.push(stream);
                }
            },
        );
        self.finish_pending(&done);
        self.scratch = done;
        let mut result = Ok(());
        for group in failed.chunk_by(|a, b| a.0 == b.0) {
            let stream = group[0].0;
            match self.sync_stream(stream) {
                Ok(()) => {
                    let blocks: Vec<u32> = group.iter().map(|&(_, b)| b).collect();
                    self.finish_pending(&blocks);
                }
                Err(e) => {
                    for &(s, block) in group {
                        self.pending.defer(s, block);
                    }
                    result = Err(e);
                }
            }
        }
        result
    }

    pub fn record_stream(
        &mut self,
        index: u32,
        generation: u32,
        stream: StreamId,
    ) -> Result<(), AllocError> {
        self.check_handle(index, generation)?;
        self.check_stream(stream)?;
        let b = self.slab.get_mut(index);
        if stream != b.stream {
            b.used_elsewhere = true;
            let uses = self.stream_uses.entry(index).or_default();
            if !uses.streams.contains(&stream) {
                uses.streams.push(stream);
            }
        }
        Ok(())
    }

    /// Makes block `index` free: merges it with free neighbours and indexes it (or
    /// makes it its arena's wilderness).
    #[inline(always)]
    pub(super) fn free_block(&mut self, index: u32) {
        let (pool, stream, size, segment) = {
            let b = self.slab.get_mut(index);
            b.state = BlockState::Free;
            (b.pool, b.stream, b.size, b.segment)
        };
        self.stats.active.sub(pool, 1);
        self.stats.active_bytes.sub(pool, size);
        // Inactive splits, net: free neighbours leave them, the merged block may join.
        let (mut split_blocks, mut split_bytes) = self.absorb_neighbours(index, stream);
        self.tick += 1;
        self.slab.get_mut(index).freed_at = self.tick;
        self.fences.note_free(stream, self.tick);
        if let Some(seg) = &mut self.segments[segment as usize] {
            seg.last_used = self.tick;
            if let Some(a) = seg.arena() {
                self.arenas[a as usize].growth_run = None;
            }
        }
        let (joined, joined_bytes) = self.slab.get(index).split_share();
        split_blocks += joined;
        split_bytes += joined_bytes;
        self.stats.inactive_split.change(pool, split_blocks);
        self.stats.inactive_split_bytes.change(pool, split_bytes);
        self.place_free(index, stream, pool);
    }

    fn process_events(&mut self) -> Result<(), BackendError> {
        let sealed = self.seal_frees();
        let mut done = std::mem::take(&mut self.scratch);
        done.clear();
        let result = self
            .pending
            .take_completed(&*self.backend, &mut done, &mut self.stats.other);
        self.finish_pending(&done);
        self.scratch = done;
        sealed.and(result)
    }

    /// Waits for every outstanding event and frees the blocks they held.
    pub fn synchronize_and_free_events(&mut self) -> Result<(), BackendError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.stats.other.num_sync_all_streams += 1;
        let sealed = self.seal_frees();
        let mut done = Vec::new();
        let result = self
            .pending
            .take_all(&*self.backend, &mut done, &mut self.stats.other);
        self.finish_pending(&done);
        sealed.and(result)
    }

    fn finish_pending(&mut self, blocks: &[u32]) {
        for &index in blocks {
            let Entry::Occupied(mut uses) = self.stream_uses.entry(index) else {
                unreachable!("a pending free has its stream uses");
            };
            uses.get_mut().pending_events -= 1;
            if uses.get().pending_events == 0 {
                uses.remove();
                self.slab.get_mut(index).used_elsewhere = false;
                self.free_block(index);
            }
        }
    }

    /// Releases everything free (the allocator is going away). Returns the number of
    /// blocks still allocated, whose memory stays with the device.
    pub fn shutdown(&mut self) -> usize {
        let _ = self.empty_cache();
        let _ = self.release_orphans();
        self.release_empty_arenas();
        self.pending.destroy_idle(&*self.backend);
        self.fences.destroy(&*self.backend);
        self.stats.allocation.current() as usize
    }
}
