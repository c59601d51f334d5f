//! The record layer: what gpuscope knows about memory, as plain data (sizes, shapes,
//! dtypes, sites, scopes), below both the scopes and the tensors. The scopes fill
//! [`TrackRecord`]s and [`LeakReport`]s, devices fill a [`HistoryRecorder`], and
//! [`memory`](crate::memory) joins the allocator's blocks with the records into a
//! [`MemorySnapshot`]; the leak reports, snapshots and the viewer all read these types.
//!
//! It imports only the leaf modules ([`dtype`](crate::dtype)) and [`format_bytes`](crate::format_bytes):
//! no tensor, scope or device type.
//!
//! Where things live:
//! - [`ScopeSite`] in [`site`];
//! - [`TrackRecord`], a tracked storage as it was at one moment, in [`track`];
//! - [`LeakReport`] and [`LiveTensor`] in [`leak`];
//! - [`HistoryRecorder`] (a device's bounded allocation history) and the exported
//!   [`History`] in [`history`];
//! - [`MemorySnapshot`], its segments, blocks and tensors, in [`snapshot`].
//!
//! With the `serde` feature, [`MemorySnapshot`] and [`History`] (and what they hold)
//! serialise to the JSON format that `gpuscope view` reads (see
//! [`memory`](crate::memory)).

pub mod history;
pub mod leak;
pub mod site;
pub mod snapshot;
pub mod track;

pub use history::{History, HistoryAction, HistoryEvent, HistoryRecorder};
pub use leak::{LeakReport, LiveTensor};
pub use site::ScopeSite;
pub use snapshot::{
    BlockSnapshot, BlockState, MemorySnapshot, SNAPSHOT_FORMAT, ScopeInfo, SegmentSnapshot,
    TensorInfo,
};
pub use track::TrackRecord;
