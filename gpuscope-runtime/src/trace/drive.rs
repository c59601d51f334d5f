//! Drives an allocator with an arbitrary sequence of operations and checks it: the
//! path property tests and fuzz targets take. Any sequence is accepted (a free of an
//! empty slot, a stream that does not exist: skipped); every allocator error must be a
//! typed [`AllocError`], and the invariants and exact accounting must hold after every
//! operation and at the end.
//!
//! ```
//! use std::sync::Arc;
//! use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
//! use gpuscope_runtime::backend::{Backend, StreamId};
//! use gpuscope_runtime::backend::test::TestBackend;
//! use gpuscope_runtime::trace::drive::{DriveOp, decode, drive};
//!
//! let dev = Arc::new(TestBackend::builder().virtual_memory(2 << 20).capacity(256 << 20).build());
//! let alloc = CachingAllocator::new(dev.clone(), AllocConfig::default()).unwrap();
//! let streams = [StreamId::DEFAULT, dev.create_stream().unwrap()];
//! let ops = [
//!     DriveOp::Alloc { slot: 0, size: 3 << 20, stream: 1 },
//!     DriveOp::RecordStream { slot: 0, stream: 0 },
//!     DriveOp::Free { slot: 0 },
//!     DriveOp::EmptyCache,
//! ];
//! let report = drive(&alloc, &streams, &ops, true).unwrap();
//! assert_eq!((report.allocs, report.frees), (1, 1));
//! // Bytes from a fuzzer decode to operations too.
//! let ops = decode(&[0, 7, 200, 1, 1, 7, 3]);
//! assert!(drive(&alloc, &streams, &ops, true).is_ok());
//! ```

use crate::alloc::{AllocError, CachingAllocator, RawBlock};
use crate::backend::StreamId;

/// Slots a sequence can hold blocks in.
pub const SLOTS: usize = 64;

/// One operation on the allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriveOp {
    /// Allocate `size` bytes on `streams[stream]` into `slot` (freeing what it held).
    Alloc {
        /// Which slot (modulo [`SLOTS`]).
        slot: u8,
        /// Bytes requested.
        size: usize,
        /// Index into the stream list (modulo its length).
        stream: u8,
    },
    /// Free the block in `slot`.
    Free {
        /// Which slot.
        slot: u8,
    },
    /// The block in `slot` is used on `streams[stream]` too.
    RecordStream {
        /// Which slot.
        slot: u8,
        /// Index into the stream list.
        stream: u8,
    },
    /// `empty_cache`.
    EmptyCache,
    /// A fence on `streams[stream]`.
    Fence {
        /// Index into the stream list.
        stream: u8,
    },
}

/// What a drive did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriveReport {
    /// Allocations that succeeded.
    pub allocs: u64,
    /// Frees that succeeded.
    pub frees: u64,
    /// Allocator calls that failed with a typed error (out of memory, a driver error).
    pub errors: u64,
}

/// Decodes arbitrary bytes into operations (for fuzzers): each op takes one byte of
/// kind and up to three of arguments; sizes span 1 byte to 1 GiB, most of them small.
pub fn decode(bytes: &[u8]) -> Vec<DriveOp> {
    let mut ops = Vec::new();
    let mut it = bytes.iter().copied();
    while let Some(kind) = it.next() {
        let mut arg = || it.next().unwrap_or(0);
        ops.push(match kind % 8 {
            0..=2 => {
                let slot = arg();
                let scale = arg();
                let stream = arg();
                let size = match scale % 4 {
                    0 => 1 + scale as usize * 37,
                    1 => (scale as usize) << 12,
                    2 => (scale as usize) << 18,
                    _ => (scale as usize) << 22,
                };
                DriveOp::Alloc { slot, size, stream }
            }
            3 | 4 => DriveOp::Free { slot: arg() },
            5 => DriveOp::RecordStream {
                slot: arg(),
                stream: arg(),
            },
            6 => DriveOp::Fence { stream: arg() },
            _ => DriveOp::EmptyCache,
        });
    }
    ops
}

