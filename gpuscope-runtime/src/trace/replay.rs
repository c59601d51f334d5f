//! Replays a trace through a [`CachingAllocator`]: one cold pass from an empty cache,
//! then warm passes over the cache the earlier passes left, timing each and counting
//! the driver calls each pass made, with the allocator's peaks and device allocations.
//!
//! Ids are resolved to dense slots before the timed passes, so a pass costs one
//! allocator call and one vector access per operation. What a pass leaves live is freed
//! after its timing, so every pass starts alike.
//!
//! ```
//! use std::sync::Arc;
//! use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
//! use gpuscope_runtime::backend::test::TestBackend;
//! use gpuscope_runtime::trace::{Trace, replay::{replay, ReplayOptions}};
//!
//! let trace = Trace::parse_str("op,id,size,stream\na,0,4096,0\na,1,3000000,1\nr,1,0,0\nf,0,0,0\nf,1,0,1\n", "t").unwrap();
//! let dev = Arc::new(TestBackend::builder().virtual_memory(2 << 20).build());
//! let alloc = CachingAllocator::new(dev, AllocConfig::default()).unwrap();
//! let r = replay(&alloc, &trace, "t", &ReplayOptions::default()).unwrap();
//! assert_eq!(r.ops, 5);
//! assert_eq!(r.peak_allocated, 4096 + 3000320); // sizes rounded up to 512 bytes
//! assert_eq!(r.device_allocs, 2); // one small and one large chunk, reused when warm
//! assert_eq!(r.warm_calls().memory_and_waits(), 0); // warm passes map and wait for nothing
//! ```

use std::time::Instant;

use crate::alloc::rounding::round_size;
use crate::alloc::stats::DriverCalls;
use crate::alloc::{AllocConfig, AllocError, CachingAllocator, RawBlock};
use crate::backend::{Backend, StreamId};

use super::{Trace, TraceOp};

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Warm passes after the cold one (default 3, as PyTorch's replay does).
    pub warm_passes: usize,
    /// Whether to write every block on its stream when it is allocated, and again on
    /// each stream a `record_stream` names (default `false`). On a GPU the writes queue
    /// work, so the streams are busy when the allocator asks about them, as in a
    /// training step that the host runs ahead of; without them every stream is idle
    /// whenever asked. The timings then include the launches; reserved memory, device
    /// allocations and driver calls are what to read. The host waits for the device at
    /// the end of each pass, outside the timing (as a loop waits for a step's loss).
    /// Needs a backend with memory (CUDA or the host, not the simulated device).
    pub touch: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            warm_passes: 3,
            touch: false,
        }
    }
}

/// What one pass did.
#[derive(Clone, Debug, PartialEq)]
pub struct PassResult {
    /// Nanoseconds per operation.
    pub ns_per_op: f64,
    /// The most bytes reserved during the pass.
    pub peak_reserved: usize,
    /// The most bytes allocated during the pass.
    pub peak_allocated: usize,
    /// The driver calls the pass made.
    pub calls: DriverCalls,
    /// Of `calls.stream_queries`, those asking whether one stream's free memory may
    /// serve another (`share_across_streams`).
    pub sharing_queries: u64,
}

/// What a replay measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayResult {
    /// The trace's name.
    pub trace: String,
    /// Operations per pass.
    pub ops: usize,
    /// Nanoseconds per operation of the cold pass.
    pub cold_ns_per_op: f64,
    /// Nanoseconds per operation, mean over the warm passes.
    pub warm_ns_per_op: f64,
    /// Each pass, cold first.
    pub passes: Vec<PassResult>,
    /// Peak of allocated bytes (block sizes) over all passes.
    pub peak_allocated: usize,
    /// Peak of reserved bytes over all passes.
    pub peak_reserved: usize,
    /// Peak of the sum of live request sizes rounded to 512 bytes: what any allocator
    /// must hold at the busiest moment of the trace.
    pub peak_live: usize,
    /// Device allocations over all passes (`cudaMalloc` or `cuMemCreate` calls).
    pub device_allocs: u64,
    /// Device frees over all passes.
    pub device_frees: u64,
}

impl ReplayResult {
    /// Peak reserved over peak allocated.
    pub fn ratio(&self) -> f64 {
        self.peak_reserved as f64 / self.peak_allocated.max(1) as f64
    }

    /// The driver calls of the cold pass.
    pub fn cold_calls(&self) -> DriverCalls {
        self.passes[0].calls
    }

