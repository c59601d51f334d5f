//! How much one growth of an arena maps (virtual memory): what is missing, in whole pages
//! of PyTorch's expandable segments, and more while an arena only grows.

use super::rounding::{LARGE_BUFFER, Pool, SMALL_BUFFER};

/// In a run of growths with nothing freed in between, each large growth is at least 5/4
/// of the previous one, up to 1/[`RUN_GROWTH_DIVISOR`] of what the arena maps.
pub(super) const RUN_GROWTH_DIVISOR: usize = 16;

/// No chunk is larger than 1/`CHUNK_DIVISOR` of the memory the allocator may use.
pub(super) const CHUNK_DIVISOR: usize = 160;

/// The largest chunk (one `cuMemCreate`) a growth maps where the allocator may use
/// `capacity` bytes (the device's memory, or the cap) and will reserve `reserved_after`
/// bytes with the growth: 1/[`CHUNK_DIVISOR`] of the capacity in whole 20 MiB pages
/// ([`LARGE_BUFFER`]), at least one page (500 MiB on an 80 GB device); a single page
/// once `reserved_after` passes the fraction `page_threshold` of the capacity
/// (`page_chunk_threshold` in `GPUSCOPE_ALLOC_CONF`, by default a quarter).
///
/// CUDA gives a physical allocation back only whole, so the memory of a chunk that
/// still holds one live block stays reserved however much of it is free. When the
/// device runs out, the allocator gives back every chunk that lies inside free memory
/// and grows again (`memory`); with chunks as large as growths (a growth for a 2 GiB
/// request is one 2 GiB chunk), holes that smaller requests later made in such a chunk
/// stay out of reach, and a workload that PyTorch fits on the device runs out of memory.
/// Bounded chunks were not enough: held-out workloads whose blocks of hundreds of MiB
/// leave holes in 500 MiB chunks (a neural cellular automaton's 567 MiB states, an
/// Evoformer's pair tensors, a spiking network's membrane potentials, GradCache's
/// chunks) fitted 0.88-0.96 of the H100 where PyTorch's expandable segments, which map
/// 20 MiB pages and give free ones back, fitted 0.97-0.99. So the memory that can run
/// out, everything past a quarter of the device, is mapped page by page as PyTorch's
/// expandable segments map it, and the first quarter, where a workload's weights and
/// optimizer state usually lie, in large chunks. Replays of the 147 traces of
/// `tests/data/traces` with every request scaled until the replay fails
/// (`bench/headroom.py`, on the simulated 80 GiB device) then reach a peak of live memory
/// of 0.956-0.997 of the device, median 0.988 (0.884-0.997, median 0.972, with 500 MiB
/// chunks throughout; higher on 126 traces, lower by at most 0.01 on two; BENCHMARKS.md,
/// "Pages past a quarter of the device").
/// The price is device allocations and first-pass time where a workload reserves more
/// than a quarter of the device, which PyTorch's expandable segments pay everywhere: about
/// 60 µs a page on an H100, most of it `cuMemSetAccess`, whose cost grows with the number
/// of physical allocations in the range (one of the 147 traces at its own size reserves
/// 35 GB: 877 device allocations rather than 145, and a first pass 2.6x PyTorch default's
/// rather than 0.49x). Placement and reserved memory do not change: the chunks of a growth
/// are mapped side by side.
///
/// `max_chunk_size_mb` in `GPUSCOPE_ALLOC_CONF` (`configured`) replaces both limits: 20
/// gives memory back page by page from the start, as PyTorch's expandable segments do.
pub(super) fn chunk_limit(
    capacity: usize,
    configured: Option<usize>,
    page: usize,
    reserved_after: usize,
    page_threshold: f64,
) -> usize {
    let quantum = LARGE_BUFFER.next_multiple_of(page);
    let limit = match configured {
        Some(limit) => limit,
        None if reserved_after as f64 > capacity as f64 * page_threshold => quantum,
        None => capacity / CHUNK_DIVISOR,
    };
    (limit / quantum * quantum).max(quantum)
}

