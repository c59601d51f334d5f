//! Times one caching allocator shared by several threads: throughput and the latency of
//! each `allocate` and `free`, with the allocator's own lock (`alloc/lock.rs`: spin,
//! yield, then 20 µs naps while waiting) against the same calls serialised by a
//! `std::sync::Mutex` taken around each (a waiter sleeps on a futex, as with the
//! allocator's lock before; the allocator's own lock is then never contended and adds
//! its uncontended cost, a compare-and-swap and a store).
//!
//! Each thread runs the same seeded mix: at most 32 blocks live, sizes log-uniform
//! (70% 512 B-1 MiB, 28% 1-20 MiB, 2% 20-200 MiB), all on the default stream. With
//! `--empty-cache-ms N` one more thread calls `empty_cache` every N ms, so the others
//! must grow again (on CUDA: creating and mapping memory while the lock is held), the
//! case where a waiter of the allocator's lock naps instead of sleeping on a futex.
//!
//! `cargo run --release -p gpuscope-runtime --example lock_contention -- [--backend host|cuda]
//! [--threads 1,2,4,8] [--ops N] [--empty-cache-ms N] [--rounds N]`
//!
//! Prints one markdown row per backend, lock, thread count and round. On `cuda` without a
//! GPU it prints a reason and exits 0.

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator, RawBlock};
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::backend::{Backend, StreamId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const LIVE: usize = 32;

struct Options {
    backend: String,
    threads: Vec<usize>,
    ops: usize,
    empty_cache_ms: u64,
    rounds: usize,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        backend: "host".into(),
        threads: vec![1, 2, 4, 8],
        ops: 200_000,
        empty_cache_ms: 0,
        rounds: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: `{v}` is not a whole number"))
        };
        match flag.as_str() {
            "--backend" => o.backend = value,
            "--threads" => {
                o.threads = value
                    .split(',')
                    .map(|t| number(t).map(|n| n.max(1) as usize))
                    .collect::<Result<_, _>>()?
            }
            "--ops" => {
                o.ops = number(&value)? as usize;
                if o.ops == 0 {
                    return Err("--ops: each thread needs at least one call to time".into());
                }
            }
            "--empty-cache-ms" => o.empty_cache_ms = number(&value)?,
            "--rounds" => o.rounds = number(&value)?.max(1) as usize,
            _ => {
                return Err(format!(
                    "unknown option {flag} (--backend, --threads, --ops, --empty-cache-ms, --rounds)"
                ));
            }
        }
    }
    Ok(o)
}

fn backend(name: &str) -> Result<Option<Arc<dyn Backend>>, String> {
    match name {
        "host" => Ok(Some(Arc::new(HostBackend::new()))),
        #[cfg(feature = "cuda")]
        "cuda" => {
            use gpuscope_runtime::backend::cuda::{CudaBackend, unavailable_reason};
            if let Some(reason) = unavailable_reason() {
                println!("skipped: {reason}");
                return Ok(None);
            }
            Ok(Some(Arc::new(
                CudaBackend::new(0).map_err(|e| format!("CUDA device 0: {e}"))?,
            )))
        }
        other => Err(format!(
            "unknown backend `{other}` (host{})",
            if cfg!(feature = "cuda") { ", cuda" } else { "" }
        )),
    }
}

fn size(rng: &mut ChaCha8Rng) -> usize {
    let (lo, hi): (f64, f64) = match rng.random_range(0..100) {
        0..70 => (512.0, 1048576.0),
        70..98 => (1048576.0, 20971520.0),
        _ => (20971520.0, 209715200.0),
    };
    (lo.ln() + rng.random::<f64>() * (hi.ln() - lo.ln())).exp() as usize
}

/// One thread's work: `ops` calls, each one's latency in nanoseconds.
fn work(alloc: &CachingAllocator, outer: Option<&Mutex<()>>, seed: u64, ops: usize) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut live: Vec<RawBlock> = Vec::with_capacity(LIVE);
    let mut lat = Vec::with_capacity(ops);
    for _ in 0..ops {
        let grow = live.is_empty() || (live.len() < LIVE && rng.random_bool(0.55));
        let victim = if grow {
            None
        } else {
            Some(live.swap_remove(rng.random_range(0..live.len())))
        };
        let bytes = size(&mut rng);
        let t = Instant::now();
        let _held = outer.map(|m| m.lock().unwrap());
        match victim {
            None => live.push(
                alloc
                    .allocate(bytes, StreamId::DEFAULT)
                    .expect("allocation (lower --threads)"),
            ),
            Some(b) => alloc.free(b).expect("free"),
        }
        drop(_held);
        lat.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
    }
    for b in live {
        alloc.free(b).expect("free");
    }
    lat
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("lock_contention: {e}");
            std::process::exit(2);
        }
    };
    let backend = match backend(&o.backend) {
        Ok(Some(b)) => b,
        Ok(None) => return,
        Err(e) => {
            eprintln!("lock_contention: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "{} ops per thread, empty_cache every {} ms (0: never), {} CPUs",
        o.ops,
        o.empty_cache_ms,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| backend | lock | threads | round | wall ms | ns/op (all threads) | p50 ns | p99 ns | p99.9 ns | max µs | empty_cache calls |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &threads in &o.threads {
        for round in 0..o.rounds {
            for lock in ["allocator", "std-mutex"] {
                let alloc = CachingAllocator::new(backend.clone(), AllocConfig::default())
                    .expect("an allocator");
                let outer = (lock == "std-mutex").then(|| Mutex::new(()));
                let start = Barrier::new(threads + 1);
                let done = std::sync::atomic::AtomicBool::new(false);
                let mut empties = 0u64;
                let (wall, mut lat) = std::thread::scope(|s| {
                    let workers: Vec<_> = (0..threads)
                        .map(|t| {
                            let (alloc, outer, start) = (&alloc, outer.as_ref(), &start);
                            s.spawn(move || {
                                start.wait();
                                work(alloc, outer, 7 + t as u64, o.ops)
                            })
                        })
                        .collect();
                    let emptier = (o.empty_cache_ms > 0).then(|| {
                        let (alloc, outer, done) = (&alloc, outer.as_ref(), &done);
                        s.spawn(move || {
                            let mut n = 0u64;
                            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                                std::thread::sleep(Duration::from_millis(o.empty_cache_ms));
                                let _held = outer.map(|m| m.lock().unwrap());
                                alloc.empty_cache().expect("empty_cache");
                                n += 1;
                            }
                            n
                        })
                    });
                    start.wait();
                    let t = Instant::now();
                    let lat: Vec<u32> = workers
                        .into_iter()
                        .flat_map(|w| w.join().expect("a worker"))
                        .collect();
                    let wall = t.elapsed();
                    done.store(true, std::sync::atomic::Ordering::Relaxed);
                    if let Some(e) = emptier {
                        empties = e.join().expect("the emptier");
                    }
                    (wall, lat)
                });
                lat.sort_unstable();
                let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize];
                println!(
                    "| {} | {lock} | {threads} | {round} | {:.1} | {:.1} | {} | {} | {} | {:.1} | {empties} |",
                    o.backend,
                    wall.as_secs_f64() * 1e3,
                    wall.as_nanos() as f64 / lat.len() as f64,
                    q(0.5),
                    q(0.99),
                    q(0.999),
                    *lat.last().unwrap() as f64 / 1e3,
                );
                assert_eq!(
                    alloc.stats().allocated_bytes.all.current,
                    0,
                    "every block given back"
                );
            }
        }
    }
}
