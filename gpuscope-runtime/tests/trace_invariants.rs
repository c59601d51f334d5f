//! Replays the shipped PyTorch traces op by op on the simulated device, checking the
//! allocator's invariants as it goes, and holds the memory figures to their targets.

use std::path::PathBuf;
use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator, RawBlock};
use gpuscope_runtime::backend::test::TestBackend;
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::trace::replay::{ReplayOptions, replay};
use gpuscope_runtime::trace::{Trace, TraceOp};

fn trace(name: &str) -> Trace {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/traces")
        .join(name);
    Trace::read(&path).unwrap()
}

fn sim() -> Arc<TestBackend> {
    Arc::new(
        TestBackend::builder()
            .capacity(80 << 30)
            .virtual_memory(2 << 20)
            .build(),
    )
}

/// Replays every op, checking invariants every `every` ops and at the end of each pass.
fn replay_checked(backend: Arc<dyn Backend>, config: AllocConfig, t: &Trace, every: usize) {
    let alloc = CachingAllocator::new(backend.clone(), config).unwrap();
    let streams = [StreamId::DEFAULT, backend.create_stream().unwrap()];
    for pass in 0..2 {
        let mut live: std::collections::HashMap<u64, RawBlock> = Default::default();
        for (i, op) in t.ops().iter().enumerate() {
            match *op {
                TraceOp::Alloc { id, size, stream } => {
                    live.insert(id, alloc.allocate(size, streams[stream as usize]).unwrap());
                }
                TraceOp::Free { id } => alloc.free(live.remove(&id).unwrap()).unwrap(),
            }
            if i % every == 0 {
                alloc
                    .check_invariants()
                    .unwrap_or_else(|e| panic!("pass {pass}, op {i}: {e}"));
            }
        }
        for (_, b) in live.drain() {
            alloc.free(b).unwrap();
        }
        alloc
            .check_invariants()
            .unwrap_or_else(|e| panic!("end of pass {pass}: {e}"));
    }
    alloc.empty_cache().unwrap();
    alloc.check_invariants().unwrap();
    let s = alloc.stats();
    assert_eq!(
        s.reserved_bytes.all.current, 0,
        "empty_cache returns everything once nothing is live"
    );
}

#[test]
fn invariants_hold_through_every_trace_with_virtual_memory() {
    for name in ["bert_infer.csv", "gpt2_train.csv", "prefetch_train.csv"] {
        replay_checked(sim(), AllocConfig::default(), &trace(name), 97);
    }
}

#[test]
fn invariants_hold_through_every_trace_with_plain_segments() {
    let config: AllocConfig = "expandable_segments:False".parse().unwrap();
    for name in ["bert_infer.csv", "gpt2_train.csv", "prefetch_train.csv"] {
        replay_checked(sim(), config.clone(), &trace(name), 97);
    }
}

/// PyTorch's peak reserved / peak allocated on the same traces (torch_replay on the H100,
/// default and expandable-segment modes; BENCHMARKS.md): the better of the two.
const TORCH_BEST_RATIO: [(&str, f64); 3] = [
    ("bert_infer.csv", 1.095),
    ("gpt2_train.csv", 1.047),
    ("prefetch_train.csv", 1.109),
];

#[test]
fn fixed_reserve_ratio_bounds_reserved_memory() {
    for ratio in [1.02, 1.05] {
        let config: AllocConfig = format!("reserve_ratio:{ratio},adaptive_reserve:False")
            .parse()
            .unwrap();
        for (name, torch) in TORCH_BEST_RATIO {
            let alloc = CachingAllocator::new(sim(), config.clone()).unwrap();
            let r = replay(
                &alloc,
                &trace(name),
                name,
                &ReplayOptions { warm_passes: 2 },
            )
            .unwrap();
            // Pages partly in use cannot be remapped, so the ratio can pass the target
            // by what such pages hold; on these traces that stays under 1.5%.
            assert!(
                r.ratio() <= ratio + 0.015,
                "{name}: peak reserved / peak allocated = {:.4} with reserve_ratio {ratio}",
                r.ratio()
            );
            assert!(
                r.ratio() < torch,
                "{name}: {:.4} is not below PyTorch's {torch}",
                r.ratio()
            );
        }
    }
}

#[test]
fn default_settings_beat_pytorch_and_stop_remapping_on_repeated_passes() {
    for (name, torch) in TORCH_BEST_RATIO {
        let alloc = CachingAllocator::new(sim(), AllocConfig::default()).unwrap();
        let r = replay(
            &alloc,
            &trace(name),
            name,
            &ReplayOptions { warm_passes: 3 },
        )
        .unwrap();
        assert!(
            r.ratio() < torch,
            "{name}: {:.4} is not below PyTorch's {torch}",
            r.ratio()
        );
        // Ten more passes: adaptation brings remapping to (nearly) nothing.
        let r10 = replay(
            &alloc,
            &trace(name),
            name,
            &ReplayOptions { warm_passes: 10 },
        )
        .unwrap();
        let ops = r10.ops as u64 * 10;
        assert!(
            r10.warm_device_maps * 100 < ops,
            "{name}: {} maps in {ops} warm operations",
            r10.warm_device_maps
        );
    }
}
