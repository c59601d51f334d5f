//! Multi-threaded stress: one allocator shared by 8 threads, each allocating, freeing,
//! recording blocks on other streams (`record_stream`), fencing and emptying the cache
//! at random, on its own stream and on the default stream.
//!
//! On the host backend every block gets a byte pattern of its thread and sequence number,
//! checked before the block is freed, so two threads handed overlapping memory corrupt
//! each other's patterns. On the test backend (virtual memory, which holds no data) a
//! shared registry of live ranges catches overlap instead. Meanwhile an observer thread
//! checks the allocator's invariants. At the end nothing is allocated, the accumulated
//! counts equal what the threads did (allocations, frees, requested bytes, and on the
//! virtual memory path one event per other stream a freed block was recorded on, plus
//! one per fence), and `empty_cache` returns everything.
//!
//! 20,000 operations per thread in release builds, fewer in debug builds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use gpuscope_runtime::alloc::{AllocConfig, BlockState, CachingAllocator, RawBlock};
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::backend::test::{EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, StreamId};

const THREADS: usize = 8;

fn ops_per_thread() -> usize {
    if cfg!(debug_assertions) {
        12_000
    } else {
        20_000
    }
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn the_allocator_is_send_and_sync() {
    assert_send_sync::<CachingAllocator>();
    assert_send_sync::<Arc<CachingAllocator>>();
    assert_send_sync::<RawBlock>();
}

/// A tiny deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Mostly small sizes, some around the 1 MiB pool boundary, a few up to 12 MiB.
    fn size(&mut self) -> usize {
        match self.below(100) {
            0..=59 => 1 + self.below(8 << 10),
            60..=84 => 1 + self.below(256 << 10),
            85..=94 => (1 << 20) - 4096 + self.below(8192),
            _ => 1 + self.below(12 << 20),
        }
    }
}

/// What a thread did, for the final accounting.
#[derive(Default, Debug)]
struct Tally {
    allocs: i64,
    frees: i64,
    requested: i64,
    /// Events the frees had to record: one per other stream each freed block was used on.
    free_events: u64,
}

/// Bytes written at each end of a block (and in its middle); blocks up to `WHOLE` bytes
/// are written whole.
const WINDOW: usize = 4096;
const WHOLE: usize = 256 << 10;

/// The pattern of block `seq` of thread `t`: a byte of its own, with the thread and
/// sequence number at both ends of each window.
fn fill(buf: &mut [u8], t: usize, seq: u64) {
    let tag = ((t as u64) << 48 | seq).to_le_bytes();
    buf.fill((seq.wrapping_mul(31).wrapping_add(t as u64 * 7) % 251) as u8 + 1);
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&tag[..n]);
    let len = buf.len();
    if len >= 16 {
        buf[len - 8..].copy_from_slice(&tag);
    }
}

/// The ranges of a block of `len` bytes that carry its pattern.
fn windows(len: usize) -> Vec<(usize, usize)> {
    if len <= WHOLE {
        vec![(0, len)]
    } else {
        let mid = len / 2 - WINDOW / 2;
        vec![(0, WINDOW), (mid, mid + WINDOW), (len - WINDOW, len)]
    }
}

struct HostLive {
    block: RawBlock,
    seq: u64,
}

fn host_worker(
    t: usize,
    alloc: Arc<CachingAllocator>,
    host: Arc<HostBackend>,
    barrier: Arc<Barrier>,
) -> Tally {
    let own = host.create_stream().unwrap();
    let mut rng = Rng(0x5EED + t as u64);
    let mut live: Vec<HostLive> = Vec::new();
    let mut tally = Tally::default();
    let mut buf = vec![0u8; WHOLE];
    let mut back = vec![0u8; WHOLE];
    barrier.wait();
    for seq in 0..ops_per_thread() as u64 {
        let allocate = live.len() < 4 || (live.len() < 48 && rng.below(100) < 55);
        if allocate {
            let size = rng.size();
            let stream = if rng.below(10) < 7 {
                own
            } else {
                StreamId::DEFAULT
            };
            let block = alloc.allocate(size, stream).unwrap();
            assert_eq!(
                block.addr().0 % 256,
                0,
                "thread {t}: block at {} is not aligned",
                block.addr()
            );
            for (s, e) in windows(size) {
                fill(&mut buf[..e - s], t, seq);
                // SAFETY: the block holds at least `size` bytes of host memory, and only
                // this thread uses it.
                unsafe { host.copy_host_to_device(block.addr().offset(s), &buf[..e - s], stream) }
                    .unwrap();
            }
            if rng.below(20) == 0 {
                let other = if stream == own {
                    StreamId::DEFAULT
                } else {
                    own
                };
                alloc.record_stream(&block, other).unwrap();
            }
            tally.allocs += 1;
            tally.requested += size as i64;
            live.push(HostLive { block, seq });
        } else {
            let l = live.swap_remove(rng.below(live.len()));
            let size = l.block.size();
            for (s, e) in windows(size) {
                fill(&mut buf[..e - s], t, l.seq);
                // SAFETY: as above; the block is still allocated.
                unsafe {
                    host.copy_device_to_host(
                        &mut back[..e - s],
                        l.block.addr().offset(s),
                        l.block.stream(),
                    )
                }
                .unwrap();
                if back[..e - s] != buf[..e - s] {
                    let at = (0..e - s).find(|&i| back[i] != buf[i]).unwrap_or(0);
                    panic!(
                        "thread {t}: block {} at {} (+{size}) was overwritten at offset {}: {:#04x} instead of {:#04x}",
                        l.seq,
                        l.block.addr(),
                        s + at,
                        back[at],
                        buf[at]
                    );
                }
            }
            alloc.free(l.block).unwrap();
            tally.frees += 1;
        }
    }
    for l in live {
        alloc.free(l.block).unwrap();
        tally.frees += 1;
    }
    tally
}

