//! The random operations a sequence is made of, and their strategies.

use super::*;

#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// Allocate `size` bytes on stream number `stream` (0..3).
    Alloc {
        size: usize,
        stream: u8,
    },
    /// Free a random live block.
    Free(Index),
    /// Free a random live block and allocate its size again on its stream: a cache hit.
    FreeRealloc(Index),
    /// `record_stream` of a random live block on stream number `.1`.
    RecordStream(Index, u8),
    /// Synchronise stream number `.0` through the backend.
    Sync(u8),
    /// Mark stream number `.0`'s work complete (test backend; no sync counted).
    CompleteStream(u8),
    /// `record_fence` on stream number `.0`.
    RecordFence(u8),
    EmptyCache,
    ResetPeak,
    /// `set_memory_limit`.
    SetLimit(Option<usize>),
}

/// Sizes from 1 byte to 64 MiB, skewed toward small ones and the pool and segment
/// boundaries.
pub(crate) fn size_strategy(max: usize) -> BoxedStrategy<usize> {
    let mib = 1usize << 20;
    let sizes = prop_oneof![
        25 => 1usize..=4096,
        15 => 4097usize..=mib,
        12 => (mib - 2048)..=(mib + 2048),
        5 => (2 * mib - 1024)..=(2 * mib + 1024),
        10 => (mib + 1)..=(10 * mib),
        10 => (10 * mib - 8192)..=(10 * mib + 8192),
        6 => (10 * mib)..=(64 * mib),
        3 => prop::sample::select(vec![
            512,
            mib,
            2 * mib,
            10 * mib,
            20 * mib,
            32 * mib,
            64 * mib
        ]),
    ];
    sizes.prop_map(move |s| s.min(max)).boxed()
}

pub(crate) fn op_strategy(max_size: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        45 => (size_strategy(max_size), 0u8..3).prop_map(|(size, stream)| Op::Alloc { size, stream }),
        30 => any::<Index>().prop_map(Op::Free),
        5 => any::<Index>().prop_map(Op::FreeRealloc),
        8 => (any::<Index>(), 0u8..3).prop_map(|(i, s)| Op::RecordStream(i, s)),
        6 => (0u8..3).prop_map(Op::Sync),
        4 => (0u8..3).prop_map(Op::CompleteStream),
        6 => (0u8..3).prop_map(Op::RecordFence),
        2 => Just(Op::EmptyCache),
        2 => Just(Op::ResetPeak),
        1 => prop_oneof![Just(None), ((64usize << 20)..=(1 << 30)).prop_map(Some)].prop_map(Op::SetLimit),
    ]
}

pub(crate) fn ops(max_size: usize, len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op_strategy(max_size), len)
}

pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

pub(crate) fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // Failures print the minimal sequence; no regression files in the source tree.
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}
