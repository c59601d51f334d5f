//! Pictures of device memory: [`snapshot`] (every segment and block, and for the blocks
//! of live tensors their dtype, shape, creating site and scope) and [`snapshot_all`]
//! (one for each device the process has opened), an opt-in, bounded
//! allocation history ([`record_history`], like PyTorch's `_record_memory_history`),
//! the JSON format both are saved in (feature `serde`), and the self-contained HTML
//! page that shows them (feature `viewer`; also what `gpuscope view` writes).
//!
//! ```
//! use gpuscope_runtime::{memory, Device, Tensor, scope::set_tracking};
//! set_tracking(true);
//! let dev = Device::host().unwrap();
//! memory::record_history(&dev, 10_000);
//! let line = line!() + 1;
//! let t = Tensor::zeros(&[256, 256], &dev).unwrap();
//! let snap = memory::snapshot(&dev);
//! let block = snap.blocks().find(|b| b.tensor.as_ref().is_some_and(|i| i.shape == [256, 256])).unwrap();
//! assert!(block.site.as_deref().unwrap().ends_with(&format!(":{line}:9"))); // the line that made it
//! let history = snap.history.as_ref().unwrap();
//! assert!(history.events.iter().any(|e| e.addr == block.addr));
//! # drop(t);
//! ```
//!
//! Where things live: the types are the [record layer](crate::record)'s
//! ([`MemorySnapshot`], [`History`]); `snapshot` joins the allocator's blocks with the
//! tracking records; `json` reads and writes them (feature `serde`); `viewer` makes the
//! page (feature `viewer`); `history_trace` turns a history into an allocation trace
//! that `gpuscope replay` replays.
//!
//! Several devices (a program that trains on two GPUs, or on a GPU and the host):
//!
//! ```
//! use std::sync::Arc;
//! use gpuscope_runtime::{alloc::AllocConfig, backend::host::HostBackend, memory, Device, Tensor};
//! // Two devices of this process (on a machine with GPUs: Device::cuda(0), Device::cuda(1)).
//! let a = Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
//! let b = Device::with_backend(Arc::new(HostBackend::new().with_ordinal(1)), AllocConfig::default()).unwrap();
//! memory::record_history(&b, 10_000); // histories are per device, and optional
//! let (x, y) = (Tensor::zeros(&[64], &a).unwrap(), Tensor::ones(&[8, 8], &b).unwrap());
//! let snaps = memory::snapshot_all(); // every device opened and alive, in opening order
//! let of = |d: &Device| snaps.iter().find(|s| s.device == d.description()).unwrap();
//! assert_eq!(of(&b).device, "host:1 (host)");
//! assert!(of(&a).history.is_none() && of(&b).history.is_some());
//! # #[cfg(feature = "viewer")]
//! assert!(memory::viewer::render_all(&snaps, "two devices").contains(r#"<select id="device">"#)); // a device selector
//! # #[cfg(feature = "serde")]
//! assert_eq!(memory::read_json_all(memory::to_json_all(&snaps).as_bytes(), "inline").unwrap(), snaps);
//! # drop((x, y));
//! ```
//!
//! ## The JSON format (`gpuscope-memory/1`)
//!
//! A file holds one device's snapshot, or several. One device: one object,
//! [`MemorySnapshot`]:
//!
//! ```text
//! { "format": "gpuscope-memory/1", "device": "cuda:0 (NVIDIA H100 80GB HBM3)",
//!   "allocated": 1048576, "reserved": 2097152,
//!   "segments": [ { "addr": 139637976727552, "size": 2097152, "stream": 0, "pool": "large",
//!       "blocks": [ { "addr": 139637976727552, "size": 1048576, "requested": 1048576,
//!                     "state": "allocated",            // or "pending_free", "free"
//!                     "site": "src/train.rs:42:17",    // the line that allocated it
//!                     "tensor": { "id": 7, "dtype": "f32", "shape": [512, 512],
//!                                 "bytes": 1048576,
//!                                 "scope": { "name": "step", "site": "src/train.rs:40:4" },
//!                                 "leaked_from": { ... } } }, ... ] } ],
//!   "history": { "max_entries": 100000, "dropped": 0,
//!                "base_allocated": 0, "base_reserved": 0,   // before the first event kept
//!                "sites": ["src/train.rs:42:17", ...],
//!                "events": [ { "time_ns": 1200, "action": "alloc",  // free, segment_alloc, segment_free
//!                              "addr": 139637976727552, "size": 1048576, "stream": 0,
//!                              "site": 0 }, ... ] } }
//! ```
//!
//! Optional members (`site`, `tensor`, `scope`, `leaked_from`, `history`, an event's
//! `site`) are left out when absent. Sizes are bytes; an allocation event's `size` is
//! the bytes asked for; segment events carry the change of reserved bytes (address 0).
//!
//! Several devices (`to_json_all`, `write_json_all`, feature `serde`): one object
//! with the same `format` and a `devices` array of the snapshots above, each complete
//! (with its own `format`, and its `history` when one was recorded), in the order
//! given (for [`snapshot_all`], the order the devices were opened):
//!
//! ```text
//! { "format": "gpuscope-memory/1",
//!   "devices": [ { "format": "gpuscope-memory/1", "device": "cuda:0 (...)", ... },
//!                { "format": "gpuscope-memory/1", "device": "cuda:1 (...)", ... } ] }
//! ```
//!
//! `read_json_all` reads both forms (one snapshot is a list of one); `read_json`
//! reads the one-device form, and refuses a file of several devices with a message
//! that says so.

mod history_trace;
#[cfg(feature = "serde")]
mod json;
mod snapshot;
#[cfg(feature = "viewer")]
pub mod viewer;

pub use crate::record::{
    BlockSnapshot, BlockState, History, HistoryAction, HistoryEvent, MemorySnapshot,
    SNAPSHOT_FORMAT, ScopeInfo, SegmentSnapshot, TensorInfo,
};
pub use history_trace::history_trace;
#[cfg(feature = "serde")]
pub use json::{
    JsonError, read_json, read_json_all, to_json, to_json_all, write_json, write_json_all,
};
pub use snapshot::{snapshot, snapshot_all};

use crate::device::Device;

/// Starts recording `device`'s allocation history, keeping at most `max_entries`
/// events (the oldest go first); `0` stops recording and drops the history. Starting
/// again drops what was recorded before.
///
/// Each allocation and free becomes an event with its address, size, stream and (for
/// allocations) the line that asked for it, and each change of reserved memory an event
/// of its own. Off (the default), it costs one relaxed atomic load per allocation; on,
/// a lock and a copy of the allocator's statistics per event.
pub fn record_history(device: &Device, max_entries: usize) {
    let stats = device.allocator().stats();
    device.history().start(
        max_entries,
        stats.requested_bytes.all.current.max(0) as u64,
        stats.reserved_bytes.all.current.max(0) as u64,
    );
}

/// A copy of `device`'s allocation history (`None` unless [`record_history`] is on).
pub fn history(device: &Device) -> Option<History> {
    let recorder = device.history();
    if !recorder.is_on() {
        return None;
    }
    // Reserved memory may have changed outside an allocation (`empty_cache`).
    recorder.note_reserved(device.allocator().stats().reserved_bytes.all.current.max(0) as u64);
    recorder.export()
}
