//! Replays a trace through a [`CachingAllocator`]: one cold pass from an empty cache,
//! then warm passes over the cache the earlier passes left, timing each and reading the
//! allocator's peaks and device allocation counts.
//!
//! Ids are resolved to dense slots before the timed passes, so a pass costs one
//! allocator call and one vector access per operation.
//!
//! ```
//! use std::sync::Arc;
//! use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
//! use gpuscope_runtime::backend::test::TestBackend;
//! use gpuscope_runtime::trace::{Trace, replay::{replay, ReplayOptions}};
//!
//! let trace = Trace::parse_str("op,id,size,stream\na,0,4096,0\na,1,3000000,1\nf,0,0,0\nf,1,0,1\n", "t").unwrap();
//! let alloc = CachingAllocator::new(Arc::new(TestBackend::builder().build()), AllocConfig::default()).unwrap();
//! let r = replay(&alloc, &trace, "t", &ReplayOptions::default()).unwrap();
//! assert_eq!(r.ops, 4);
//! assert_eq!(r.peak_allocated, 4096 + 3000320); // sizes rounded up to 512 bytes
//! assert_eq!(r.device_allocs, 2); // one small and one large segment, reused when warm
//! ```

use std::time::Instant;

use crate::alloc::rounding::round_size;
use crate::alloc::{AllocConfig, AllocError, CachingAllocator, RawBlock};
use crate::backend::StreamId;

use super::{Trace, TraceOp};

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Warm passes after the cold one (default 3, as PyTorch's replay does).
    pub warm_passes: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions { warm_passes: 3 }
    }
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
    /// Nanoseconds per operation of each pass, cold first.
    pub pass_ns_per_op: Vec<f64>,
    /// Peak of allocated bytes (block sizes) over all passes.
    pub peak_allocated: usize,
    /// Peak of reserved bytes over all passes.
    pub peak_reserved: usize,
    /// Peak of the sum of live request sizes rounded to 512 bytes: what any allocator
    /// must hold at the busiest moment of the trace.
    pub peak_live: usize,
    /// Device allocations over all passes.
    pub device_allocs: u64,
    /// Device frees over all passes.
    pub device_frees: u64,
    /// Chunk mappings over all passes (virtual memory).
    pub device_maps: u64,
    /// Chunk mappings made during the warm passes.
    pub warm_device_maps: u64,
    /// Physical chunks created over all passes (virtual memory only).
    pub device_chunks: u64,
    /// Chunk unmappings (to remap them elsewhere) over all passes.
    pub device_unmaps: u64,
}

impl ReplayResult {
    /// Peak reserved over peak allocated.
    pub fn ratio(&self) -> f64 {
        self.peak_reserved as f64 / self.peak_allocated.max(1) as f64
    }
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
}

/// Resolves ids to dense slots and stream numbers to backend streams.
fn compile(trace: &Trace, streams: &[StreamId]) -> (Vec<Step>, usize) {
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
                    stream: streams[stream as usize],
                }
            }
            TraceOp::Free { id } => Step::Free {
                // A validated trace frees only live ids.
                slot: slots.remove(&id).unwrap_or(u32::MAX),
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
                live += r;
                peak = peak.max(live);
            }
            TraceOp::Free { id } => live -= sizes.remove(&id).unwrap_or(0),
        }
    }
    peak
}

/// Replays `trace` through `allocator` (whose statistics it resets first).
pub fn replay(
    allocator: &CachingAllocator,
    trace: &Trace,
    name: &str,
    options: &ReplayOptions,
) -> Result<ReplayResult, AllocError> {
    let backend = allocator.backend();
    let needed = trace
        .ops()
        .iter()
        .filter_map(|op| match op {
            TraceOp::Alloc { stream, .. } => Some(*stream as usize + 1),
            TraceOp::Free { .. } => None,
        })
        .max()
        .unwrap_or(1);
    let mut streams = vec![StreamId::DEFAULT];
    while streams.len() < needed {
        streams.push(backend.create_stream()?);
    }
    let (steps, slots) = compile(trace, &streams);
    let mut live: Vec<Option<RawBlock>> = (0..slots).map(|_| None).collect();

    allocator.empty_cache()?;
    allocator.reset_peak_stats();
    allocator.reset_accumulated_stats();
    let mut pass_ns = Vec::new();
    let mut maps_after_cold = 0;
    for pass in 0..=options.warm_passes {
        let start = Instant::now();
        for step in &steps {
            match *step {
                Step::Alloc { slot, size, stream } => {
                    live[slot as usize] = Some(allocator.allocate(size, stream)?);
                }
                Step::Free { slot } => {
                    if let Some(block) = live.get_mut(slot as usize).and_then(Option::take) {
                        allocator.free(block)?;
                    }
                }
            }
        }
        let elapsed = start.elapsed().as_nanos() as f64;
        pass_ns.push(elapsed / steps.len().max(1) as f64);
        // What the trace left live is freed outside the timing, so passes start alike.
        for block in live.iter_mut().filter_map(Option::take) {
            allocator.free(block)?;
        }
        if pass == 0 {
            maps_after_cold = allocator.stats().num_device_map;
        }
    }
    let stats = allocator.stats();
    let warm = &pass_ns[1..];
    Ok(ReplayResult {
        trace: name.to_string(),
        ops: steps.len(),
        cold_ns_per_op: pass_ns[0],
        warm_ns_per_op: if warm.is_empty() {
            pass_ns[0]
        } else {
            warm.iter().sum::<f64>() / warm.len() as f64
        },
        pass_ns_per_op: pass_ns,
        peak_allocated: stats.allocated_bytes.all.peak as usize,
        peak_reserved: stats.reserved_bytes.all.peak as usize,
        peak_live: peak_live(trace, &allocator.config()),
        device_allocs: stats.num_device_alloc,
        device_frees: stats.num_device_free,
        device_maps: stats.num_device_map,
        warm_device_maps: stats.num_device_map - maps_after_cold,
        device_chunks: stats.num_device_chunks,
        device_unmaps: stats.num_device_unmap,
    })
}
