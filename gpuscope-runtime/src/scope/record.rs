//! What gpuscope remembers about each tracked tensor: where it was made, how big it is,
//! and which scope holds it. [`TrackRecord`] is a copy of it taken at one moment (the
//! live record is a slot that is reused once the tensor is gone; see `slot`).

use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};

use smallvec::SmallVec;

use crate::tensor::DType;

use super::report::ScopeSite;

/// Ownership state of a tracked tensor's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum TrackState {
    /// Owned by the scope it was made in (or moved to).
    Scoped = 0,
    /// Returned from its scope: moves to the parent when the scope exits.
    Escaping = 1,
    /// Adopted by the parent scope through [`keep`](crate::scope::keep).
    Kept = 2,
    /// Reported as leaked by a scope; later scopes do not report it again.
    Leaked = 3,
}

impl TrackState {
    #[inline]
    pub(crate) fn from_u8(v: u8) -> TrackState {
        match v {
            0 => TrackState::Scoped,
            1 => TrackState::Escaping,
            2 => TrackState::Kept,
            _ => TrackState::Leaked,
        }
    }
}

/// Ids are handed out in per-thread blocks, so making a record takes no shared atomic.
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
const ID_BLOCK: u64 = 1 << 16;

thread_local! {
    static IDS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

#[inline]
pub(crate) fn next_id() -> u64 {
    IDS.with(|c| {
        let (mut next, mut end) = c.get();
        if next == end {
            next = NEXT_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed);
            end = next + ID_BLOCK;
        }
        c.set((next + 1, end));
        next
    })
}

/// A tracked tensor storage, as it was when this copy was taken: from
/// [`Tensor::track_record`](crate::Tensor::track_record), a [`LeakReport`](super::LeakReport)
/// or [`report_live`](super::report_live).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackRecord {
    pub(crate) id: u64,
    pub(crate) site: &'static Location<'static>,
    pub(crate) bytes: usize,
    pub(crate) dtype: DType,
    pub(crate) shape: SmallVec<[usize; 4]>,
    pub(crate) device: &'static str,
    pub(crate) owner: Option<ScopeSite>,
    pub(crate) leaked_from: Option<ScopeSite>,
}

impl TrackRecord {
    /// A number unique to this storage in the process (increasing on each thread).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Where the tensor was created (file, line, column).
    pub fn site(&self) -> &'static Location<'static> {
        self.site
    }

    /// Bytes of its storage.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape when created.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The device, as [`Device::description`](crate::Device::description) names it.
    pub fn device(&self) -> &'static str {
        self.device
    }

    /// The open scope that holds it (`None`: outside every scope).
    pub fn owner(&self) -> Option<ScopeSite> {
        self.owner
    }

    /// The scope that reported it leaked, as "`name` at file:line:column".
    pub fn leaked_from(&self) -> Option<String> {
        self.leaked_from.map(|s| s.to_string())
    }

    /// The scope that reported it leaked.
    pub fn leaked_scope(&self) -> Option<ScopeSite> {
        self.leaked_from
    }
}
