//! Out-of-memory injection: the test backend refuses every n-th device allocation
//! (n = 2..=7) on a device of limited capacity, while a shipped trace or a random
//! sequence runs, on the plain path and on the virtual memory path.
//!
//! Every allocation either succeeds or fails with [`AllocError::OutOfMemory`], whose
//! report names the request, what is allocated, reserved and free, and the largest free
//! block, all equal to what the allocator and the device say. After each failure the
//! invariants hold, the statistics equal a recount, the device holds exactly the reserved
//! bytes, nothing that could be released is still cached, and, every few failures,
//! freeing everything and emptying the cache leaves nothing allocated, nothing reserved
//! and nothing held by the device. `num_ooms` counts the failures; `num_alloc_retries`
//! counts the allocations that released the cache and asked the device again (a failure
//! that such a retry fixes is a retry, not an OOM; a final failure is both, as in
//! PyTorch).
//!
//! Where things live: `run` (the allocator on a failing device and its checks),
//! `recount` (statistics recounted from a snapshot), then the tests: `traces`,
//! `random_sequences`, `fixed_cases`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use gpuscope_runtime::alloc::rounding::{Pool, round_size};
use gpuscope_runtime::alloc::{
    AllocConfig, AllocError, BlockState, CachingAllocator, MemoryStats, OomCause, OutOfMemory,
    RawBlock, SegmentInfo,
};
use gpuscope_runtime::backend::test::{EventMode, TestBackend};
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::format_bytes;
use gpuscope_runtime::trace::{Trace, TraceOp};

const PAGE: usize = 2 << 20;
const MIB: usize = 1 << 20;

mod fixed_cases;
mod random_sequences;
mod recount;
mod run;
mod traces;

use run::Run;

pub(crate) fn trace(name: &str) -> Trace {
    let path =
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/traces")).join(name);
    Trace::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A tiny deterministic generator (SplitMix64), so failures reproduce.
pub(crate) struct Rng(u64);

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

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// Sizes from 1 byte to 48 MiB, mostly small, many near the pool boundaries.
    fn size(&mut self) -> usize {
        match self.below(100) {
            0..=34 => self.range(1, 8192),
            35..=49 => self.range(8193, MIB),
            50..=61 => self.range(MIB - 2048, MIB + 2048),
            62..=79 => self.range(MIB + 1, 10 * MIB),
            80..=91 => self.range(10 * MIB - 8192, 10 * MIB + 8192),
            _ => self.range(10 * MIB, 48 * MIB),
        }
    }
}