    /// The driver calls of all warm passes together.
    pub fn warm_calls(&self) -> DriverCalls {
        self.passes[1..]
            .iter()
            .fold(DriverCalls::default(), |acc, p| acc + p.calls)
    }

    /// Whether every warm pass reserved the same memory and made the same driver calls
    /// as the first warm pass. On a GPU that other work shares, the polls can differ
    /// (a stream still busy with that work when the allocator asks about it is polled
    /// through an event instead) while the memory does not.
    pub fn warm_passes_identical(&self) -> bool {
        self.passes.get(1).is_none_or(|first| {
            self.passes[1..]
                .iter()
                .all(|p| p.calls == first.calls && p.peak_reserved == first.peak_reserved)
        })
    }
}

/// An operation of a replay that failed, with where it came from.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// An allocator call for a line of the trace failed.
    #[error("{trace}:{line}: {what} failed: {source}")]
    Op {
        /// The trace's name.
        trace: String,
        /// The line of the trace (0 when the trace was not parsed from text).
        line: usize,
        /// The operation, e.g. `allocating 4096 bytes as id 7 on stream 0`.
        what: String,
        /// The allocator's error.
        source: Box<AllocError>,
    },
    /// Creating the trace's streams, emptying the cache or freeing what the trace left
    /// live failed.
    #[error("{trace}: {what} failed: {source}")]
    Setup {
        /// The trace's name.
        trace: String,
        /// What was being done.
        what: String,
        /// The allocator's error.
        source: Box<AllocError>,
    },
}

enum Step {
    Alloc {
        slot: u32,
        size: usize,
        stream: StreamId,
    },
    Free {
        slot: u32,
    },
    Record {
        slot: u32,
        stream: StreamId,
    },
}

/// Resolves ids to dense slots and stream numbers to `streams` (by the trace's
/// order of first use).
fn compile(trace: &Trace, order: &[u32], streams: &[StreamId]) -> (Vec<Step>, usize) {
    let by_number: std::collections::HashMap<u32, StreamId> =
        order.iter().copied().zip(streams.iter().copied()).collect();
    let mut slots = std::collections::HashMap::new();
    let mut next = 0u32;
    let steps = trace
        .ops()
        .iter()
        .map(|op| match *op {
            TraceOp::Alloc { id, size, stream } => {
                let slot = next;
                next += 1;
                slots.insert(id, slot);
                Step::Alloc {
                    slot,
                    size,
                    stream: by_number[&stream],
                }
            }
            // A validated trace frees and records only live ids.
            TraceOp::Free { id } => Step::Free {
                slot: slots.remove(&id).unwrap_or(u32::MAX),
            },
            TraceOp::RecordStream { id, stream } => Step::Record {
                slot: slots.get(&id).copied().unwrap_or(u32::MAX),
                stream: by_number[&stream],
            },
        })
        .collect();
    (steps, next as usize)
}

/// The most bytes live at once, with requests rounded as the allocator rounds them.
pub fn peak_live(trace: &Trace, config: &AllocConfig) -> usize {
    let mut sizes = std::collections::HashMap::new();
    let (mut live, mut peak) = (0usize, 0usize);
    for op in trace.ops() {
        match *op {
            TraceOp::Alloc { id, size, .. } => {
                let r = round_size(size, config);
                sizes.insert(id, r);
                live = live.saturating_add(r);
                peak = peak.max(live);
            }
            TraceOp::Free { id } => live -= sizes.remove(&id).unwrap_or(0),
            TraceOp::RecordStream { .. } => {}
        }
    }
    peak
}

