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
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/traces").join(name);
    Trace::read(&path).unwrap()
}

fn sim() -> Arc<TestBackend> {
    Arc::new(TestBackend::builder().capacity(80 << 30).virtual_memory(2 << 20).build())
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
                alloc.check_invariants().unwrap_or_else(|e| panic!("pass {pass}, op {i}: {e}"));
            }
        }
        for (_, b) in live.drain() {
            alloc.free(b).unwrap();
        }
        alloc.check_invariants().unwrap_or_else(|e| panic!("end of pass {pass}: {e}"));
    }
    alloc.empty_cache().unwrap();
    alloc.check_invariants().unwrap();
    let s = alloc.stats();
    assert_eq!(s.reserved_bytes.all.current, 0, "empty_cache returns everything once nothing is live");
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

#[test]
fn reserved_stays_within_two_percent_of_allocated() {
    for name in ["bert_infer.csv", "gpt2_train.csv", "prefetch_train.csv"] {
        let alloc = CachingAllocator::new(sim(), AllocConfig::default()).unwrap();
        let r = replay(&alloc, &trace(name), name, &ReplayOptions::default()).unwrap();
        eprintln!("{name}: ratio {:.4}, reserved {} live {} allocs {}", r.ratio(), r.peak_reserved, r.peak_live, r.device_allocs);
        assert!(r.ratio() <= 1.02, "{name}: peak reserved / peak allocated = {:.4}", r.ratio());
        assert!(
            r.peak_reserved as f64 <= r.peak_live as f64 * 1.02,
            "{name}: peak reserved {} vs live peak {}",
            r.peak_reserved,
            r.peak_live
        );
    }
}
