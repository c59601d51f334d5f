//! The multi-stream traces of `tests/data/traces` replayed as if each stream's work ran
//! behind the host, as on a GPU: every allocation queues pretend work on its block on
//! its stream (and every `record_stream` on the recording stream), and a stream's work
//! finishes only `lag` launches later (the test backend's manual events). A replay on
//! idle streams is the `lag` 0 case (`trace_invariants.rs`).
//!
//! With `share_across_streams` on or off, for several lags:
//! - no block is handed to a stream while another stream's queued work still uses it
//!   (checked here at every allocation), nor unmapped (the test backend panics);
//! - the allocator never waits for a stream or an event.
//!
//! With pools per stream (the default) the replay also settles: the last passes make no
//! device allocation or mapping. With shared pools it does not (memory drifts between
//! the streams); `--nocapture` prints both settings' figures.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator, RawBlock};
use gpuscope_runtime::backend::test::{EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::trace::{Trace, TraceOp};

mod corpus;

const PASSES: usize = 6;
/// Passes after which every pass must be served from the cache.
const SETTLE: usize = 3;

/// Work queued on one stream: (address, end) of each launch not known finished, oldest
/// first.
type Queue = VecDeque<(u64, u64)>;

/// What one busy replay measured.
#[derive(Debug)]
struct Busy {
    peak_reserved_mib: i64,
    device_allocs: u64,
    /// Device allocations and mappings of the last `PASSES - SETTLE` passes.
    late_memory_calls: u64,
    sharing_queries: u64,
}

fn busy_replay(trace: &Trace, name: &str, share: bool, lag: usize) -> Busy {
    let dev = Arc::new(
        TestBackend::builder()
            .capacity(80 << 30)
            .virtual_memory(2 << 20)
            .event_mode(EventMode::Manual)
            .build(),
    );
    let config: AllocConfig = format!(
        "share_across_streams:{}",
        if share { "True" } else { "False" }
    )
    .parse()
    .unwrap();
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    let mut streams = HashMap::new();
    for s in trace.streams() {
        let id = if s == 0 {
            StreamId::DEFAULT
        } else {
            dev.create_stream().unwrap()
        };
        streams.insert(s, id);
    }
    let mut queues: HashMap<StreamId, Queue> = HashMap::new();
    let launch = |queues: &mut HashMap<StreamId, Queue>, stream: StreamId, b: &RawBlock| {
        dev.launch(stream, b.addr(), b.size()).unwrap();
        let q = queues.entry(stream).or_default();
        q.push_back((b.addr().0, b.addr().0 + b.size() as u64));
        // The oldest launches beyond `lag` finish.
        let done = q.len().saturating_sub(lag);
        if done > 0 {
            dev.complete_steps(stream, done as u64);
            q.drain(..done);
        }
    };
    let mut late = 0;
    for pass in 0..PASSES {
        let before = alloc.stats();
        let mut live: HashMap<u64, RawBlock> = HashMap::new();
        for (i, op) in trace.ops().iter().enumerate() {
            match *op {
                TraceOp::Alloc { id, size, stream } => {
                    let s = streams[&stream];
                    let b = alloc.allocate(size, s).unwrap();
                    let (start, end) = (b.addr().0, b.addr().0 + b.size() as u64);
                    for (&other, q) in &queues {
                        if other != s {
                            assert!(
                                !q.iter().any(|&(a, e)| a < end && start < e),
                                "{name} (share {share}, lag {lag}), pass {pass}, op {i}: {s} got \
                                 memory that work queued on {other} still uses"
                            );
                        }
                    }
                    launch(&mut queues, s, &b);
                    live.insert(id, b);
                }
                TraceOp::RecordStream { id, stream } => {
                    if let Some(b) = live.get(&id) {
                        alloc.record_stream(b, streams[&stream]).unwrap();
                        launch(&mut queues, streams[&stream], b);
                    }
                }
                TraceOp::Free { id } => {
                    if let Some(b) = live.remove(&id) {
                        alloc.free(b).unwrap();
                    }
                }
            }
        }
        for (_, b) in live.drain() {
            alloc.free(b).unwrap();
        }
        // The host waits for the step's results before the next pass.
        for (&s, q) in &mut queues {
            dev.complete_stream(s);
            q.clear();
        }
        let after = alloc.stats();
        if pass >= SETTLE {
            late += (after.num_device_alloc - before.num_device_alloc)
                + (after.num_device_map - before.num_device_map);
        }
    }
    let s = alloc.stats();
    assert_eq!(
        (
            s.num_stream_syncs,
            s.num_event_syncs,
            s.num_sync_all_streams
        ),
        (0, 0, 0),
        "{name} (share {share}, lag {lag}): the allocator waited"
    );
    alloc.check_invariants().unwrap();
    Busy {
        peak_reserved_mib: s.reserved_bytes.all.peak >> 20,
        device_allocs: s.num_device_alloc,
        late_memory_calls: late,
        sharing_queries: s.num_sharing_queries,
    }
}

fn multi_stream_traces() -> Vec<(String, Trace)> {
    let traces: Vec<(String, Trace)> = corpus::all_traces()
        .into_iter()
        .map(|(name, t)| (corpus::stem(&name).to_string(), t))
        .filter(|(_, t)| t.streams().len() > 1)
        .collect();
    assert!(traces.len() >= 19, "{} multi-stream traces", traces.len());
    traces
}

const LAGS: [usize; 3] = [1, 4, 32];

#[test]
fn busy_streams_never_get_memory_another_stream_still_uses_and_nothing_waits() {
    // Both checked inside `busy_replay`, with either setting. The figures, for the
    // record (`--nocapture`): peak reserved MiB, device allocations, and those of the
    // last passes, per stream then shared.
    println!("trace | lag | per stream: MiB, allocs, late | shared: MiB, allocs, late");
    for (name, trace) in multi_stream_traces() {
        for lag in LAGS {
            let [own, shared] = [false, true].map(|share| busy_replay(&trace, &name, share, lag));
            println!(
                "{name} | {lag} | {}, {}, {} | {}, {}, {}",
                own.peak_reserved_mib,
                own.device_allocs,
                own.late_memory_calls,
                shared.peak_reserved_mib,
                shared.device_allocs,
                shared.late_memory_calls
            );
        }
    }
}

/// With pools per stream (the default), a stream's memory is its own until it goes
/// back, so however far behind the host the streams run, the replay settles: from the
/// fourth pass on, no device allocation or mapping. (With shared pools it need not:
/// memory a stream finds free on an idle stream is taken, and its owner, finding it busy
/// later, grows; see the module documentation of `alloc::sharing`.)
#[test]
fn with_pools_per_stream_busy_replays_settle() {
    for (name, trace) in multi_stream_traces() {
        for lag in LAGS {
            let r = busy_replay(&trace, &name, false, lag);
            assert_eq!(
                r.late_memory_calls, 0,
                "{name}, lag {lag}: passes {SETTLE}.. grew: {r:?}"
            );
            assert_eq!(r.sharing_queries, 0);
        }
    }
}
