//! The scopes' side of a tracking record: who owns a tracked storage (`TrackState`)
//! and the record ids. The record itself, as data, is
//! [`TrackRecord`] (re-exported here); the live record is a
//! slot that is reused once the tensor is gone (see `slot`).

use std::sync::atomic::{AtomicU64, Ordering};

pub use crate::record::TrackRecord;

/// Ownership state of a tracked tensor's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum TrackState {
    /// Owned by the scope it was made in (or moved to).
    Scoped = 0,
    /// Returned from its scope: moves to the parent when the scope exits.
    Escaping = 1,
    /// Adopted by the parent scope through [`keep`](crate::keep).
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