/// Checks the allocator's invariants over and over until `stop`; returns the count.
fn observer(alloc: Arc<CachingAllocator>, stop: Arc<AtomicBool>) -> usize {
    let mut checks = 0;
    while !stop.load(Ordering::Relaxed) {
        alloc
            .check_invariants()
            .unwrap_or_else(|e| panic!("while the threads run: {e}"));
        let snap = alloc.snapshot();
        for w in snap.windows(2) {
            assert!(
                w[0].base.0 + w[0].size as u64 <= w[1].base.0,
                "segments overlap"
            );
        }
        let s = alloc.stats();
        assert!(s.allocated_bytes.all.current <= s.reserved_bytes.all.current);
        checks += 1;
        thread::sleep(Duration::from_millis(2));
    }
    checks
}

/// Starts [`THREADS`] workers (`spawn(t, barrier)` for thread `t`; they start together
/// at the barrier) and, beside them, an [`observer`] of `alloc`; returns the workers'
/// tallies and the observer's count of checks once all have finished.
fn run_workers(
    alloc: &Arc<CachingAllocator>,
    mut spawn: impl FnMut(usize, Arc<Barrier>) -> thread::JoinHandle<Tally>,
) -> (Vec<Tally>, usize) {
    let barrier = Arc::new(Barrier::new(THREADS));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (alloc, stop) = (alloc.clone(), stop.clone());
        thread::spawn(move || observer(alloc, stop))
    };
    let workers: Vec<_> = (0..THREADS).map(|t| spawn(t, barrier.clone())).collect();
    let tallies: Vec<Tally> = workers
        .into_iter()
        .map(|h| h.join().expect("worker panicked"))
        .collect();
    stop.store(true, Ordering::Relaxed);
    let checks = watcher.join().expect("observer panicked");
    (tallies, checks)
}

fn finish(alloc: &CachingAllocator, tallies: &[Tally], what: &str) {
    let allocs: i64 = tallies.iter().map(|t| t.allocs).sum();
    let frees: i64 = tallies.iter().map(|t| t.frees).sum();
    let requested: i64 = tallies.iter().map(|t| t.requested).sum();
    assert_eq!(allocs, frees);
    alloc.check_invariants().unwrap();
    let s = alloc.stats();
    assert_eq!(
        s.allocation.all.current, 0,
        "{what}: blocks still allocated"
    );
    assert_eq!(
        s.allocated_bytes.all.current, 0,
        "{what}: bytes still allocated"
    );
    assert_eq!(
        s.requested_bytes.all.current, 0,
        "{what}: requested bytes still counted"
    );
    // Every operation of every thread was counted once: no update was lost.
    assert_eq!(
        s.allocation.all.allocated, allocs,
        "{what}: allocations counted"
    );
    assert_eq!(s.allocation.all.freed, frees, "{what}: frees counted");
    assert_eq!(
        s.requested_bytes.all.allocated, requested,
        "{what}: requested bytes counted"
    );
    assert_eq!(s.num_ooms, 0);
    let stuck = alloc
        .snapshot()
        .iter()
        .flat_map(|seg| seg.blocks.iter())
        .filter(|b| b.state == BlockState::Allocated)
        .count();
    assert_eq!(stuck, 0, "{what}: allocated blocks in the snapshot");
    alloc.empty_cache().unwrap();
    let s = alloc.stats();
    assert_eq!(
        s.reserved_bytes.all.current, 0,
        "{what}: reserved after empty_cache"
    );
    assert_eq!(
        s.active.all.current, 0,
        "{what}: active blocks after empty_cache"
    );
    assert_eq!(
        s.segment.all.current, 0,
        "{what}: segments after empty_cache"
    );
    alloc.check_invariants().unwrap();
}

#[test]
fn eight_threads_share_one_allocator_on_host_memory() {
    let start = Instant::now();
    let host = Arc::new(HostBackend::new());
    let alloc = Arc::new(CachingAllocator::new(host.clone(), AllocConfig::default()).unwrap());
    let (tallies, checks) = run_workers(&alloc, |t, barrier| {
        let (alloc, host) = (alloc.clone(), host.clone());
        thread::spawn(move || host_worker(t, alloc, host, barrier))
    });
    assert!(checks > 0);
    finish(&alloc, &tallies, "host");
    eprintln!(
        "{THREADS} threads x {} ops on the host backend in {:.2?} ({checks} concurrent invariant checks)",
        ops_per_thread(),
        start.elapsed()
    );
}

