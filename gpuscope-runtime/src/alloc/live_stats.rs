//! The statistics as the allocator keeps them while it runs, and their snapshot in
//! PyTorch's form ([`MemoryStats`]).
//!
//! Every allocation and free changes seven stat arrays (`allocation`, `active`,
//! `allocated_bytes`, `active_bytes`, `requested_bytes`, `inactive_split`,
//! `inactive_split_bytes`). Kept in PyTorch's form, each change updates six or four
//! figures (current, peak, increases, decreases, for one pool and for both): a replay
//! without those updates ran a fifth faster. A [`Tally`] keeps only what cannot be derived:
//! each pool's current value, peak and increases, and the peak of both pools together;
//! the figures for both pools and the decreases are worked out when a snapshot is
//! taken. The figures are the same as PyTorch's form gives (tests below).

use super::rounding::Pool;
use super::stats::{MemoryStats, Stat, StatArray};

/// One stat array, kept for cheap updates: a change touches one pool's figures and the
/// peak of both pools together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Each pool's value now (small, large).
    current: [i64; 2],
    /// Each pool's highest value since the last peak reset.
    peak: [i64; 2],
    /// Each pool's increases since the last accumulated reset.
    increases: [i64; 2],
    /// Each pool's value at the last accumulated reset: decreases since then are
    /// `increases - (current - at_reset)`.
    at_reset: [i64; 2],
    /// The highest value of both pools together since the last peak reset.
    peak_all: i64,
}

impl Tally {
    /// Increases the stat of `pool` (and of both pools).
    #[inline(always)]
    pub fn add(&mut self, pool: Pool, amount: usize) {
        let (i, amount) = (pool.index(), amount as i64);
        self.current[i] += amount;
        self.increases[i] += amount;
        // Branches rather than `max`: past the first pass a peak is rarely passed, and an
        // untaken branch stores nothing.
        if self.current[i] > self.peak[i] {
            self.peak[i] = self.current[i];
        }
        let all = self.current[0] + self.current[1];
        if all > self.peak_all {
            self.peak_all = all;
        }
    }

    /// Decreases the stat of `pool` (and of both pools).
    #[inline(always)]
    pub fn sub(&mut self, pool: Pool, amount: usize) {
        self.current[pool.index()] -= amount as i64;
    }

    /// Changes the stat of `pool` by `delta` (up or down).
    #[inline(always)]
    pub fn change(&mut self, pool: Pool, delta: i64) {
        if delta > 0 {
            self.add(pool, delta as usize);
        } else if delta < 0 {
            self.sub(pool, delta.unsigned_abs() as usize);
        }
    }

    /// The value of both pools together now.
    #[inline]
    pub fn current(&self) -> i64 {
        self.current[0] + self.current[1]
    }

    fn pool_stat(&self, i: usize) -> Stat {
        Stat {
            current: self.current[i],
            peak: self.peak[i],
            allocated: self.increases[i],
            freed: self.increases[i] - (self.current[i] - self.at_reset[i]),
        }
    }

    /// The array in PyTorch's form.
    pub fn to_array(&self) -> StatArray {
        let (small, large) = (self.pool_stat(0), self.pool_stat(1));
        StatArray {
            all: Stat {
                current: small.current + large.current,
                peak: self.peak_all,
                allocated: small.allocated + large.allocated,
                freed: small.freed + large.freed,
            },
            small_pool: small,
            large_pool: large,
        }
    }

    fn reset_peak(&mut self) {
        self.peak = self.current;
        self.peak_all = self.current();
    }

    fn reset_accumulated(&mut self) {
        self.increases = [0; 2];
        self.at_reset = self.current;
    }
}

/// The allocator's statistics while it runs: the seven arrays every allocation and free
/// changes as [`Tally`]s, everything else (counters, `segment`, `reserved_bytes`,
/// oversize stats) in `other`, as reported. `other`'s own copies of the seven tallied
/// arrays stay empty: [`LiveStats::snapshot`] fills them in.
#[derive(Clone, Debug, Default)]
pub(crate) struct LiveStats {
    pub allocation: Tally,
    pub active: Tally,
    pub allocated_bytes: Tally,
    pub active_bytes: Tally,
    pub requested_bytes: Tally,
    pub inactive_split: Tally,
    pub inactive_split_bytes: Tally,
    pub other: MemoryStats,
}

