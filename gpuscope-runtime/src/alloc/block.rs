//! Blocks: pieces of a segment, allocated or free, kept in a slab and linked to their
//! address neighbours (for merging) and, when free, to their size class (for best fit).

use crate::backend::StreamId;

use super::rounding::Pool;

/// "No block": the end of a list.
pub(crate) const NIL: u32 = u32::MAX;

/// What a block is doing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BlockState {
    /// In its pool's free index, ready to be handed out.
    Free,
    /// Handed out and not freed.
    Allocated,
    /// Freed by its owner, but other streams used it: waiting for their events.
    PendingFree,
    /// The slab slot is unused.
    Vacant,
}

/// One block. Indices point into the allocator's block slab.
#[derive(Debug)]
pub(crate) struct Block {
    pub addr: u64,
    pub size: usize,
    /// Bytes the caller asked for (allocated blocks only).
    pub requested: usize,
    /// Address neighbours inside the same segment.
    pub prev: u32,
    pub next: u32,
    /// Links of the free list of the block's size class (free blocks only).
    pub free_prev: u32,
    pub free_next: u32,
    pub segment: u32,
    /// The stream that allocated it last; for a free block, the stream whose work may
    /// still use it until `freed_at` is covered (`sharing`).
    pub stream: StreamId,
    pub pool: Pool,
    pub state: BlockState,
    /// Bumped each time the slot is reused, so stale handles are caught.
    pub generation: u32,
    /// Whether other streams used the block (`record_stream`): which ones, and the
    /// events a pending free waits for, are in the allocator's `stream_uses` map, so
    /// that a block fits one cache line.
    pub used_elsewhere: bool,
    /// Allocator tick when the block last became free (0: never used). A free block
    /// split off another, or merged from several, keeps the newest tick of the memory it
    /// holds: queued work may use its memory until that tick is covered by a completed
    /// fence or a stream sync (see `fences`).
    pub freed_at: u64,
}

impl Block {
    /// Whether the block is one piece of a split segment.
    #[inline]
    pub fn is_split(&self) -> bool {
        self.prev != NIL || self.next != NIL
    }

    /// What the block adds to the inactive-split statistics when it is free: (1, its
    /// size) if it is one piece of a split segment, else nothing.
    #[inline]
    pub fn split_share(&self) -> (i64, i64) {
        if self.is_split() {
            (1, self.size as i64)
        } else {
            (0, 0)
        }
    }
}

/// The block slab: blocks by index, with recycled slots.
#[derive(Debug, Default)]
pub(crate) struct BlockSlab {
    pub blocks: Vec<Block>,
    vacant: Vec<u32>,
}

impl BlockSlab {
    /// A new free-state block; links are the caller's to set.
    pub fn insert(
        &mut self,
        addr: u64,
        size: usize,
        segment: u32,
        stream: StreamId,
        pool: Pool,
    ) -> u32 {
        if let Some(i) = self.vacant.pop() {
            let b = &mut self.blocks[i as usize];
            b.addr = addr;
            b.size = size;
            b.requested = 0;
            b.prev = NIL;
            b.next = NIL;
            b.free_prev = NIL;
            b.free_next = NIL;
            b.segment = segment;
            b.stream = stream;
            b.pool = pool;
            b.state = BlockState::Free;
            b.generation = b.generation.wrapping_add(1);
            b.used_elsewhere = false;
            b.freed_at = 0;
            i
        } else {
            self.blocks.push(Block {
                addr,
                size,
                requested: 0,
                prev: NIL,
                next: NIL,
                free_prev: NIL,
                free_next: NIL,
                segment,
                stream,
                pool,
                state: BlockState::Free,
                generation: 0,
                used_elsewhere: false,
                freed_at: 0,
            });
            (self.blocks.len() - 1) as u32
        }
    }

    /// Returns a slot to the slab.
    pub fn remove(&mut self, index: u32) {
        let b = &mut self.blocks[index as usize];
        b.state = BlockState::Vacant;
        b.generation = b.generation.wrapping_add(1);
        self.vacant.push(index);
    }

    #[inline]
    pub fn get(&self, index: u32) -> &Block {
        &self.blocks[index as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, index: u32) -> &mut Block {
        &mut self.blocks[index as usize]
    }

    /// Indices of the blocks in use (not vacant).
    pub fn live_indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.state != BlockState::Vacant)
            .map(|(i, _)| i as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hot paths touch one cache line per block.
    #[test]
    fn a_block_fits_one_cache_line() {
        assert!(
            std::mem::size_of::<Block>() <= 64,
            "{}",
            std::mem::size_of::<Block>()
        );
    }
}