/// Applies `ops` to `alloc` on `streams` (at least one), checking the invariants after
/// each op when `check_each`, and at the end frees everything, empties the cache and
/// checks that nothing is allocated, active or reserved and that the statistics equal a
/// recount. `Err` describes the first broken promise.
pub fn drive(
    alloc: &CachingAllocator,
    streams: &[StreamId],
    ops: &[DriveOp],
    check_each: bool,
) -> Result<DriveReport, String> {
    assert!(!streams.is_empty(), "drive needs at least one stream");
    let start = alloc.stats();
    let mut slots: Vec<Option<RawBlock>> = (0..SLOTS).map(|_| None).collect();
    let mut report = DriveReport::default();
    let stream = |i: u8| streams[i as usize % streams.len()];
    let note = |r: Result<(), AllocError>, report: &mut DriveReport| -> Result<(), String> {
        match r {
            Ok(()) => Ok(()),
            Err(AllocError::InvalidBlock(m)) => Err(format!("a valid block was refused: {m}")),
            Err(_) => {
                report.errors += 1;
                Ok(())
            }
        }
    };
    for (i, op) in ops.iter().enumerate() {
        match *op {
            DriveOp::Alloc {
                slot,
                size,
                stream: s,
            } => {
                let slot = slot as usize % SLOTS;
                if let Some(old) = slots[slot].take() {
                    note(alloc.free(old).map(|()| report.frees += 1), &mut report)?;
                }
                match alloc.allocate(size, stream(s)) {
                    Ok(b) => {
                        report.allocs += 1;
                        slots[slot] = Some(b);
                    }
                    Err(e) => note(Err(e), &mut report)?,
                }
            }
            DriveOp::Free { slot } => {
                if let Some(b) = slots[slot as usize % SLOTS].take() {
                    note(alloc.free(b).map(|()| report.frees += 1), &mut report)?;
                }
            }
            DriveOp::RecordStream { slot, stream: s } => {
                if let Some(b) = &slots[slot as usize % SLOTS] {
                    note(alloc.record_stream(b, stream(s)), &mut report)?;
                }
            }
            DriveOp::EmptyCache => note(alloc.empty_cache(), &mut report)?,
            DriveOp::Fence { stream: s } => {
                note(alloc.record_fence(stream(s)).map(|_| ()), &mut report)?
            }
        }
        if check_each {
            alloc
                .check_invariants()
                .map_err(|e| format!("after op {i} ({op:?}): {e}"))?;
        }
    }
    for b in slots.iter_mut().filter_map(Option::take) {
        note(alloc.free(b).map(|()| report.frees += 1), &mut report)?;
    }
    alloc
        .check_invariants()
        .map_err(|e| format!("after freeing everything: {e}"))?;
    let s = alloc.stats();
    if s.allocated_bytes.all.current != 0 || s.allocation.all.current != 0 {
        return Err(format!(
            "after freeing everything, {} blocks ({} bytes) are still allocated",
            s.allocation.all.current, s.allocated_bytes.all.current
        ));
    }
    let allocs = (s.allocation.all.allocated - start.allocation.all.allocated) as u64;
    let frees = (s.allocation.all.freed - start.allocation.all.freed) as u64;
    if allocs != report.allocs || frees != report.frees {
        return Err(format!(
            "statistics count {allocs} allocations and {frees} frees, the drive made {} and {}",
            report.allocs, report.frees
        ));
    }
    // The final empty_cache may itself fail under injected faults; what it could not
    // give back must still be accounted for (checked by the invariants).
    let emptied = alloc.empty_cache();
    alloc
        .check_invariants()
        .map_err(|e| format!("after empty_cache: {e}"))?;
    let s = alloc.stats();
    if emptied.is_ok() && (s.active.all.current != 0 || s.reserved_bytes.all.current != 0) {
        return Err(format!(
            "after empty_cache, {} blocks are active and {} bytes reserved",
            s.active.all.current, s.reserved_bytes.all.current
        ));
    }
    Ok(report)
}
