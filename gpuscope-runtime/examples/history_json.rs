//! Records a real allocation history of EVENTS events (default 250,000) from eight
//! lines of this file on a host device, and writes the snapshot with its history as
//! JSON: the input of the `gpuscope view` benchmark (BENCHMARKS.md).
//!
//! ```text
//! cargo run --release -p gpuscope-runtime --features serde --example history_json -- history.json [EVENTS]
//! ```

use std::sync::Arc;

use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::memory;
use gpuscope_runtime::scope::set_tracking;
use gpuscope_runtime::{Device, Tensor};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "history.json".into());
    let events: usize = args
        .next()
        .map_or(250_000, |e| e.parse().expect("EVENTS is a number"));
    set_tracking(true);
    let dev = Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
    memory::record_history(&dev, events);
    let mut live: Vec<Tensor> = Vec::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut i = 0usize;
    while memory::history(&dev).map_or(0, |h| h.events.len() + h.dropped as usize) < events {
        for _ in 0..1000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if live.len() < 200 && (state % 3 != 0 || live.is_empty()) {
                let n = 64 + (state as usize >> 8) % 4096;
                let t = match i % 8 {
                    0 => Tensor::zeros(&[n], &dev),
                    1 => Tensor::ones(&[n], &dev),
                    2 => Tensor::zeros(&[n, 2], &dev),
                    3 => Tensor::ones(&[n, 3], &dev),
                    4 => Tensor::zeros(&[2, n], &dev),
                    5 => Tensor::ones(&[4, n], &dev),
                    6 => Tensor::zeros(&[n, 8], &dev),
                    _ => Tensor::ones(&[8, n], &dev),
                };
                live.push(t.unwrap());
                i += 1;
            } else {
                let k = (state as usize >> 3) % live.len();
                live.swap_remove(k);
            }
        }
    }
    let snap = memory::snapshot(&dev);
    memory::write_json(&snap, path.as_ref()).unwrap();
    println!(
        "{path}: {} events, {} blocks",
        snap.history.as_ref().map_or(0, |h| h.events.len()),
        snap.blocks().count()
    );
}
