//! Cost of scopes and tracking: an empty scope enter+exit, and a scope that creates and
//! drops N tensors, with tracking on and off.
//!
//! `cargo bench -p gpuscope-runtime --bench scopes`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use gpuscope_runtime::scope::{
    LeakPolicy, ScopeGuard, ScopeOptions, set_leak_policy, set_tracking,
};
use gpuscope_runtime::tensor::DType;
use gpuscope_runtime::{Device, Tensor, backend::StreamId};

fn scopes(c: &mut Criterion) {
    set_leak_policy(LeakPolicy::Deny);
    let dev = Device::host().expect("host device");
    let mut g = c.benchmark_group("scope");
    for tracking in [false, true] {
        set_tracking(tracking);
        let label = if tracking {
            "tracking on"
        } else {
            "tracking off"
        };
        g.bench_function(BenchmarkId::new("empty enter+exit", label), |b| {
            b.iter(|| {
                let s = ScopeGuard::enter(ScopeOptions::new("bench"));
                black_box(&s);
            })
        });
        for n in [1usize, 16, 64] {
            g.bench_function(
                BenchmarkId::new(format!("{n} tensors made and dropped"), label),
                |b| {
                    b.iter(|| {
                        let s = ScopeGuard::enter(ScopeOptions::new("bench"));
                        for _ in 0..n {
                            let t = Tensor::empty_on(&[16], DType::F32, &dev, StreamId::DEFAULT)
                                .expect("alloc");
                            black_box(&t);
                        }
                        drop(s);
                    })
                },
            );
        }
        // The same tensors without any scope: the baseline the scope adds to.
        g.bench_function(BenchmarkId::new("16 tensors, no scope", label), |b| {
            b.iter(|| {
                for _ in 0..16 {
                    let t = Tensor::empty_on(&[16], DType::F32, &dev, StreamId::DEFAULT)
                        .expect("alloc");
                    black_box(&t);
                }
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = scopes
}
criterion_main!(benches);
