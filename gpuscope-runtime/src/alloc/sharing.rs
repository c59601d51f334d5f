//! Memory across streams: with virtual memory and `share_across_streams:True` (opt-in),
//! every stream's small and large requests are served from one pool each, as if there
//! were one stream, except that memory freed on one stream may still be in use by work
//! queued on it.
//!
//! A free block carries the stream that last allocated it and the tick of its free
//! (`Block::stream`, `Block::freed_at`). It serves its own stream at once, and another
//! stream once that stream's work queued before the free is known done: the stream's
//! `completed` tick (`fences`: a completed fence, a synchronisation, or a poll that found
//! the stream idle) is at least the free's. When the best-fitting block is another
//! stream's and that is not known, the allocator asks that stream once
//! (`cuStreamQuery`, non-blocking): idle, every free on it so far is covered and the
//! block is taken; busy, the search goes on among the blocks that need no wait, asking
//! each other stream at most once. Free neighbours merge on the same rule, so a free
//! block never holds memory of two streams whose work may still use it. Nothing waits:
//! a stream whose work is still running keeps its frees to itself until a later poll.
//!
//! In a replay, where every stream is idle when asked, the placement is one pool's best
//! fit over every free block, as the placement model's `eager` design
//! (`bench/alloc_model/crossstream.py`), and passes repeat: on the multi-stream traces
//! of `tests/data/traces` it reserves up to 29% less than pools per stream.
//!
//! Where streams are busy when asked, as on a GPU that the host runs ahead of, it does
//! worse: memory a stream finds free on a stream that happens to be idle is taken, and
//! its owner, asking later while the taker is busy, must grow; over steps the pool keeps
//! growing (`tests/busy_replay.rs`: the multi-stream traces replayed with each stream's
//! work finishing a few launches behind reserve up to 1.8 times what pools per stream
//! do, and still grow in the sixth pass). So it is off by default: with
//! `share_across_streams:False` each stream has pools of its own, as in PyTorch, and its
//! memory reaches another stream only by going back to the device (`release`).

use crate::backend::{Backend, BackendError, StreamId};

use super::block::{Block, BlockState, NIL};
use super::fences::{Cover, Fences};
use super::rounding::Pool;
use super::state::AllocState;
use super::stats::MemoryStats;

impl AllocState {
    /// The slot of `stream`'s free indexes and arenas: 0 for every stream when they
    /// share, else the stream's own.
    #[inline(always)]
    pub(super) fn slot(&self, stream: StreamId) -> usize {
        if self.share { 0 } else { stream.index() }
    }

    /// Whether free block `index` may serve `stream` as far as is known (no query): it
    /// is `stream`'s own, or its stream's work before its free is done.
    #[inline(always)]
    pub(super) fn is_clean_for(&self, index: u32, stream: StreamId) -> bool {
        serves(self.slab.get(index), stream, &self.fences)
    }

    /// [`Self::is_clean_for`], asking the block's stream whether it is idle when that
    /// decides it.
    #[inline(always)]
    pub(super) fn clean_for(&mut self, index: u32, stream: StreamId) -> bool {
        if self.is_clean_for(index, stream) {
            return true;
        }
        let owner = self.slab.get(index).stream;
        self.poll_idle(owner)
    }

    /// Asks whether `stream` has finished all its queued work (one non-blocking query;
    /// none when it was found busy earlier in the same allocation); if so, every free on
    /// it so far is covered. A failed query counts as busy: its memory waits for a later
    /// poll.
    #[cold]
    fn poll_idle(&mut self, stream: StreamId) -> bool {
        if self.polled_busy.contains(&stream) {
            return false;
        }
        let idle = ask_idle(
            &*self.backend,
            &mut self.stats.other,
            &mut self.fences,
            self.tick,
            stream,
        );
        if !idle {
            self.polled_busy.push(stream);
        }
        idle
    }

