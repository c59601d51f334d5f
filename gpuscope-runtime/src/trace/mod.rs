//! Allocation traces: what an allocator was asked, recorded, and replayed through an
//! allocator.
//!
//! - the format and its parser ([`Trace`], [`TraceOp`]) live in
//!   [`crate::trace_format`], below the allocator (which records traces), and are
//!   re-exported here;
//! - [`replay`]: a trace through a [`CachingAllocator`](crate::alloc::CachingAllocator),
//!   pass by pass, with its figures;
//! - [`drive`]: the allocator driven by an arbitrary operation sequence, checked after
//!   every operation (what property tests and fuzz targets use).

pub mod drive;
pub mod replay;

pub use crate::trace_format::*;