/// Live ranges of all threads, to catch overlapping blocks without memory contents.
type Registry = Mutex<BTreeMap<u64, (u64, usize)>>;

fn register(reg: &Registry, addr: u64, len: u64, t: usize) {
    let mut r = reg.lock().unwrap();
    if let Some((&a, &(l, owner))) = r.range(..addr + len).next_back() {
        assert!(
            a + l <= addr,
            "thread {t}: block at {addr:#x} (+{len}) overlaps thread {owner}'s at {a:#x} (+{l})"
        );
    }
    r.insert(addr, (len, t));
}

fn vm_worker(
    t: usize,
    alloc: Arc<CachingAllocator>,
    dev: Arc<TestBackend>,
    streams: [StreamId; 2],
    reg: Arc<Registry>,
    barrier: Arc<Barrier>,
) -> Tally {
    let mut rng = Rng(0xC0FFEE + t as u64);
    // Each live block, with the other streams it was recorded on.
    let mut live: Vec<(RawBlock, Vec<StreamId>)> = Vec::new();
    let mut tally = Tally::default();
    barrier.wait();
    for _ in 0..ops_per_thread() {
        let roll = rng.below(1000);
        if roll < 8 {
            // Work on a stream finishes: its pending frees may complete.
            dev.complete_stream(streams[rng.below(2)]);
        } else if roll < 10 {
            alloc.record_fence(streams[rng.below(2)]).unwrap();
        } else if roll < 11 {
            alloc.empty_cache().unwrap();
        } else if roll < 60 && !live.is_empty() {
            let i = rng.below(live.len());
            let other = streams[rng.below(2)];
            alloc.record_stream(&live[i].0, other).unwrap();
            if other != live[i].0.stream() && !live[i].1.contains(&other) {
                live[i].1.push(other);
            }
        } else if live.len() < 4 || (live.len() < 48 && rng.below(100) < 55) {
            let size = rng.size();
            let stream = streams[rng.below(2)];
            let block = alloc.allocate(size, stream).unwrap();
            register(&reg, block.addr().0, size as u64, t);
            tally.allocs += 1;
            tally.requested += size as i64;
            live.push((block, Vec::new()));
        } else {
            let (b, uses) = live.swap_remove(rng.below(live.len()));
            reg.lock().unwrap().remove(&b.addr().0).expect("registered");
            alloc.free(b).unwrap();
            tally.frees += 1;
            tally.free_events += uses.len() as u64;
        }
    }
    for (b, uses) in live {
        reg.lock().unwrap().remove(&b.addr().0);
        alloc.free(b).unwrap();
        tally.frees += 1;
        tally.free_events += uses.len() as u64;
    }
    tally
}

/// The same on the virtual memory path (test backend: fake addresses, so overlap is
/// caught by a shared registry of live ranges, and misuse of mappings by the backend),
/// with events that complete only when a thread says so: frees of blocks used on other
/// streams wait for them, and fences and `empty_cache` run concurrently.
#[test]
fn eight_threads_share_one_allocator_with_virtual_memory() {
    let dev = Arc::new(
        TestBackend::builder()
            .virtual_memory(2 << 20)
            .event_mode(EventMode::Manual)
            .build(),
    );
    let config = AllocConfig {
        fence_interval_us: 0,
        ..AllocConfig::default()
    };
    let alloc = Arc::new(CachingAllocator::new(dev.clone(), config).unwrap());
    assert!(alloc.uses_virtual_memory());
    let reg: Arc<Registry> = Arc::new(Mutex::new(BTreeMap::new()));
    let (tallies, _) = run_workers(&alloc, |t, barrier| {
        let streams = [StreamId::DEFAULT, dev.create_stream().unwrap()];
        let (alloc, dev, reg) = (alloc.clone(), dev.clone(), reg.clone());
        thread::spawn(move || vm_worker(t, alloc, dev, streams, reg, barrier))
    });
    assert!(reg.lock().unwrap().is_empty());
    let s = alloc.stats();
    let free_events: u64 = tallies.iter().map(|t| t.free_events).sum();
    assert!(free_events > 0, "no free waited for another stream");
    // Each poll asks each stream that frees since the last poll wait for once (one
    // query, then an event if the stream is busy), and each fence records one event.
    // (The other queries ask whether one stream's free memory may serve another.)
    let for_frees = s.num_event_records - s.num_fences;
    let queries = s.num_stream_queries - s.num_sharing_queries;
    assert!(
        for_frees <= queries && queries <= free_events,
        "events for frees {for_frees}, stream queries {queries}, frees waiting for another stream {free_events}"
    );
    finish(&alloc, &tallies, "virtual memory");
    assert_eq!(dev.used(), 0, "the device still holds memory");
    assert_eq!(dev.live_allocations(), 0);
}