    /// The best-fitting free block of the pool that may serve `stream`, asking each other
    /// stream at most once in the allocation, none found busy in it again (the slow path
    /// of `find_free`, when the best fit is a busy stream's).
    #[cold]
    pub(super) fn find_usable(
        &mut self,
        stream: StreamId,
        pool: Pool,
        rounded: usize,
    ) -> Option<u32> {
        let slot = self.slot(stream);
        let busy = &mut self.polled_busy;
        let AllocState {
            pools,
            slab,
            fences,
            backend,
            stats,
            tick,
            ..
        } = self;
        pools[slot][pool.index()].find_where(slab, rounded, |b| {
            if serves(b, stream, fences) {
                return true;
            }
            if busy.contains(&b.stream) {
                return false;
            }
            let idle = ask_idle(&**backend, &mut stats.other, fences, *tick, b.stream);
            if !idle {
                busy.push(b.stream);
            }
            idle
        })
    }

    /// Before memory goes back: merges the free neighbours left apart because one held
    /// another stream's memory still in use when they met, once either side may serve
    /// the other's stream, waiting for at most `max_wait` to make it so (so that chunks
    /// across them can go back).
    pub(super) fn join_free_neighbours(&mut self, max_wait: Cover) -> Result<(), BackendError> {
        if !self.share {
            return Ok(());
        }
        let mut pairs: Vec<u32> = self
            .free_blocks()
            .filter(|&b| {
                let next = self.slab.get(b).next;
                next != NIL && self.slab.get(next).state == BlockState::Free
            })
            .collect();
        // From the highest address down, so a block a merge removes is never visited.
        pairs.sort_unstable_by_key(|&b| std::cmp::Reverse(self.slab.get(b).addr));
        for low in pairs {
            // A merge below may have taken it, or its neighbour.
            if self.slab.get(low).state != BlockState::Free {
                continue;
            }
            let high = self.slab.get(low).next;
            if high == NIL || self.slab.get(high).state != BlockState::Free {
                continue;
            }
            let (low_stream, low_at) = {
                let b = self.slab.get(low);
                (b.stream, b.freed_at)
            };
            let (high_stream, high_at) = {
                let b = self.slab.get(high);
                (b.stream, b.freed_at)
            };
            // The merged block keeps the tag of the side that may still be in use.
            let keep_low = if self.is_clean_for(high, low_stream) {
                true
            } else if self.is_clean_for(low, high_stream) {
                false
            } else if self.wait_freed_upto(high_stream, high_at, max_wait)? {
                true
            } else if self.wait_freed_upto(low_stream, low_at, max_wait)? {
                false
            } else {
                continue;
            };
            let (keep, other, before) = if keep_low {
                (low, high, false)
            } else {
                (high, low, true)
            };
            self.unindex_free(keep);
            // `absorb` takes `other` out of its index; its statistics are ours.
            let (pool, (split, split_bytes)) = {
                let o = self.slab.get(other);
                (o.pool, o.split_share())
            };
            self.stats.inactive_split.change(pool, -split);
            self.stats.inactive_split_bytes.change(pool, -split_bytes);
            self.absorb(keep, other, before);
            // Neighbours further on may now join it too.
            let stream = self.slab.get(keep).stream;
            let (split, split_bytes) = self.absorb_neighbours(keep, stream);
            self.stats.inactive_split.change(pool, split);
            self.stats.inactive_split_bytes.change(pool, split_bytes);
            self.index_free(keep);
        }
        Ok(())
    }
}

/// Whether free block `b` may serve `stream` as far as `fences` know: it is `stream`'s
/// own, or its stream's work before its free is done.
#[inline(always)]
fn serves(b: &Block, stream: StreamId, fences: &Fences) -> bool {
    b.stream == stream || b.freed_at <= fences.completed(b.stream)
}

