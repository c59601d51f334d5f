//! What memory snapshots and histories cost.
//!
//! `cargo bench -p gpuscope-runtime --bench memory_snapshot` prints:
//! - the time of `memory::snapshot` of a device holding 100,000 live tracked tensors
//!   (100,000 allocated blocks), median and quartiles over 15 snapshots;
//! - the time per allocation+free pair with the history off and on (100,000 pairs).

use std::sync::Arc;
use std::time::Instant;

use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::memory;
use gpuscope_runtime::scope::set_tracking;
use gpuscope_runtime::{Device, Tensor};

fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}

fn main() {
    set_tracking(true);
    let dev = Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
    let n = 100_000;
    let live: Vec<Tensor> = (0..n)
        .map(|_| Tensor::zeros(&[16], &dev).unwrap())
        .collect();
    let mut times = Vec::new();
    let mut blocks = 0;
    for _ in 0..15 {
        let t = Instant::now();
        let snap = memory::snapshot(&dev);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        blocks = snap.blocks().filter(|b| b.tensor.is_some()).count();
    }
    assert_eq!(blocks, n, "every live tensor is in a block of the snapshot");
    let t = Instant::now();
    let segs = dev.allocator().snapshot();
    let t_alloc = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let recs = gpuscope_runtime::report_live();
    let t_live = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "(parts: allocator segments {t_alloc:.2} ms for {} segments, tracking records {t_live:.2} ms for {})",
        segs.len(),
        recs.len()
    );
    let (q1, med, q3) = quartiles(times);
    println!(
        "snapshot of {n} live tracked tensors: median {med:.2} ms [{q1:.2}, {q3:.2}] (15 runs)"
    );
    drop(live);

    let pairs = 100_000;
    let per_pair = |on: bool| {
        memory::record_history(&dev, if on { 4 * pairs } else { 0 });
        let t = Instant::now();
        for _ in 0..pairs {
            let b = dev.alloc(4096).unwrap();
            std::hint::black_box(&b);
        }
        t.elapsed().as_secs_f64() * 1e9 / pairs as f64
    };
    let mut off = Vec::new();
    let mut on = Vec::new();
    for _ in 0..5 {
        off.push(per_pair(false));
        on.push(per_pair(true));
    }
    let (_, off, _) = quartiles(off);
    let (_, on, _) = quartiles(on);
    println!(
        "allocation + free, history off: {off:.0} ns; on: {on:.0} ns (medians of 5 x {pairs})"
    );
}
