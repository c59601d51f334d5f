//! Free blocks merging with their free neighbours (on `free`, and before memory goes
//! back), within a segment's address-ordered list of blocks.

use crate::backend::StreamId;

use super::block::{BlockState, NIL};
use super::state::AllocState;

impl AllocState {
    /// Merges into free block `index` (of `stream`) its free neighbours, on both sides,
    /// while they may serve `stream` (`sharing`: across streams, a neighbour holding
    /// memory of a stream still at work stays apart). Returns what the merged neighbours
    /// took from the inactive-split statistics (blocks, bytes), for the caller to count.
    #[inline(always)]
    pub(super) fn absorb_neighbours(&mut self, index: u32, stream: StreamId) -> (i64, i64) {
        let (mut blocks, mut bytes) = (0i64, 0i64);
        for before in [true, false] {
            loop {
                let other = {
                    let b = self.slab.get(index);
                    if before { b.prev } else { b.next }
                };
                if other == NIL
                    || self.slab.get(other).state != BlockState::Free
                    || (self.share && !self.clean_for(other, stream))
                {
                    break;
                }
                let (left, left_bytes) = self.slab.get(other).split_share();
                blocks -= left;
                bytes -= left_bytes;
                self.absorb(index, other, before);
            }
        }
        (blocks, bytes)
    }

    /// Merges free neighbour `other` (before `index` when `before`) into `index`; the
    /// caller counts the inactive splits.
    #[inline(always)]
    pub(super) fn absorb(&mut self, index: u32, other: u32, before: bool) {
        let (o_addr, o_size, o_prev, o_next, o_stream, o_pool, o_freed_at) = {
            let o = self.slab.get(other);
            (o.addr, o.size, o.prev, o.next, o.stream, o.pool, o.freed_at)
        };
        // (Its inactive-split statistics are the caller's.)
        self.unplace_free(other, o_stream, o_pool);
        if before {
            if o_prev != NIL {
                self.slab.get_mut(o_prev).next = index;
            } else {
                let seg = self.slab.get(index).segment;
                if let Some(s) = &mut self.segments[seg as usize] {
                    s.head = index;
                }
            }
            let b = self.slab.get_mut(index);
            b.addr = o_addr;
            b.prev = o_prev;
            b.size += o_size;
        } else {
            if o_next != NIL {
                self.slab.get_mut(o_next).prev = index;
            }
            let b = self.slab.get_mut(index);
            b.next = o_next;
            b.size += o_size;
        }
        // Memory of the same stream: the newest free decides what it waits for (memory of
        // another stream joins only once that stream's work on it is done).
        let b = self.slab.get_mut(index);
        if b.stream == o_stream {
            b.freed_at = b.freed_at.max(o_freed_at);
        }
        self.slab.remove(other);
    }
}
