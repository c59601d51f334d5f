//! Fixed cases: a retry is not an OOM, an injected refusal is retried, the report
//! names the figures, and the recount catches a mismatch.

use super::recount::check_recount;
use super::*;

/// A device refusal that releasing the cache fixes counts as a retry, not an OOM.
#[test]
fn release_and_retry_counts_a_retry_not_an_oom() {
    let dev = Arc::new(TestBackend::builder().capacity(64 * MIB).build());
    let alloc =
        CachingAllocator::new(dev.clone(), "expandable_segments:False".parse().unwrap()).unwrap();
    let s1 = dev.create_stream().unwrap();
    let a = alloc.allocate(50 * MIB, StreamId::DEFAULT).unwrap();
    alloc.free(a).unwrap(); // cached: a free 50 MiB segment
    let b = alloc.allocate(1024, StreamId::DEFAULT).unwrap(); // a 2 MiB small segment
    // Another stream cannot use stream 0's cache: 52 + 20 MiB does not fit in 64 MiB.
    let c = alloc.allocate(20 * MIB, s1).unwrap();
    let s = alloc.stats();
    assert_eq!((s.num_alloc_retries, s.num_ooms), (1, 0));
    assert_eq!(dev.counters().failed_allocs, 1);
    assert_eq!(
        s.num_device_free, 1,
        "the cached segment went back to the device"
    );
    assert_eq!(s.reserved_bytes.all.current as usize, 22 * MIB);
    assert_eq!(dev.used(), 22 * MIB);
    alloc.check_invariants().unwrap();
    alloc.free(b).unwrap();
    alloc.free(c).unwrap();
}

/// An injected refusal is retried once; the second attempt succeeds.
#[test]
fn injected_refusal_is_retried() {
    // Plain: the 2nd device allocation is refused.
    let dev = Arc::new(TestBackend::builder().fail_allocation(2).build());
    let alloc =
        CachingAllocator::new(dev.clone(), "expandable_segments:False".parse().unwrap()).unwrap();
    let a = alloc.allocate(4096, StreamId::DEFAULT).unwrap();
    let b = alloc.allocate(30 * MIB, StreamId::DEFAULT).unwrap();
    let s = alloc.stats();
    assert_eq!(
        (s.num_alloc_retries, s.num_ooms, s.num_device_alloc),
        (1, 0, 2)
    );
    alloc.free(a).unwrap();
    alloc.free(b).unwrap();

    // Virtual memory: a refused 20 MiB growth is asked for again at what the request
    // needs; only when that is refused too does the allocator release its cache and
    // retry.
    let dev = Arc::new(
        TestBackend::builder()
            .virtual_memory(PAGE)
            .fail_allocation(1)
            .build(),
    );
    let alloc = CachingAllocator::new(dev.clone(), AllocConfig::default()).unwrap();
    let a = alloc.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    let s = alloc.stats();
    assert_eq!((s.num_alloc_retries, s.num_ooms), (0, 0));
    assert_eq!(s.reserved_bytes.all.current as usize, 4 * MIB);
    alloc.free(a).unwrap();

    let dev = Arc::new(
        TestBackend::builder()
            .virtual_memory(PAGE)
            .fail_allocation(1)
            .fail_allocation(2)
            .build(),
    );
    let alloc = CachingAllocator::new(dev.clone(), AllocConfig::default()).unwrap();
    let a = alloc.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    let s = alloc.stats();
    assert_eq!((s.num_alloc_retries, s.num_ooms), (1, 0));
    assert_eq!(dev.counters().failed_allocs, 2);
    assert_eq!(s.num_device_alloc, 1);
    alloc.free(a).unwrap();
    alloc.empty_cache().unwrap();
    assert_eq!(dev.used(), 0);
}

/// A request that cannot fit: one retry, one OOM, and a report with the figures.
#[test]
fn oom_report_names_the_figures() {
    for vmm in [false, true] {
        let dev = Arc::new(
            TestBackend::builder()
                .capacity(64 * MIB)
                .virtual_memory(PAGE)
                .build(),
        );
        let conf = if vmm {
            "expandable_segments:True"
        } else {
            "expandable_segments:False"
        };
        let alloc = CachingAllocator::new(dev.clone(), conf.parse().unwrap()).unwrap();
        // A 3 MiB block in a 20 MiB segment (plain) leaves 17 MiB free that cannot be
        // returned while the block lives.
        let a = alloc.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
        let err = alloc.allocate(62 * MIB, StreamId::DEFAULT).unwrap_err();
        let AllocError::OutOfMemory(report) = &err else {
            panic!("expected OOM, got {err}")
        };
        let s = alloc.stats();
        assert_eq!((s.num_alloc_retries, s.num_ooms), (1, 1));
        assert_eq!(report.requested, 62 * MIB);
        assert_eq!(report.allocated, 3 * MIB);
        let text = err.to_string();
        assert!(
            text.contains("tried to allocate 62.00 MiB (62.00 MiB requested)"),
            "{text}"
        );
        assert!(text.contains("3.00 MiB allocated"), "{text}");
        assert!(text.contains("64.00 MiB"), "{text}");
        // Plain: a 20 MiB segment; virtual memory: a growth of at least 20 MiB. The
        // free 17 MiB hold no whole chunk, so nothing can go back.
        assert_eq!(report.reserved, 20 * MIB, "{text}");
        assert_eq!(report.largest_free_block, 17 * MIB, "{text}");
        assert!(text.contains("largest free block 17.00 MiB"), "{text}");
        alloc.check_invariants().unwrap();
        alloc.free(a).unwrap();
        alloc.empty_cache().unwrap();
        assert_eq!(dev.used(), 0);
    }
}

/// The checks here can fail: a recount that disagrees is reported.
#[test]
fn recount_detects_a_mismatch() {
    let dev = Arc::new(TestBackend::builder().build());
    let alloc = CachingAllocator::new(dev, AllocConfig::default()).unwrap();
    let a = alloc.allocate(4096, StreamId::DEFAULT).unwrap();
    let stats = alloc.stats();
    let mut snap = alloc.snapshot();
    check_recount(&stats, &snap, 0).unwrap();
    snap[0].blocks[0].state = BlockState::Free;
    assert!(check_recount(&stats, &snap, 0).is_err());
    assert!(check_recount(&stats, &alloc.snapshot(), PAGE).is_err());
    alloc.free(a).unwrap();
}
