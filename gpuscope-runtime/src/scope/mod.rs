//! Scopes: every tensor made while a scope is open belongs to it; at exit, returned
//! tensors move to the parent scope, kept ones ([`keep`](crate::keep)) too, and any other tensor
//! still alive has leaked and is reported with the site that created it.
//!
//! Where things live:
//! - [`policy`]: whether tracking is on ([`tracking`], `GPUSCOPE_TRACK`) and the default
//!   [`LeakPolicy`] (`GPUSCOPE_LEAKS`).
//! - [`record`]: who owns a tracked storage, and record ids; [`TrackRecord`] itself
//!   (a copy of what is remembered per storage) is the [record layer](crate::record)'s.
//! - `slot`: where the live records are: lock-free slots in chunks that are never
//!   freed, one writer each, read by [`report_live`] through a sequence lock.
//! - `stack`: the per-thread scope stack, [`ScopeGuard`] and [`ScopeOptions`]; a
//!   scope's exit fences the streams its tensors used.
//! - Escaping by return ([`ScopeValue`](crate::ScopeValue), [`ScopeGuard::escape`]) and
//!   [`keep`](crate::keep) live in [`crate::escape`], above both scopes and tensors.
//! - [`report`]: where a [`LeakReport`] goes: the `tracing` events (target
//!   `gpuscope::leak`) when a subscriber is set, else stderr; `stderr`: the rustc-like
//!   text, with the source line, repeats from one site folded; `exit`: the summary of
//!   tracked tensors still alive at process exit ([`live_summary`]).
//! - `future`: [`scoped`](crate::escape::scoped), scopes over `async` code.
//!
//! ## Escape rules
//! 1. Returning a tensor (in any [`ScopeValue`](crate::ScopeValue): tuples, `Option`, `Result`, `Vec`,
//!    your `#[derive(ScopeValue)]` structs) moves it to the caller's scope.
//! 2. [`keep`](crate::keep) adopts a tensor into the parent scope on purpose.
//! 3. Anything else made in the scope and alive at exit has leaked: stored in a static,
//!    pushed into a captured or `&mut` container, caught in an `Rc` cycle, or
//!    `mem::forget`-ten. It is reported once (by the innermost scope it escaped) and
//!    then belongs to the parent, so [`report_live`] still lists it.

mod exit;
mod future;
pub mod policy;
pub mod record;
pub mod report;
mod seqlock;
mod slot;
mod stack;
mod stderr;

pub use exit::live_summary;
pub use future::{ScopeFuture, scope_future};
pub use policy::{
    LeakPolicy, leak_policy, leak_policy_is_explicit, set_leak_policy, set_tracking, tracking,
};
pub use record::TrackRecord;
pub use report::{LeakReport, LiveTensor, ScopeSite};
pub use stack::{ScopeGuard, ScopeOptions, current_scope, scope_depth};

pub(crate) use slot::SlotRef;
pub(crate) use stack::{note_stream, note_untracked, track};

/// Every tracked tensor alive now, on every thread (in creation order on each thread;
/// ids are handed out in per-thread blocks): tensors in open
/// scopes, tensors that outlived every scope (globals, `mem::forget`, model
/// parameters), and leaked ones (with the scope that reported them).
///
/// ```
/// use gpuscope_runtime::scope::{report_live, set_tracking};
/// use gpuscope_runtime::{Device, Tensor};
/// set_tracking(true);
/// let t = Tensor::zeros(&[1024], &Device::host().unwrap()).unwrap();
/// let live = report_live();
/// assert!(live.iter().any(|l| l.record.bytes() == 4096 && l.record.site().file().ends_with(".rs")));
/// # drop(t);
/// ```
pub fn report_live() -> Vec<LiveTensor> {
    slot::live_records()
        .into_iter()
        .map(|record| LiveTensor {
            scope: record.owner().map(|s| s.to_string()),
            record,
        })
        .collect()
}

/// Every live tracking record (what [`report_live`] lists, without the scope names).
pub(crate) fn live_records() -> Vec<TrackRecord> {
    slot::live_records()
}

/// The live tracking records of the device numbered `device_id`, in no order.
pub(crate) fn live_records_on(device_id: u32) -> Vec<TrackRecord> {
    slot::live_records_where(|s| s.device_id() == device_id)
}

/// Logs [`report_live`] through `tracing` (target `gpuscope::leak`, one event per
/// tensor and a total) and returns how many tensors are alive.
pub fn log_live() -> usize {
    let live = report_live();
    for l in &live {
        tracing::warn!(target: "gpuscope::leak", bytes = l.record.bytes() as u64, "live tensor: {l}");
    }
    let bytes: usize = live.iter().map(|l| l.record.bytes()).sum();
    tracing::info!(target: "gpuscope::leak", live = live.len() as u64, bytes = bytes as u64, "{} live tracked tensor(s), {}", live.len(), crate::format_bytes(bytes));
    live.len()
}