/// One non-blocking query of `stream` (counted as a sharing query): idle, every free on
/// it up to `tick` is covered. A failed query counts as busy.
fn ask_idle(
    backend: &dyn Backend,
    stats: &mut MemoryStats,
    fences: &mut Fences,
    tick: u64,
    stream: StreamId,
) -> bool {
    stats.num_stream_queries += 1;
    stats.num_sharing_queries += 1;
    let idle = matches!(backend.query_stream(stream), Ok(true));
    if idle {
        fences.synced(stream, tick);
    }
    idle
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::alloc::{AllocConfig, CachingAllocator};
    use crate::backend::test::{EventMode, TestBackend};
    use crate::backend::{Backend, StreamId};

    const MIB: usize = 1 << 20;

    /// An allocator with virtual memory whose streams finish their work only when the
    /// test says so, two streams, and `conf`.
    fn setup(conf: &str) -> (Arc<TestBackend>, CachingAllocator, StreamId, StreamId) {
        let dev = Arc::new(
            TestBackend::builder()
                .capacity(1 << 30)
                .virtual_memory(2 * MIB)
                .event_mode(EventMode::Manual)
                .build(),
        );
        let alloc = CachingAllocator::new(dev.clone(), conf.parse().unwrap()).unwrap();
        let b = dev.create_stream().unwrap();
        (dev, alloc, StreamId::DEFAULT, b)
    }

    #[test]
    fn a_busy_stream_keeps_its_frees_and_an_idle_one_shares_them() {
        let (dev, alloc, a, b) = setup("share_across_streams:True");
        let x = alloc.allocate(8 * MIB, a).unwrap();
        dev.launch(a, x.addr(), 8 * MIB).unwrap();
        let addr = x.addr();
        alloc.free(x).unwrap();
        // `a`'s work on it still runs: `b` may not have it (the backend would panic on
        // the overlap only at unmap; here the address tells), so `b` grows.
        let y = alloc.allocate(8 * MIB, b).unwrap();
        assert_ne!(y.addr(), addr, "b took memory a's running work uses");
        let s = alloc.stats();
        assert_eq!((s.num_sharing_queries, s.num_stream_syncs), (1, 0));
        alloc.free(y).unwrap();
        // Once `a` is idle, one query hands its free to `b` as it is.
        dev.complete_stream(a);
        dev.complete_stream(b);
        let grown = alloc.stats().num_device_alloc;
        let z = alloc.allocate(8 * MIB, b).unwrap();
        assert_eq!(z.addr(), addr, "the best fit: the block a freed");
        let s = alloc.stats();
        assert_eq!(s.num_device_alloc, grown, "no growth");
        assert_eq!(s.num_sharing_queries, 2);
        alloc.free(z).unwrap();
        alloc.check_invariants().unwrap();
        alloc.empty_cache().unwrap();
        assert_eq!(dev.used(), 0);
    }

    #[test]
    fn free_neighbours_of_a_busy_stream_stay_apart_until_it_is_done() {
        let (dev, alloc, a, b) = setup("share_across_streams:True");
        let x = alloc.allocate(4 * MIB, a).unwrap();
        dev.launch(a, x.addr(), 4 * MIB).unwrap();
        // `b`'s block right above `x` (the wilderness is shared).
        let y = alloc.allocate(4 * MIB, b).unwrap();
        assert_eq!(y.addr().0, x.addr().0 + (4 * MIB) as u64);
        alloc.free(x).unwrap();
        alloc.free(y).unwrap();
        let blocks = |alloc: &CachingAllocator| -> usize {
            alloc.snapshot().iter().map(|s| s.blocks.len()).sum()
        };
        // `a` is busy: `y` does not merge with `x`.
        assert!(blocks(&alloc) >= 2);
        alloc.check_invariants().unwrap();
        // Memory going back waits for `a` (here: syncs it) and merges them first, so the
        // chunk across both goes back too.
        alloc.empty_cache().unwrap();
        assert_eq!(dev.used(), 0, "everything went back");
        alloc.check_invariants().unwrap();
    }

    #[test]
    fn without_sharing_each_stream_keeps_its_own_pools() {
        let (dev, alloc, a, b) = setup("share_across_streams:False");
        let x = alloc.allocate(8 * MIB, a).unwrap();
        let addr = x.addr();
        alloc.free(x).unwrap();
        dev.complete_stream(a);
        let y = alloc.allocate(8 * MIB, b).unwrap();
        assert_ne!(y.addr(), addr);
        assert_eq!(alloc.stats().num_sharing_queries, 0);
        alloc.free(y).unwrap();
    }

    #[test]
    fn the_configuration_names_the_switch() {
        let c: AllocConfig = "share_across_streams:True".parse().unwrap();
        assert!(c.share_across_streams);
        assert!(!AllocConfig::default().share_across_streams);
    }
}