/// Replays `trace` through `allocator` (whose statistics it resets first). The trace's
/// stream 0 is the default stream; every other stream number gets a new stream.
pub fn replay(
    allocator: &CachingAllocator,
    trace: &Trace,
    name: &str,
    options: &ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    let setup = |what: &str, source: AllocError| ReplayError::Setup {
        trace: name.to_string(),
        what: what.to_string(),
        source: Box::new(source),
    };
    let backend = allocator.backend();
    let order = trace.streams();
    let mut streams = Vec::with_capacity(order.len());
    for &number in &order {
        streams.push(if number == 0 {
            StreamId::DEFAULT
        } else {
            backend
                .create_stream()
                .map_err(|e| setup("creating the trace's streams", e.into()))?
        });
    }
    let (steps, slots) = compile(trace, &order, &streams);
    let mut live: Vec<Option<RawBlock>> = (0..slots).map(|_| None).collect();

    allocator
        .empty_cache()
        .map_err(|e| setup("emptying the cache", e))?;
    // The cold pass starts on an idle device: memory that an earlier replay (or anything
    // else in the process) gave back may still be being cleared by the driver, and the
    // first growths would wait for it (as PyTorch's harness waits in `cudaFree`).
    backend
        .synchronize_device()
        .map_err(|e| setup("waiting for the device to be idle", e.into()))?;
    allocator.reset_peak_stats();
    allocator.reset_accumulated_stats();
    let mut passes = Vec::new();
    for _ in 0..=options.warm_passes {
        allocator.reset_peak_stats();
        let (before, sharing_before) = {
            let s = allocator.stats();
            (s.driver_calls(), s.num_sharing_queries)
        };
        let start = Instant::now();
        for (i, step) in steps.iter().enumerate() {
            let result = match *step {
                Step::Alloc { slot, size, stream } => {
                    allocator.allocate(size, stream).and_then(|b| {
                        let touched = touch(&*backend, options, &b, stream);
                        live[slot as usize] = Some(b);
                        touched
                    })
                }
                Step::Free { slot } => match live.get_mut(slot as usize).and_then(Option::take) {
                    Some(block) => allocator.free(block),
                    None => Ok(()),
                },
                Step::Record { slot, stream } => match live.get(slot as usize) {
                    Some(Some(block)) => allocator
                        .record_stream(block, stream)
                        .and_then(|()| touch(&*backend, options, block, stream)),
                    _ => Ok(()),
                },
            };
            if let Err(source) = result {
                // Free what is live, so the allocator is left as the replay found it.
                for block in live.iter_mut().filter_map(Option::take) {
                    let _ = allocator.free(block);
                }
                return Err(ReplayError::Op {
                    trace: name.to_string(),
                    line: trace.line_of(i).unwrap_or(0),
                    what: describe(&trace.ops()[i]),
                    source: Box::new(source),
                });
            }
        }
        let elapsed = start.elapsed().as_nanos() as f64;
        let ns_per_op = elapsed / steps.len().max(1) as f64;
        if options.touch {
            // The host waits for the pass's work, as a training loop waits for a step's
            // loss (not the allocator: its statistics do not count it).
            backend
                .synchronize_device()
                .map_err(|e| setup("waiting for the pass's writes", e.into()))?;
        }
        // What the trace left live is freed outside the timing, so passes start alike.
        for block in live.iter_mut().filter_map(Option::take) {
            allocator
                .free(block)
                .map_err(|e| setup("freeing what the trace left live", e))?;
        }
        let stats = allocator.stats();
        passes.push(PassResult {
            ns_per_op,
            peak_reserved: stats.reserved_bytes.all.peak as usize,
            peak_allocated: stats.allocated_bytes.all.peak as usize,
            calls: stats.driver_calls() - before,
            sharing_queries: stats.num_sharing_queries - sharing_before,
        });
    }
    let stats = allocator.stats();
    let warm = &passes[1..];
    Ok(ReplayResult {
        trace: name.to_string(),
        ops: steps.len(),
        cold_ns_per_op: passes[0].ns_per_op,
        warm_ns_per_op: if warm.is_empty() {
            passes[0].ns_per_op
        } else {
            warm.iter().map(|p| p.ns_per_op).sum::<f64>() / warm.len() as f64
        },
        peak_allocated: passes.iter().map(|p| p.peak_allocated).max().unwrap_or(0),
        peak_reserved: passes.iter().map(|p| p.peak_reserved).max().unwrap_or(0),
        peak_live: peak_live(trace, &allocator.config()),
        device_allocs: stats.num_device_alloc,
        device_frees: stats.num_device_free,
        passes,
    })
}

/// With [`ReplayOptions::touch`], writes `block` on `stream` (queued work on a GPU).
#[inline]
fn touch(
    backend: &dyn Backend,
    options: &ReplayOptions,
    block: &RawBlock,
    stream: StreamId,
) -> Result<(), AllocError> {
    if !options.touch {
        return Ok(());
    }
    // SAFETY: the block is live (allocated by the replay and not freed) and `size` bytes
    // long; only the replay's own writes touch it (a block recorded on another stream
    // may be written by both, with the same value).
    unsafe { backend.memset(block.addr(), 0, block.size(), stream) }.map_err(AllocError::from)
}

/// A trace operation in words, for errors.
fn describe(op: &TraceOp) -> String {
    match *op {
        TraceOp::Alloc { id, size, stream } => {
            format!("allocating {size} bytes as id {id} on stream {stream}")
        }
        TraceOp::Free { id } => format!("freeing id {id}"),
        TraceOp::RecordStream { id, stream } => {
            format!("recording id {id} on stream {stream}")
        }
    }
}
