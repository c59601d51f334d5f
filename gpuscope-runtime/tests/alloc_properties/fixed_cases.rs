//! Fixed cases: the checks can fail, cross-stream reuse step by step, and regressions.

use super::harness::pattern;
use super::recount::{block_size_allowed, check_recount};
use super::*;

/// The checker catches what it claims to: a corrupted pattern and a wrong recount.
#[test]
fn the_checks_can_fail() {
    let mut h = Harness::on_host("");
    h.allocate(4096, StreamId::DEFAULT).unwrap();
    let l = &h.live[0];
    // SAFETY: the block holds 4096 bytes of host memory.
    unsafe {
        h.backend
            .copy_host_to_device(l.block.addr().offset(100), &[0xEE], StreamId::DEFAULT)
    }
    .unwrap();
    assert!(h.check().is_err(), "a corrupted block must be noticed");
    h.live[0].pattern = Some(pattern(0, 4096));
    // SAFETY: as above.
    unsafe {
        h.backend
            .copy_host_to_device(h.live[0].block.addr(), &pattern(0, 4096), StreamId::DEFAULT)
    }
    .unwrap();
    h.check().unwrap();

    let stats = h.alloc.stats();
    let mut snap = h.alloc.snapshot();
    check_recount(&stats, &snap, 0, usize::MAX).unwrap();
    snap[0].blocks[0].size += 512;
    assert!(check_recount(&stats, &snap, 0, usize::MAX).is_err());
    assert!(!block_size_allowed(
        4096 + 512,
        4096,
        &AllocConfig::default(),
        false
    ));
    assert!(block_size_allowed(
        11 << 20,
        10 << 20,
        &"expandable_segments:False".parse().unwrap(),
        false
    ));
    assert!(!block_size_allowed(
        11 << 20,
        10 << 20,
        &AllocConfig::default(),
        true
    ));
    h.drain().unwrap();
}

/// Cross-stream reuse, step by step: a block recorded on another stream stays pending
/// until that stream is synchronised, and is reused after.
#[test]
fn cross_stream_free_waits_for_the_stream() {
    for vmm in [false, true] {
        let mut h = Harness::on_test_backend(vmm, "", None);
        let s1 = h.streams[1];
        h.allocate(1 << 20, StreamId::DEFAULT).unwrap();
        h.check().unwrap();
        let addr = h.live[0].block.addr();
        h.record(0, 1).unwrap();
        let l = h.live.swap_remove(0);
        h.free(l).unwrap();
        h.check().unwrap();
        h.allocate(1 << 20, StreamId::DEFAULT).unwrap();
        assert_ne!(
            h.live[0].block.addr(),
            addr,
            "reused before {s1} was synchronised"
        );
        h.check().unwrap();
        h.sync(1);
        h.check().unwrap();
        h.allocate(1 << 20, StreamId::DEFAULT).unwrap();
        assert_eq!(
            h.live[1].block.addr(),
            addr,
            "the best fit after the sync is the block freed first"
        );
        h.check().unwrap();
        h.drain().unwrap();
    }
}

/// With virtual memory and `max_split_size_mb`, a request below max_split_size must not
/// be served by an unsplit block at or above it (PyTorch keeps oversize blocks for
/// oversize requests). Growing next to a free oversize block maps the new pages onto it,
/// the merged free block is oversize, and the small request takes all of it.
#[test]
fn regression_virtual_memory_small_request_takes_merged_oversize_block() {
    let dev = Arc::new(TestBackend::builder().virtual_memory(PAGE).build());
    let alloc = CachingAllocator::new(dev, "max_split_size_mb:32".parse().unwrap()).unwrap();
    let big = alloc.allocate(40 << 20, StreamId::DEFAULT).unwrap();
    alloc.free(big).unwrap();
    let small = alloc.allocate(2 << 20, StreamId::DEFAULT).unwrap();
    let stats = alloc.stats();
    let block = alloc
        .snapshot()
        .iter()
        .flat_map(|s| s.blocks.clone())
        .find(|b| b.addr == small.addr())
        .unwrap();
    assert_eq!(
        block.size,
        2 << 20,
        "a 2 MiB request took a {} MiB block (allocated_bytes {}, oversize_allocations {})",
        block.size >> 20,
        stats.allocated_bytes.all.current,
        stats.oversize_allocations.current
    );
    alloc.free(small).unwrap();
}

/// `record_stream` accepts a stream the backend never created; the free that follows
/// fails (the event cannot be recorded, the stream cannot be synchronised) after the
/// block was already uncounted and marked pending, with no event to complete it: the
/// block stays pending for good, and its segment can never be returned.
#[test]
fn regression_record_stream_on_unknown_stream_leaks_the_block() {
    let dev = Arc::new(TestBackend::builder().build());
    let alloc = CachingAllocator::new(dev.clone(), AllocConfig::default()).unwrap();
    let a = alloc.allocate(4096, StreamId::DEFAULT).unwrap();
    // Either the bad stream is refused here...
    if alloc.record_stream(&a, StreamId(99)).is_ok() {
        // ...or the free must still give the block back.
        let freed = alloc.free(a);
        alloc.empty_cache().unwrap();
        let s = alloc.stats();
        assert_eq!(
            (
                s.active.all.current,
                s.reserved_bytes.all.current,
                dev.used()
            ),
            (0, 0, 0),
            "free returned {freed:?}; the block is still active and its segment reserved"
        );
    }
}

/// `allocate` accepts a stream the backend never created. The block works, but
/// `empty_cache` then fails on that stream's segment and stops there, so other streams'
/// free segments are not returned either.
#[test]
fn regression_allocate_on_unknown_stream_blocks_empty_cache() {
    let dev = Arc::new(TestBackend::builder().build());
    let alloc =
        CachingAllocator::new(dev.clone(), "expandable_segments:False".parse().unwrap()).unwrap();
    // Either the bad stream is refused here...
    if let Ok(a) = alloc.allocate(4096, StreamId(99)) {
        // ...or the allocator copes with it later.
        let b = alloc.allocate(4096, StreamId::DEFAULT).unwrap();
        alloc.free(a).unwrap();
        alloc.free(b).unwrap();
        let emptied = alloc.empty_cache();
        assert_eq!(
            dev.used(),
            0,
            "empty_cache returned {emptied:?} with {} bytes still reserved (stream 0's free segment included)",
            alloc.stats().reserved_bytes.all.current
        );
    }
}
