//! Allocator errors, and the out-of-memory report: what was asked, what the allocator
//! holds, the largest free block, the largest live allocations, and what to try.

use std::fmt;

use crate::backend::{BackendError, DeviceAddr, StreamId};
use crate::format_bytes;

use super::config::ConfigError;
use super::rounding::Pool;

/// An error from the caching allocator. (`Debug` prints the message, the out-of-memory
/// report included, so that a `main` returning it says what happened.)
#[derive(thiserror::Error)]
pub enum AllocError {
    /// Nothing could make room for the request; see the report.
    #[error("{0}")]
    OutOfMemory(Box<OutOfMemory>),
    /// A free or `record_stream` of a block this allocator does not have allocated:
    /// freed twice, or never allocated here.
    #[error("invalid block handle: {0}")]
    InvalidBlock(String),
    /// A backend call failed for another reason than lack of memory.
    #[error("device error: {0}")]
    Backend(#[from] BackendError),
    /// The allocator configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

crate::error_fmt::debug_as_display!(AllocError);

impl AllocError {
    /// The out-of-memory report, if this is one.
    pub fn as_out_of_memory(&self) -> Option<&OutOfMemory> {
        match self {
            AllocError::OutOfMemory(o) => Some(o),
            _ => None,
        }
    }
}

/// Why the device could not give more memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OomCause {
    /// The device itself refused.
    Device,
    /// The request is larger than any allocation the allocator makes
    /// ([`MAX_ALLOCATION`](super::rounding::MAX_ALLOCATION)).
    TooLarge,
    /// The allocator's memory cap would be exceeded.
    Limit {
        /// The cap, in bytes.
        limit: usize,
        /// How it was set (e.g. `per_process_memory_fraction 0.50`).
        how: String,
    },
}

/// One live allocation, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveAllocation {
    /// Its address.
    pub addr: DeviceAddr,
    /// Bytes asked for.
    pub requested: usize,
    /// Bytes of the block after rounding.
    pub size: usize,
    /// The stream it belongs to.
    pub stream: StreamId,
}

/// The report of an allocation that failed for lack of memory.
#[derive(Clone, Debug)]
pub struct OutOfMemory {
    /// Device description, e.g. `cuda:0 (NVIDIA H100 80GB HBM3)`.
    pub device: String,
    /// Bytes asked for.
    pub requested: usize,
    /// The request after rounding.
    pub rounded: usize,
    /// The pool it was for.
    pub pool: Pool,
    /// The stream it was for.
    pub stream: StreamId,
    /// The device's capacity.
    pub total_capacity: usize,
    /// Memory the device reported free.
    pub device_free: usize,
    /// Bytes in allocated blocks.
    pub allocated: usize,
    /// Bytes the allocator holds from the device.
    pub reserved: usize,
    /// The largest free block the allocator holds (any stream or pool).
    pub largest_free_block: usize,
    /// Why the device gave no more.
    pub cause: OomCause,
    /// The largest live allocations, largest first.
    pub largest_live: Vec<LiveAllocation>,
    /// The configuration in effect.
    pub config: String,
    /// Whether segments are built from virtual memory.
    pub expandable: bool,
}

impl fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unallocated = self.reserved.saturating_sub(self.allocated);
        writeln!(
            f,
            "out of memory on {}: tried to allocate {} ({} requested) on {} for the {} pool.",
            self.device,
            format_bytes(self.rounded),
            format_bytes(self.requested),
            self.stream,
            self.pool.name()
        )?;
        writeln!(
            f,
            "  The device has a total capacity of {}, of which {} is free.",
            format_bytes(self.total_capacity),
            format_bytes(self.device_free)
        )?;
        if self.cause == OomCause::TooLarge {
            writeln!(
                f,
                "  The request is larger than any device memory ({} at most).",
                format_bytes(super::rounding::MAX_ALLOCATION)
            )?;
        }
        if let OomCause::Limit { limit, how } = &self.cause {
            writeln!(
                f,
                "  The allocator's cap is {} ({how}).",
                format_bytes(*limit)
            )?;
        }
        writeln!(
            f,
            "  gpuscope holds {}: {} allocated and {} reserved but unallocated (largest free block {}).",
            format_bytes(self.reserved),
            format_bytes(self.allocated),
            format_bytes(unallocated),
            format_bytes(self.largest_free_block)
        )?;
        if !self.largest_live.is_empty() {
            writeln!(f, "  Largest live allocations:")?;
            for a in &self.largest_live {
                writeln!(
                    f,
                    "    {:>12} at {} on {} ({} requested)",
                    format_bytes(a.size),
                    a.addr,
                    a.stream,
                    format_bytes(a.requested)
                )?;
            }
        }
        write!(
            f,
            "  What to try: free tensors you no longer need, or reduce the batch size"
        )?;
        if matches!(self.cause, OomCause::Limit { .. }) {
            write!(
                f,
                "; raise the cap (per_process_memory_fraction / memory_limit_mb in GPUSCOPE_ALLOC_CONF)"
            )?;
        }
        // Much held free, or enough free memory in all (held and on the device) for the
        // request, had the free memory held been in one piece or able to go back.
        let fragmented = (unallocated > self.reserved / 10 && unallocated >= self.rounded / 2)
            || (unallocated > 0 && unallocated.saturating_add(self.device_free) >= self.rounded);
        if fragmented {
            write!(
                f,
                "; {} is held free in pieces that neither hold the request nor can go back (fragmentation): ",
                format_bytes(unallocated)
            )?;
            if self.expandable {
                write!(
                    f,
                    "try GPUSCOPE_ALLOC_CONF=page_chunk_threshold:0 (every growth in 20 MiB pages, not only those past a quarter of the device, so that memory freed between live blocks goes back page by page) or roundup_power2_divisions:4 (fewer distinct sizes)"
                )?;
            } else {
                write!(
                    f,
                    "set GPUSCOPE_ALLOC_CONF=expandable_segments:True (or max_split_size_mb)"
                )?;
            }
        }
        write!(f, ". Configuration: {}.", self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(expandable: bool, reserved: usize, allocated: usize) -> String {
        OutOfMemory {
            device: "test:0".into(),
            requested: 8 << 30,
            rounded: 8 << 30,
            pool: Pool::Large,
            stream: StreamId::DEFAULT,
            total_capacity: 80 << 30,
            device_free: 6 << 30,
            allocated,
            reserved,
            largest_free_block: 4 << 30,
            cause: OomCause::Device,
            largest_live: Vec::new(),
            config: "expandable_segments:True".into(),
            expandable,
        }
        .to_string()
    }

    /// Where much of the reserved memory is free but could not go back, the report
    /// names the setting for it: smaller chunks with virtual memory, virtual memory
    /// without it; otherwise no such hint.
    #[test]
    fn fragmentation_gets_the_setting_that_addresses_it() {
        let gib = 1usize << 30;
        let vm = report(true, 74 * gib, 68 * gib);
        assert!(vm.contains("6.00 GiB is held free in pieces"), "{vm}");
        assert!(vm.contains("page_chunk_threshold:0"), "{vm}");
        let plain = report(false, 74 * gib, 68 * gib);
        assert!(plain.contains("expandable_segments:True"), "{plain}");
        // 1 GiB held free and 6 on the device: not enough for 8 GiB in any layout.
        let tight = report(true, 74 * gib, 73 * gib);
        assert!(!tight.contains("fragmentation"), "{tight}");
    }
}
