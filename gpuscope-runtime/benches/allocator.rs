//! Criterion benchmarks of the caching allocator.
//!
//! - `alloc_free`: one `allocate` + `free` pair of a given size on a warm cache (the
//!   block comes from a cached segment), on the host backend.
//! - `replay`: one warm pass over each trace in `tests/data/traces` (after a cold pass
//!   that fills the cache), on the host backend (plain segments) and on the test backend
//!   with virtual memory (2 MiB granularity; its driver calls are bookkeeping only, so
//!   this measures the allocator's own work). Throughput is per trace operation.
//!
//! `cargo bench -p gpuscope-runtime --bench allocator -- --warm-up-time 1 --measurement-time 2`

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator, RawBlock};
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::backend::test::TestBackend;
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::trace::{Trace, TraceOp};

const SIZES: [(&str, usize); 6] = [
    ("512B", 512),
    ("4KiB", 4 << 10),
    ("1MiB", 1 << 20),
    ("2MiB", 2 << 20),
    ("20MiB", 20 << 20),
    ("256MiB", 256 << 20),
];

const TRACES: [&str; 3] = ["bert_infer.csv", "gpt2_train.csv", "prefetch_train.csv"];

fn alloc_free(c: &mut Criterion) {
    let alloc =
        CachingAllocator::new(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
    let mut g = c.benchmark_group("alloc_free");
    g.throughput(Throughput::Elements(1));
    for (label, size) in SIZES {
        // Warm the cache: the segment stays cached after the free.
        let b = alloc.allocate(size, StreamId::DEFAULT).unwrap();
        alloc.free(b).unwrap();
        let device_allocs = alloc.stats().num_device_alloc;
        g.bench_with_input(BenchmarkId::new("host", label), &size, |bench, &size| {
            bench.iter(|| {
                let b = alloc.allocate(black_box(size), StreamId::DEFAULT).unwrap();
                alloc.free(black_box(b)).unwrap();
            })
        });
        assert_eq!(
            alloc.stats().num_device_alloc,
            device_allocs,
            "{label}: the timed pairs must hit the cache"
        );
    }
    g.finish();
}

enum Step {
    Alloc {
        slot: usize,
        size: usize,
        stream: StreamId,
    },
    Free {
        slot: usize,
    },
    Record {
        slot: usize,
        stream: StreamId,
    },
}

/// A trace with ids resolved to dense slots and stream numbers to backend streams.
struct Compiled {
    steps: Vec<Step>,
    slots: usize,
}

fn compile(trace: &Trace, backend: &dyn Backend) -> Compiled {
    let mut streams = std::collections::HashMap::new();
    let mut stream_of = |n: u32| {
        *streams.entry(n).or_insert_with(|| {
            if n == 0 {
                StreamId::DEFAULT
            } else {
                backend.create_stream().unwrap()
            }
        })
    };
    let mut ids = std::collections::HashMap::new();
    let mut slots = 0;
    let mut steps = Vec::with_capacity(trace.ops().len());
    for op in trace.ops() {
        match *op {
            TraceOp::Alloc { id, size, stream } => {
                let slot = slots;
                slots += 1;
                ids.insert(id, slot);
                steps.push(Step::Alloc {
                    slot,
                    size,
                    stream: stream_of(stream),
                });
            }
            TraceOp::Free { id } => steps.push(Step::Free { slot: ids[&id] }),
            TraceOp::RecordStream { id, stream } => steps.push(Step::Record {
                slot: ids[&id],
                stream: stream_of(stream),
            }),
        }
    }
    Compiled { steps, slots }
}

/// One pass over the trace; what it leaves live is freed at the end.
fn pass(alloc: &CachingAllocator, t: &Compiled, live: &mut [Option<RawBlock>]) {
    for step in &t.steps {
        match *step {
            Step::Alloc { slot, size, stream } => {
                live[slot] = Some(alloc.allocate(size, stream).unwrap())
            }
            Step::Free { slot } => alloc.free(live[slot].take().unwrap()).unwrap(),
            Step::Record { slot, stream } => alloc
                .record_stream(live[slot].as_ref().unwrap(), stream)
                .unwrap(),
        }
    }
    for b in live.iter_mut().filter_map(Option::take) {
        alloc.free(b).unwrap();
    }
}

fn replay(c: &mut Criterion) {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/traces"));
    let mut g = c.benchmark_group("replay");
    for name in TRACES {
        let trace = Trace::read(&dir.join(name)).unwrap();
        let backends: [(&str, Arc<dyn Backend>); 2] = [
            ("host", Arc::new(HostBackend::new())),
            (
                "test-vmm",
                Arc::new(TestBackend::builder().virtual_memory(2 << 20).build()),
            ),
        ];
        for (label, backend) in backends {
            let alloc = CachingAllocator::new(backend.clone(), AllocConfig::default()).unwrap();
            let compiled = compile(&trace, &*backend);
            let mut live: Vec<Option<RawBlock>> = (0..compiled.slots).map(|_| None).collect();
            pass(&alloc, &compiled, &mut live); // cold pass
            g.throughput(Throughput::Elements(compiled.steps.len() as u64));
            g.bench_function(
                BenchmarkId::new(label, name.trim_end_matches(".csv")),
                |bench| bench.iter(|| pass(&alloc, &compiled, &mut live)),
            );
            alloc.check_invariants().unwrap();
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = alloc_free, replay
}
criterion_main!(benches);
