//! The free index of one pool of one stream: segregated free lists with bitmaps, so
//! finding the best-fitting free block takes a few bit operations and a short scan,
//! whatever the number of free blocks.
//!
//! Sizes are multiples of 512 bytes. In units of 512 bytes, sizes below 32 units each
//! have a class of their own; above, every power of two is cut into 32 classes, so a
//! class spans at most 1/32 of its sizes. A search scans the request's own class for
//! the smallest block that fits (up to [`SCAN_LIMIT`] entries); failing that, the first
//! non-empty larger class holds only blocks that fit, and its smallest is taken.

use super::block::{Block, BlockSlab, NIL};

/// Classes per power of two (and the number of exact small classes).
const SUB: usize = 32;
const SUB_LOG: u32 = 5;
/// Upper bound on the number of classes (64 groups of 32).
const CLASSES: usize = 64 * SUB;
/// Most entries of one class list looked at when choosing among them.
const SCAN_LIMIT: usize = 16;
/// Most classes [`FreeIndex::find_where`] looks in.
const WHERE_CLASS_LIMIT: usize = 64;

#[inline]
fn class_of(size: usize) -> usize {
    let units = size >> 9;
    if units < SUB {
        units
    } else {
        let fl = usize::BITS - 1 - units.leading_zeros();
        let sl = (units >> (fl - SUB_LOG)) & (SUB - 1);
        SUB + (fl - SUB_LOG) as usize * SUB + sl
    }
}

/// Free blocks of one (stream, pool), by size class. The list heads grow with the
/// largest class used, so an index that holds nothing costs a few hundred bytes (a
/// process with thousands of streams has two per stream).
#[derive(Debug)]
pub(crate) struct FreeIndex {
    heads: Vec<u32>,
    group_bits: u64,
    class_bits: [u32; 64],
    len: usize,
    bytes: usize,
}

impl Default for FreeIndex {
    fn default() -> Self {
        FreeIndex {
            heads: Vec::new(),
            group_bits: 0,
            class_bits: [0; 64],
            len: 0,
            bytes: 0,
        }
    }
}

impl FreeIndex {
    /// Number of blocks in the index.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes in the index.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds a free block.
    #[inline(always)]
    pub fn insert(&mut self, slab: &mut BlockSlab, index: u32) {
        let size = slab.get(index).size;
        let c = class_of(size);
        if self.heads.len() <= c {
            self.heads.resize(c + 1, NIL);
        }
        let head = self.heads[c];
        {
            let b = slab.get_mut(index);
            b.free_prev = NIL;
            b.free_next = head;
        }
        if head != NIL {
            slab.get_mut(head).free_prev = index;
        }
        self.heads[c] = index;
        self.class_bits[c / SUB] |= 1 << (c % SUB);
        self.group_bits |= 1 << (c / SUB);
        self.len += 1;
        self.bytes += size;
    }

    /// Removes a block that is in the index.
    #[inline(always)]
    pub fn remove(&mut self, slab: &mut BlockSlab, index: u32) {
        let (size, prev, next) = {
            let b = slab.get(index);
            (b.size, b.free_prev, b.free_next)
        };
        let c = class_of(size);
        if prev != NIL {
            slab.get_mut(prev).free_next = next;
        } else {
            debug_assert_eq!(
                self.heads[c], index,
                "block {index} is not in this free index"
            );
            self.heads[c] = next;
            if next == NIL {
                self.class_bits[c / SUB] &= !(1 << (c % SUB));
                if self.class_bits[c / SUB] == 0 {
                    self.group_bits &= !(1 << (c / SUB));
                }
            }
        }
        if next != NIL {
            slab.get_mut(next).free_prev = prev;
        }
        let b = slab.get_mut(index);
        b.free_prev = NIL;
        b.free_next = NIL;
        self.len -= 1;
        self.bytes -= size;
    }

    /// The smallest free block of at least `size` bytes (ties: the lowest address among
    /// those looked at), without removing it.
    #[inline(always)]
    pub fn find(&self, slab: &BlockSlab, size: usize) -> Option<u32> {
        let c = class_of(size);
        if let Some(found) = self.best_in_class(slab, c, size, &mut |_| true) {
            return Some(found);
        }
        let next = self.next_nonempty_class(c + 1)?;
        self.best_in_class(slab, next, size, &mut |_| true)
    }

    /// The smallest block of class `class` of at least `size` bytes that `accept` takes
    /// (asked only of blocks that fit and would be the best so far; ties: the lowest
    /// address), among the first [`SCAN_LIMIT`] entries.
    #[inline(always)]
    fn best_in_class(
        &self,
        slab: &BlockSlab,
        class: usize,
        size: usize,
        accept: &mut impl FnMut(&Block) -> bool,
    ) -> Option<u32> {
        let mut cur = self.heads.get(class).copied().unwrap_or(NIL);
        let mut best: Option<(usize, u64, u32)> = None;
        let mut looked = 0;
        while cur != NIL && looked < SCAN_LIMIT {
            let b = slab.get(cur);
            if b.size >= size && best.is_none_or(|(s, a, _)| (b.size, b.addr) < (s, a)) && accept(b)
            {
                best = Some((b.size, b.addr, cur));
            }
            cur = b.free_next;
            looked += 1;
        }
        best.map(|(_, _, i)| i)
    }

