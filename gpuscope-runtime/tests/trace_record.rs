//! The allocator records its own trace in the shared CSV format, and replaying the
//! recording reproduces the original run's figures.

use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
use gpuscope_runtime::backend::test::TestBackend;
use gpuscope_runtime::trace::replay::{ReplayOptions, replay};
use gpuscope_runtime::trace::{Trace, TraceOp};

fn sim() -> Arc<TestBackend> {
    Arc::new(
        TestBackend::builder()
            .capacity(80 << 30)
            .virtual_memory(2 << 20)
            .build(),
    )
}

#[test]
fn a_recorded_replay_is_the_trace_again() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/traces/prefetch_train.csv"
    );
    let original = Trace::read(std::path::Path::new(path)).unwrap();
    let alloc = CachingAllocator::new(sim(), AllocConfig::default()).unwrap();
    alloc.start_recording();
    let first = replay(
        &alloc,
        &original,
        "prefetch",
        &ReplayOptions {
            warm_passes: 0,
            ..Default::default()
        },
    )
    .unwrap();
    let recorded = alloc.stop_recording();

    // Same operations in the same order, sizes and streams (ids are the recorder's own),
    // then the frees with which replay ends a pass for what the trace left allocated.
    let n = original.ops().len();
    assert!(recorded.ops().len() >= n);
    assert!(
        recorded.ops()[n..]
            .iter()
            .all(|op| matches!(op, TraceOp::Free { .. }))
    );
    for (a, b) in recorded.ops().iter().zip(original.ops()) {
        match (a, b) {
            (
                TraceOp::Alloc {
                    size: s1,
                    stream: t1,
                    ..
                },
                TraceOp::Alloc {
                    size: s2,
                    stream: t2,
                    ..
                },
            ) => {
                assert_eq!((s1, t1), (s2, t2));
            }
            (TraceOp::Free { .. }, TraceOp::Free { .. }) => {}
            _ => panic!("operation kinds differ: {a:?} vs {b:?}"),
        }
    }

    // The CSV round-trips, and replaying it gives the same figures.
    let csv = recorded.to_csv();
    assert!(csv.starts_with("op,id,size,stream\n"));
    let parsed = Trace::parse_str(&csv, "recorded").unwrap();
    assert_eq!(parsed.ops(), recorded.ops());
    let again = CachingAllocator::new(sim(), AllocConfig::default()).unwrap();
    let second = replay(
        &again,
        &parsed,
        "recorded",
        &ReplayOptions {
            warm_passes: 0,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(second.peak_allocated, first.peak_allocated);
    assert_eq!(second.peak_reserved, first.peak_reserved);
    assert_eq!(second.device_allocs, first.device_allocs);
}

#[test]
fn recording_stops_and_restarts_empty() {
    let alloc = CachingAllocator::new(sim(), AllocConfig::default()).unwrap();
    assert!(
        alloc.stop_recording().ops().is_empty(),
        "nothing recorded before start"
    );
    alloc.start_recording();
    let b = alloc
        .allocate(4096, gpuscope_runtime::backend::StreamId::DEFAULT)
        .unwrap();
    alloc.free(b).unwrap();
    assert_eq!(alloc.stop_recording().ops().len(), 2);
    let b = alloc
        .allocate(4096, gpuscope_runtime::backend::StreamId::DEFAULT)
        .unwrap();
    alloc.free(b).unwrap();
    assert!(
        alloc.stop_recording().ops().is_empty(),
        "not recording after stop"
    );
}