impl LiveStats {
    fn tallies_mut(&mut self) -> [&mut Tally; 7] {
        [
            &mut self.allocation,
            &mut self.active,
            &mut self.allocated_bytes,
            &mut self.active_bytes,
            &mut self.requested_bytes,
            &mut self.inactive_split,
            &mut self.inactive_split_bytes,
        ]
    }

    /// Every figure in PyTorch's form.
    pub fn snapshot(&self) -> MemoryStats {
        debug_assert_eq!(
            self.other.allocation,
            StatArray::default(),
            "the tallied arrays are kept in the tallies, not in `other`"
        );
        MemoryStats {
            allocation: self.allocation.to_array(),
            active: self.active.to_array(),
            allocated_bytes: self.allocated_bytes.to_array(),
            active_bytes: self.active_bytes.to_array(),
            requested_bytes: self.requested_bytes.to_array(),
            inactive_split: self.inactive_split.to_array(),
            inactive_split_bytes: self.inactive_split_bytes.to_array(),
            ..self.other.clone()
        }
    }

    /// Sets every peak to its current value.
    pub fn reset_peak(&mut self) {
        for t in self.tallies_mut() {
            t.reset_peak();
        }
        self.other.reset_peak();
    }

    /// Zeroes accumulated counts and event counters.
    pub fn reset_accumulated(&mut self) {
        for t in self.tallies_mut() {
            t.reset_accumulated();
        }
        self.other.reset_accumulated();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Change {
        Add(bool, usize),
        Sub(bool, usize),
        ResetPeak,
        ResetAccumulated,
    }

    fn change() -> impl Strategy<Value = Change> {
        prop_oneof![
            4 => (any::<bool>(), 0usize..1000).prop_map(|(s, n)| Change::Add(s, n)),
            4 => (any::<bool>(), 0usize..1000).prop_map(|(s, n)| Change::Sub(s, n)),
            1 => Just(Change::ResetPeak),
            1 => Just(Change::ResetAccumulated),
        ]
    }

    proptest! {
        /// A tally reports what PyTorch's form (a `StatArray` updated figure by figure)
        /// reports, after any sequence of changes and resets.
        #[test]
        fn a_tally_reports_what_the_full_form_reports(changes in prop::collection::vec(change(), 0..200)) {
            let mut full = StatArray::default();
            let mut tally = Tally::default();
            for c in changes {
                match c {
                    Change::Add(small, n) => {
                        let pool = if small { Pool::Small } else { Pool::Large };
                        full.add(pool, n);
                        tally.add(pool, n);
                    }
                    Change::Sub(small, n) => {
                        let pool = if small { Pool::Small } else { Pool::Large };
                        let n = n.min(full.pool(pool).current as usize);
                        full.sub(pool, n);
                        tally.change(pool, -(n as i64));
                    }
                    Change::ResetPeak => {
                        let mut s = MemoryStats { allocation: full, ..Default::default() };
                        s.reset_peak();
                        full = s.allocation;
                        tally.reset_peak();
                    }
                    Change::ResetAccumulated => {
                        let mut s = MemoryStats { allocation: full, ..Default::default() };
                        s.reset_accumulated();
                        full = s.allocation;
                        tally.reset_accumulated();
                    }
                }
                prop_assert_eq!(tally.to_array(), full);
                prop_assert_eq!(tally.current(), full.all.current);
            }
        }
    }

    #[test]
    fn a_snapshot_has_the_tallies_and_the_rest() {
        let mut s = LiveStats::default();
        s.allocated_bytes.add(Pool::Large, 4096);
        s.allocated_bytes.add(Pool::Small, 512);
        s.allocated_bytes.sub(Pool::Large, 4096);
        s.other.num_device_alloc += 2;
        s.other.reserved_bytes.add(Pool::Large, 1 << 21);
        let snap = s.snapshot();
        assert_eq!(snap.allocated_bytes.all.current, 512);
        assert_eq!(snap.allocated_bytes.all.peak, 4608);
        assert_eq!(snap.allocated_bytes.large_pool.freed, 4096);
        assert_eq!(snap.num_device_alloc, 2);
        assert_eq!(snap.reserved_bytes.all.current, 1 << 21);
        s.reset_peak();
        s.reset_accumulated();
        let snap = s.snapshot();
        assert_eq!(snap.allocated_bytes.all.peak, 512);
        assert_eq!(snap.allocated_bytes.all.allocated, 0);
        assert_eq!(snap.num_device_alloc, 0);
        assert_eq!(snap.reserved_bytes.all.peak, 1 << 21);
    }
}