    /// The smallest free block of at least `size` bytes that `accept` takes (asked only
    /// of blocks that fit, smallest classes first), looking at up to [`SCAN_LIMIT`]
    /// entries in each of up to [`WHERE_CLASS_LIMIT`] classes.
    pub fn find_where(
        &self,
        slab: &BlockSlab,
        size: usize,
        mut accept: impl FnMut(&Block) -> bool,
    ) -> Option<u32> {
        let mut class = class_of(size);
        for _ in 0..WHERE_CLASS_LIMIT {
            if let Some(found) = self.best_in_class(slab, class, size, &mut accept) {
                return Some(found);
            }
            class = self.next_nonempty_class(class + 1)?;
        }
        None
    }

    /// The first non-empty class at or after `from`.
    #[inline]
    fn next_nonempty_class(&self, from: usize) -> Option<usize> {
        if from >= CLASSES {
            return None;
        }
        let (g, bit) = (from / SUB, from % SUB);
        let in_group = self.class_bits[g] & (u32::MAX << bit);
        if in_group != 0 {
            return Some(g * SUB + in_group.trailing_zeros() as usize);
        }
        let later = if g + 1 >= 64 {
            0
        } else {
            self.group_bits & (u64::MAX << (g + 1))
        };
        if later == 0 {
            return None;
        }
        let g = later.trailing_zeros() as usize;
        Some(g * SUB + self.class_bits[g].trailing_zeros() as usize)
    }

    /// Every block in the index (for invariant checks and summaries).
    pub fn iter<'a>(&'a self, slab: &'a BlockSlab) -> impl Iterator<Item = u32> + 'a {
        self.heads.iter().flat_map(move |&head| {
            let mut cur = head;
            std::iter::from_fn(move || {
                (cur != NIL).then(|| {
                    let i = cur;
                    cur = slab.get(i).free_next;
                    i
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::rounding::Pool;
    use crate::backend::StreamId;

    #[test]
    fn classes_are_monotone_and_bounded() {
        let mut last = 0;
        let mut size = 512;
        while size < (1usize << 50) {
            let c = class_of(size);
            assert!(c >= last, "class of {size} went down");
            assert!(c < CLASSES);
            last = c;
            size += size / 7 / 512 * 512 + 512;
        }
        assert_eq!(class_of(512), 1);
        assert_eq!(class_of(31 * 512), 31);
        assert_eq!(class_of(32 * 512), 32);
    }

    fn slab_with(sizes: &[usize]) -> (BlockSlab, FreeIndex, Vec<u32>) {
        let mut slab = BlockSlab::default();
        let mut index = FreeIndex::default();
        let mut ids = Vec::new();
        for (i, &s) in sizes.iter().enumerate() {
            let id = slab.insert(0x1000_0000 * (i as u64 + 1), s, 0, StreamId(0), Pool::Large);
            index.insert(&mut slab, id);
            ids.push(id);
        }
        (slab, index, ids)
    }

    #[test]
    fn finds_the_best_fit() {
        let (mut slab, mut index, ids) = slab_with(&[4 << 20, 1 << 20, 2 << 20, 3 << 20, 2 << 20]);
        assert_eq!(index.len(), 5);
        assert_eq!(
            index.find(&slab, 2 << 20),
            Some(ids[2]),
            "lowest address among equals"
        );
        assert_eq!(index.find(&slab, (2 << 20) + 512), Some(ids[3]));
        assert_eq!(index.find(&slab, 512), Some(ids[1]));
        assert_eq!(index.find(&slab, (4 << 20) + 512), None);
        index.remove(&mut slab, ids[2]);
        assert_eq!(index.find(&slab, 2 << 20), Some(ids[4]));
        index.remove(&mut slab, ids[4]);
        index.remove(&mut slab, ids[3]);
        assert_eq!(index.find(&slab, 2 << 20), Some(ids[0]));
        assert_eq!(index.bytes(), 5 << 20);
        assert_eq!(index.iter(&slab).count(), 2);
    }

    #[test]
    fn finds_within_a_class() {
        // Both sizes fall in one class; only the larger fits.
        let a = (1 << 30) + (1 << 20);
        let b = (1 << 30) + (2 << 20);
        let (slab, index, ids) = slab_with(&[a, b]);
        assert_eq!(class_of(a), class_of(b));
        assert_eq!(index.find(&slab, a + 512), Some(ids[1]));
        assert_eq!(index.find(&slab, b + 512), None);
    }
}
