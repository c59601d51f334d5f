//! Arbitrary operation sequences (the bytes a fuzzer would give, decoded by
//! `trace::drive::decode`) on the test backend, with virtual memory and plain segments,
//! a capacity that runs out, and events that complete only when the allocator waits for
//! them: `trace::drive::drive` checks the invariants after every operation, and exact
//! accounting and a complete `empty_cache` at the end.

use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
use gpuscope_runtime::backend::test::{EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::trace::drive::{decode, drive};
use proptest::prelude::*;

fn run(bytes: &[u8], vmm: bool, conf: &str) -> Result<(), TestCaseError> {
    let dev = Arc::new(
        TestBackend::builder()
            .capacity(512 << 20)
            .virtual_memory(2 << 20)
            .event_mode(EventMode::Manual)
            .build(),
    );
    let mut config: AllocConfig = conf.parse().unwrap();
    config.expandable_segments = vmm;
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    let streams = [
        StreamId::DEFAULT,
        dev.create_stream().unwrap(),
        dev.create_stream().unwrap(),
    ];
    let report = drive(&alloc, &streams, &decode(bytes), true).map_err(TestCaseError::fail)?;
    prop_assert_eq!(
        dev.used(),
        0,
        "the device still holds memory ({:?})",
        report
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES sets it for a longer search (the fuzz target's stable twin).
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if cfg!(debug_assertions) { 64 } else { 512 }),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_sequences_keep_exact_accounting(
        bytes in prop::collection::vec(any::<u8>(), 0..800),
        vmm in any::<bool>(),
        conf in prop::sample::select(vec![
            "",
            "garbage_collection_threshold:0.5",
            "max_split_size_mb:64",
            "memory_limit_mb:200",
            // One pool for every stream (with virtual memory; pools per stream without),
            // under a cap that makes memory go back and holes be mapped again.
            "share_across_streams:True",
            "share_across_streams:True,memory_limit_mb:200",
        ]),
    ) {
        run(&bytes, vmm, conf)?;
    }
}

#[test]
fn decoded_bytes_reach_every_operation_and_are_counted() {
    use gpuscope_runtime::trace::drive::DriveOp;
    // alloc (slot 1, 1.5 MiB: scale 6 << 18, stream 1), record on stream 0, fence,
    // alloc (slot 2, 12 MiB: scale 3 << 22), free slot 1, empty_cache, alloc again into
    // slot 2 (frees the 12 MiB block first).
    let bytes = [0, 1, 6, 1, 5, 1, 0, 6, 0, 1, 2, 3, 0, 3, 1, 7, 2, 2, 5, 1];
    let ops = decode(&bytes);
    assert!(matches!(ops[0], DriveOp::Alloc { slot: 1, size, stream: 1 } if size == 6 << 18));
    assert!(matches!(
        ops[1],
        DriveOp::RecordStream { slot: 1, stream: 0 }
    ));
    assert!(matches!(ops[2], DriveOp::Fence { stream: 0 }));
    assert!(matches!(ops[3], DriveOp::Alloc { slot: 2, size, stream: 0 } if size == 3 << 22));
    assert!(matches!(ops[4], DriveOp::Free { slot: 1 }));
    assert!(matches!(ops[5], DriveOp::EmptyCache));
    assert!(matches!(ops[6], DriveOp::Alloc { slot: 2, .. }));
    let dev = Arc::new(TestBackend::builder().virtual_memory(2 << 20).build());
    let streams = [StreamId::DEFAULT, dev.create_stream().unwrap()];
    // The fence came before anything was freed on stream 0, so it recorded nothing; the
    // free of the block used on stream 0 was sealed by `empty_cache`: one query found
    // the stream idle, so no event was needed. With one pool for every stream, the
    // 12 MiB block's free on stream 0 merges with the block stream 1 freed below it once
    // a second query finds stream 1 idle.
    for (conf, queries) in [("", 1), ("share_across_streams:True", 2)] {
        let alloc = CachingAllocator::new(dev.clone(), conf.parse().unwrap()).unwrap();
        let report = drive(&alloc, &streams, &ops, true).unwrap();
        assert_eq!((report.allocs, report.frees, report.errors), (3, 3, 0));
        let s = alloc.stats();
        assert_eq!(
            (s.num_fences, s.num_stream_queries, s.num_event_records),
            (0, queries, 0),
            "{conf:?}"
        );
    }
}