/// How much a growth of an arena of `pool` maps when its wilderness is `short` bytes too
/// small for the request, the arena maps `mapped` bytes and, if `run` is set, its last
/// growth was `run` bytes and nothing in it has been freed since. A multiple of `page`
/// (the device's mapping granularity).
///
/// What is missing, rounded up to whole pages of PyTorch's expandable segments: 20 MiB
/// ([`LARGE_BUFFER`]) for the large pool, 2 MiB ([`SMALL_BUFFER`]) for the small one.
/// With the same best fit, this is PyTorch's placement: the placement model
/// (`bench/alloc_model/torch_expandable.py`) gives the reserved memory PyTorch's
/// expandable segments measured on 95 traces of `tests/data/traces`. Unlike PyTorch,
/// which creates one physical allocation per page, a growth is one allocation.
///
/// While a large arena only grows (nothing freed since its last growth, as while a
/// model's weights and optimizer state are built), each growth is at least 5/4 of the
/// last, up to 1/[`RUN_GROWTH_DIVISOR`] of what the arena maps: a run of *n* small
/// requests then takes about log(n) device allocations rather than n / 20 MiB, and what
/// it leaves unused at the top is what the next requests (the first step's activations)
/// take before the arena grows again.
///
/// Device allocations stay at most PyTorch's on 133 of the 155 traces of
/// `tests/data/traces` (`trace_invariants.rs` lists the others), reserved memory at most
/// the lower of PyTorch's two modes on 135 (BENCHMARKS.md, "PyTorch's pages", the twelfth
/// to twenty-first corpora and "All 127 traces on one H100"). The run's extra is a bet
/// that the arena keeps growing, lost where the run is the last growth (a model's weights
/// made before a decoding that needs little more): without runs, reserved memory is at
/// most the lower figure on 143 traces and device allocations at most PyTorch's on 114
/// (BENCHMARKS.md, "A twenty-first corpus, held out").
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
    use crate::alloc::{AllocConfig, CachingAllocator, RawBlock};
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
    fn chunks_are_at_most_a_160th_of_the_device_in_whole_pages() {
        let page = 2 * MIB;
        // 80 GiB: 512 MiB, in whole 20 MiB pages.
        assert_eq!(chunk_limit(80 << 30, None, page, 0, 0.25), 500 * MIB);
        // An H100's 79.6 GiB.
        assert_eq!(chunk_limit(81_559 * MIB, None, page, 0, 0.25), 500 * MIB);
        // A 24 GiB card: 153.6 MiB.
        assert_eq!(chunk_limit(24 << 30, None, page, 0, 0.25), 140 * MIB);
        // Never less than one page.
        assert_eq!(chunk_limit(1 << 30, None, page, 0, 0.25), LARGE_BUFFER);
        assert_eq!(chunk_limit(0, None, page, 0, 0.25), LARGE_BUFFER);
        assert_eq!(chunk_limit(1 << 30, None, 32 * MIB, 0, 0.25), 32 * MIB);
        // `max_chunk_size_mb`, in whole pages.
        assert_eq!(
            chunk_limit(80 << 30, Some(20 * MIB), page, 0, 0.25),
            20 * MIB
        );
        assert_eq!(
            chunk_limit(80 << 30, Some(250 * MIB), page, 0, 0.25),
            240 * MIB
        );
        assert_eq!(
            chunk_limit(80 << 30, Some(2000 * MIB), page, 0, 0.25),
            2000 * MIB
        );
    }

    #[test]
    fn past_a_quarter_of_the_device_chunks_are_single_pages() {
        let page = 2 * MIB;
        assert_eq!(chunk_limit(80 << 30, None, page, 20 << 30, 0.25), 500 * MIB);
        assert_eq!(
            chunk_limit(80 << 30, None, page, (20 << 30) + page, 0.25),
            LARGE_BUFFER
        );
        assert_eq!(
            chunk_limit(32 << 30, None, page, 9 << 30, 0.25),
            LARGE_BUFFER
        );
        assert_eq!(
            chunk_limit(1 << 30, None, 32 * MIB, 1 << 30, 0.25),
            32 * MIB
        );
        // `max_chunk_size_mb` replaces both limits.
        assert_eq!(
            chunk_limit(80 << 30, Some(250 * MIB), page, 60 << 30, 0.25),
            240 * MIB
        );
        // `page_chunk_threshold` moves the line; at 1 there is none.
        assert_eq!(chunk_limit(80 << 30, None, page, 30 << 30, 0.5), 500 * MIB);
        assert_eq!(
            chunk_limit(80 << 30, None, page, 41 << 30, 0.5),
            LARGE_BUFFER
        );
        assert_eq!(chunk_limit(80 << 30, None, page, 80 << 30, 1.0), 500 * MIB);
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
        sim_allocator_with(80 << 30, AllocConfig::default())
    }

    /// An allocator on a simulated device of `capacity` bytes with 2 MiB mapping pages.
    fn sim_allocator_with(capacity: usize, config: AllocConfig) -> CachingAllocator {
        let backend = Arc::new(
            TestBackend::builder()
                .capacity(capacity)
                .virtual_memory(2 * MIB)
                .build(),
        );
        CachingAllocator::new(backend, config).unwrap()
    }

    /// A 7 GiB growth (below a quarter of a 32 GiB device), freed and cut into 100 MiB
    /// blocks of which one in ten stays live (returned): 6.3 GiB cached in 900 MiB holes
    /// around them.
    fn holes_around_live_blocks(alloc: &CachingAllocator) -> Vec<RawBlock> {
        let s = StreamId::DEFAULT;
        alloc.free(alloc.allocate(7 << 30, s).unwrap()).unwrap();
        let grown = alloc.stats().num_device_alloc;
        let blocks: Vec<_> = (0..70)
            .map(|_| alloc.allocate(100 * MIB, s).unwrap())
            .collect();
        assert_eq!(
            alloc.stats().num_device_alloc,
            grown,
            "the blocks fit in the 7 GiB"
        );
        let mut kept = Vec::new();
        for (i, b) in blocks.into_iter().enumerate() {
            if i % 10 == 9 {
                kept.push(b);
            } else {
                alloc.free(b).unwrap();
            }
        }
        kept
    }

    /// A large growth is mapped in chunks of at most 1/160 of the device, so when the
    /// device runs out, the memory freed inside it goes back chunk by chunk even though
    /// live blocks are scattered through it. As one chunk, the 7 GiB would stay held
    /// and the 26 GiB request would fail.
    #[test]
    fn under_pressure_memory_freed_inside_a_large_growth_goes_back() {
        let capacity = 32usize << 30;
        let alloc = sim_allocator_with(capacity, AllocConfig::default());
        // 7 GiB in chunks of 200 MiB (32 GiB / 160 = 204.8 MiB, in whole 20 MiB pages).
        assert_eq!(chunk_limit(capacity, None, 2 * MIB, 0, 0.25), 200 * MIB);
        let kept = holes_around_live_blocks(&alloc);
        let st = alloc.stats();
        assert_eq!(st.num_device_alloc, 36);
        // Each chunk mapped on its own, all made accessible in one call.
        assert_eq!((st.num_device_map, st.num_set_access), (36, 1));
        // 25 GiB of the device is free, 6.3 GiB more is cached in 900 MiB holes: the
        // request fits only with the whole chunks of those holes given back.
        let huge = alloc.allocate(26 << 30, StreamId::DEFAULT).unwrap();
        let st = alloc.stats();
        assert!(st.num_device_free > 0, "chunks inside the holes went back");
        assert!(st.reserved_bytes.all.current as usize <= capacity);
        alloc.free(huge).unwrap();
        for b in kept {
            alloc.free(b).unwrap();
        }
    }

    /// Past a quarter of the device, growths are mapped page by page: memory freed in
    /// holes smaller than the chunks below that line (here 60 MiB holes between 60 MiB
    /// live blocks, where 200 MiB chunks would each hold a live block) goes back under
    /// pressure, and a request that needs it fits. With one chunk limit throughout,
    /// every chunk of the 16 GiB stays reserved and the request fails.
    #[test]
    fn past_a_quarter_memory_freed_in_small_holes_goes_back() {
        let capacity = 32usize << 30;
        let alloc = sim_allocator_with(capacity, AllocConfig::default());
        let s = StreamId::DEFAULT;
        // 6 GiB of weights, below the line: 200 MiB chunks.
        let weights = alloc.allocate(6 << 30, s).unwrap();
        assert_eq!(alloc.stats().num_device_alloc, 31);
        // 16 GiB more, past the line: 20 MiB pages.
        alloc.free(alloc.allocate(16 << 30, s).unwrap()).unwrap();
        let pages = alloc.stats().num_device_alloc - 31;
        assert!(
            pages as usize >= (16 << 30) / LARGE_BUFFER,
            "{pages} chunks"
        );
        let blocks: Vec<_> = (0..270)
            .map(|_| alloc.allocate(60 * MIB, s).unwrap())
            .collect();
        let mut kept = Vec::new();
        for (i, b) in blocks.into_iter().enumerate() {
            if i % 2 == 0 {
                kept.push(b);
            } else {
                alloc.free(b).unwrap();
            }
        }
        // 10 GiB of the device is free and 8 GiB is cached in 60 MiB holes: 14 GiB fits
        // only with the holes' pages given back.
        let big = alloc.allocate(14 << 30, s).unwrap();
        assert!(alloc.stats().num_device_free > 0);
        assert!(alloc.stats().reserved_bytes.all.current as usize <= capacity);
        alloc.check_invariants().unwrap();
        alloc.free(big).unwrap();
        for b in kept {
            alloc.free(b).unwrap();
        }
        alloc.free(weights).unwrap();
    }

    /// `page_chunk_threshold:1` keeps the chunks of 1/160 of the device however much is
    /// reserved: 16 GiB on a 32 GiB device is 82 chunks of at most 200 MiB, not 820 pages.
    #[test]
    fn page_chunk_threshold_one_keeps_large_chunks() {
        let config = "page_chunk_threshold:1".parse().unwrap();
        let alloc = sim_allocator_with(32 << 30, config);
        let b = alloc.allocate(16 << 30, StreamId::DEFAULT).unwrap();
        assert_eq!(alloc.stats().num_device_alloc, 82);
        alloc.free(b).unwrap();
        let paged = sim_allocator_with(32 << 30, AllocConfig::default());
        let b = paged.allocate(16 << 30, StreamId::DEFAULT).unwrap();
        assert_eq!(paged.stats().num_device_alloc, 820);
        paged.free(b).unwrap();
    }

    /// With `page_chunk_threshold:0` every growth is single pages: `empty_cache` gives
    /// back exactly the three pages of a freed 60 MiB block between two live ones (the
    /// same on the GPU: `tests/cuda_allocator.rs`).
    #[test]
    fn pages_of_a_freed_block_between_live_ones_go_back() {
        let alloc = sim_allocator_with(80 << 30, "page_chunk_threshold:0".parse().unwrap());
        let s = StreamId::DEFAULT;
        alloc
            .free(alloc.allocate(9 * LARGE_BUFFER, s).unwrap())
            .unwrap();
        assert_eq!(alloc.snapshot()[0].chunks, vec![LARGE_BUFFER; 9]);
        let mut blocks: Vec<_> = (0..3)
            .map(|_| alloc.allocate(3 * LARGE_BUFFER, s).unwrap())
            .collect();
        assert_eq!(alloc.stats().num_device_alloc, 9);
        alloc.free(blocks.remove(1)).unwrap();
        alloc.empty_cache().unwrap();
        let st = alloc.stats();
        assert_eq!((st.num_device_unmap, st.num_device_free), (3, 3));
        assert_eq!(st.reserved_bytes.all.current as usize, 6 * LARGE_BUFFER);
        alloc.check_invariants().unwrap();
        for b in blocks {
            alloc.free(b).unwrap();
        }
    }

    /// `empty_cache` gives back every whole chunk inside the free memory of a large
    /// growth, around the blocks still live in it: what stays reserved is at most the
    /// two chunks each live block touches. As one chunk, all 7 GiB would stay.
    #[test]
    fn empty_cache_gives_back_the_chunks_around_live_blocks() {
        let alloc = sim_allocator_with(32 << 30, AllocConfig::default());
        // Chunks of 200 MiB: 1/160 of 32 GiB in whole 20 MiB pages.
        let chunk = 200 * MIB;
        let kept = holes_around_live_blocks(&alloc);
        assert!(alloc.stats().reserved_bytes.all.current >= 7 << 30);
        alloc.empty_cache().unwrap();
        let after = alloc.stats().reserved_bytes.all.current as usize;
        assert!(
            after <= kept.len() * 2 * chunk,
            "{after} bytes still reserved for {} live blocks of 100 MiB",
            kept.len()
        );
        alloc.check_invariants().unwrap();
        for b in kept {
            alloc.free(b).unwrap();
        }
        alloc.empty_cache().unwrap();
        assert_eq!(alloc.stats().reserved_bytes.all.current, 0);
    }

    /// `max_chunk_size_mb` sets the chunk: 1 GiB in 20 MiB chunks is 52 device
    /// allocations (51.2 pages, the last one rounded up), one `cuMemSetAccess`.
    #[test]
    fn max_chunk_size_mb_sets_the_chunk() {
        let alloc = sim_allocator_with(80 << 30, "max_chunk_size_mb:20".parse().unwrap());
        let b = alloc.allocate(1 << 30, StreamId::DEFAULT).unwrap();
        let st = alloc.stats();
        assert_eq!((st.num_device_alloc, st.num_set_access), (52, 1));
        assert!(alloc.snapshot()[0].chunks.iter().all(|&c| c <= 20 * MIB));
        alloc.free(b).unwrap();
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
