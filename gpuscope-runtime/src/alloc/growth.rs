//! How much one growth of an arena maps (virtual memory): what is missing, in whole pages
//! of PyTorch's expandable segments, and more while an arena only grows.

use super::rounding::{LARGE_BUFFER, Pool, SMALL_BUFFER};

/// In a run of growths with nothing freed in between, each large growth is at least 5/4
/// of the previous one, up to 1/[`RUN_GROWTH_DIVISOR`] of what the arena maps.
pub(super) const RUN_GROWTH_DIVISOR: usize = 16;

/// How much a growth of an arena of `pool` maps when its wilderness is `short` bytes too
/// small for the request, the arena maps `mapped` bytes and, if `run` is set, its last
/// growth was `run` bytes and nothing in it has been freed since. A multiple of `page`
/// (the device's mapping granularity).
///
/// What is missing, rounded up to whole pages of PyTorch's expandable segments: 20 MiB
/// ([`LARGE_BUFFER`]) for the large pool, 2 MiB ([`SMALL_BUFFER`]) for the small one.
/// With the same best fit, this is PyTorch's placement: the placement model
/// (`bench/alloc_model/torch_expandable.py`) gives the reserved memory PyTorch's
/// expandable segments measured on all 95 traces of `tests/data/traces`. Unlike PyTorch,
/// which creates one physical allocation per page, a growth is one allocation.
///
/// While a large arena only grows (nothing freed since its last growth, as while a
/// model's weights and optimizer state are built), each growth is at least 5/4 of the
/// last, up to 1/[`RUN_GROWTH_DIVISOR`] of what the arena maps: a run of *n* small
/// requests then takes about log(n) device allocations rather than n / 20 MiB, and what
/// it leaves unused at the top is what the next requests (the first step's activations)
/// take before the arena grows again.
///
/// Device allocations stay at most PyTorch's on 86 of the 95 traces of
/// `tests/data/traces` (`trace_invariants.rs` lists the others), reserved memory at most
/// that of PyTorch's better mode on 80 (BENCHMARKS.md, "PyTorch's pages" and the twelfth
/// and thirteenth corpora).
pub(super) fn growth_size(
    pool: Pool,
    short: usize,
    mapped: usize,
    run: Option<usize>,
    page: usize,
) -> usize {
    match pool {
        Pool::Small => short.next_multiple_of(SMALL_BUFFER.next_multiple_of(page)),
        Pool::Large => {
            let quantum = LARGE_BUFFER.next_multiple_of(page);
            let missing = short.next_multiple_of(quantum);
            match run {
                Some(last) => missing.max(
                    (last + last / 4)
                        .min(mapped / RUN_GROWTH_DIVISOR)
                        .next_multiple_of(quantum),
                ),
                None => missing,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::alloc::{AllocConfig, CachingAllocator};
    use crate::backend::StreamId;
    use crate::backend::test::TestBackend;

    const MIB: usize = 1 << 20;

    #[test]
    fn a_growth_is_what_is_missing_in_whole_pytorch_pages() {
        let page = 2 * MIB;
        assert_eq!(growth_size(Pool::Large, 1, 0, None, page), LARGE_BUFFER);
        assert_eq!(growth_size(Pool::Large, 20 * MIB, 0, None, page), 20 * MIB);
        assert_eq!(
            growth_size(Pool::Large, 20 * MIB + 1, 0, None, page),
            40 * MIB
        );
        assert_eq!(
            growth_size(Pool::Large, 45 * MIB, 8192 * MIB, None, page),
            60 * MIB
        );
        assert_eq!(growth_size(Pool::Small, 1, 0, None, page), SMALL_BUFFER);
        assert_eq!(
            growth_size(Pool::Small, 3 * MIB, 64 * MIB, None, page),
            4 * MIB
        );
        // No run in the small pool.
        assert_eq!(
            growth_size(Pool::Small, 1, 64 * MIB, Some(8 * MIB), page),
            2 * MIB
        );
        // Pages are whole multiples of the device's granularity.
        assert_eq!(growth_size(Pool::Small, 1, 0, None, 64 << 10), 2 * MIB);
        assert_eq!(growth_size(Pool::Large, 1, 0, None, 32 * MIB), 32 * MIB);
        assert_eq!(growth_size(Pool::Small, 1, 0, None, 32 * MIB), 32 * MIB);
    }

    #[test]
    fn in_a_run_of_growths_each_is_a_quarter_larger_up_to_a_sixteenth_of_the_arena() {
        let page = 2 * MIB;
        // 5/4 of the last growth (50 MiB), in whole 20 MiB pages...
        assert_eq!(
            growth_size(Pool::Large, 1, 1024 * MIB, Some(40 * MIB), page),
            60 * MIB
        );
        // ...but at most 1/16 of what the arena maps...
        assert_eq!(
            growth_size(Pool::Large, 1, 320 * MIB, Some(40 * MIB), page),
            20 * MIB
        );
        // ...and never less than what is missing.
        assert_eq!(
            growth_size(Pool::Large, 100 * MIB, 8192 * MIB, Some(20 * MIB), page),
            100 * MIB
        );
        assert_eq!(
            growth_size(Pool::Large, 1, 0, Some(20 * MIB), page),
            LARGE_BUFFER
        );
    }

    fn sim_allocator() -> CachingAllocator {
        let backend = Arc::new(
            TestBackend::builder()
                .capacity(80 << 30)
                .virtual_memory(2 * MIB)
                .build(),
        );
        CachingAllocator::new(backend, AllocConfig::default()).unwrap()
    }

    /// 6 GiB of 12 MiB blocks, all live, then freed: every growth adds what its step
    /// says, never more than 1/16 of the arena (or one 20 MiB page) is unused, and the
    /// steps grow with the run, so there are far fewer growths than the ~307 of fixed
    /// 20 MiB steps.
    #[test]
    fn a_run_of_growths_makes_logarithmically_many_device_allocations() {
        let alloc = sim_allocator();
        let mut live = Vec::new();
        let (mut reserved, mut run) = (0, None);
        for _ in 0..512 {
            live.push(alloc.allocate(12 * MIB, StreamId::DEFAULT).unwrap());
            let s = alloc.stats();
            let now = s.reserved_bytes.all.current as usize;
            if now != reserved {
                // Blocks lie from the bottom up (nothing freed): the wilderness was what the
                // arena mapped beyond the blocks before this one.
                let before = s.allocated_bytes.all.current as usize - 12 * MIB;
                let short = 12 * MIB - (reserved - before);
                let step = growth_size(Pool::Large, short, reserved, run, 2 * MIB);
                assert_eq!(now - reserved, step, "a growth from {reserved} bytes");
                (reserved, run) = (now, Some(step));
            }
            let allocated = s.allocated_bytes.all.current as usize;
            assert!(
                reserved - allocated
                    < (2 * LARGE_BUFFER).max(reserved / RUN_GROWTH_DIVISOR + LARGE_BUFFER)
            );
        }
        let allocs = alloc.stats().num_device_alloc;
        // Growths of 20, 40, 60, 80, ... MiB (5/4 of the last, in whole pages) until 1/16
        // of the arena, then ~1/16 each: about 10 to 500 MiB and ln(12) / ln(17 / 16) = 41
        // more.
        assert!((35..=60).contains(&allocs), "{allocs} device allocations");
        for b in live {
            alloc.free(b).unwrap();
        }
    }

    /// A free ends the run: the next growth is back to the plain step.
    #[test]
    fn a_free_ends_the_run_of_growths() {
        let alloc = sim_allocator();
        let mut live = Vec::new();
        for _ in 0..40 {
            live.push(alloc.allocate(12 * MIB, StreamId::DEFAULT).unwrap());
        }
        let small = alloc.allocate(MIB + 512, StreamId::DEFAULT).unwrap();
        alloc.free(small).unwrap();
        let before = alloc.stats().reserved_bytes.all.current as usize;
        // Fill what is left at the top, then one more: a growth of the plain step.
        loop {
            live.push(alloc.allocate(12 * MIB, StreamId::DEFAULT).unwrap());
            let now = alloc.stats().reserved_bytes.all.current as usize;
            if now != before {
                // The wilderness was too small by less than one 12 MiB block: one page.
                assert_eq!(now - before, LARGE_BUFFER);
                break;
            }
        }
        for b in live {
            alloc.free(b).unwrap();
        }
    }
}
