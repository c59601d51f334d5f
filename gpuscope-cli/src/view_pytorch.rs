//! PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot`): a Python pickle of
//! the dict `torch.cuda.memory._snapshot()` returns. Decoded by `view_unpickle` (data
//! only: it never runs code), then turned into gpuscope's
//! [`MemorySnapshot`] per device (for `gpuscope view`: each device the snapshot has,
//! `cuda:N`, separately) or into a [`Trace`] of the allocations and frees of one device
//! (for `gpuscope replay`).
//!
//! The structure, as `_memory_snapshot_pickled` (torch/csrc/cuda/memory_snapshot.cpp)
//! builds it: `segments` (each with `device`, `address`, `total_size`, `stream`,
//! `segment_type`, `blocks` of `address`, `size`, `requested_size`, `state`, `frames`)
//! and `device_traces` (one list per device of `action`, `addr`, `size`, `stream`,
//! `frames`, `time_us`). Fields this version does not know (newer PyTorch versions add
//! some) are ignored and named in a note; a field it needs that is missing or of the
//! wrong type is an error naming where.

use std::collections::{BTreeSet, HashMap};

use crate::view_pickle::{Dict, Malformed, as_list};
use crate::view_unpickle::{Value, unpickle};
use gpuscope_runtime::memory::{
    BlockSnapshot, BlockState, History, HistoryAction, HistoryEvent, MemorySnapshot,
    SNAPSHOT_FORMAT, SegmentSnapshot,
};
use gpuscope_runtime::trace::{Trace, TraceOp};

/// A decoded PyTorch snapshot, its devices, and the device chosen in it.
pub struct PytorchSnapshot {
    root: Value,
    /// The device chosen: the one asked for, else the busiest (what `gpuscope replay`
    /// replays).
    pub device: u64,
    /// Every device with segments or trace entries, in ascending order (empty when the
    /// snapshot has neither).
    pub devices: Vec<u64>,
    /// What the reader wants the user to know (ignored fields, ...).
    pub notes: Vec<String>,
}

// PyTorch 2.11 adds `external_annotations` at the top and `compile_context`,
// `user_metadata` to trace entries (not used here, so not named as unknown).
const TOP_KEYS: &[&str] = &[
    "segments",
    "device_traces",
    "allocator_settings",
    "external_annotations",
];
const SEGMENT_KEYS: &[&str] = &[
    "device",
    "address",
    "total_size",
    "allocated_size",
    "active_size",
    "requested_size",
    "stream",
    "segment_type",
    "segment_pool_id",
    "is_expandable",
    "frames",
    "blocks",
];
const BLOCK_KEYS: &[&str] = &["address", "size", "requested_size", "state", "frames"];
const EVENT_KEYS: &[&str] = &[
    "action",
    "addr",
    "size",
    "stream",
    "frames",
    "time_us",
    "device_free",
    "compile_context",
    "user_metadata",
];
const FRAME_KEYS: &[&str] = &["filename", "line", "name"];

/// Decodes a snapshot's bytes: a pickle, or the same dict written as JSON
/// (`json.dump(torch.cuda.memory._snapshot(), f)`); errors say what is wrong (the caller
/// adds the file).
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    if is_json(bytes) {
        let json: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not readable JSON: {e}"))?;
        return Ok(from_json(json));
    }
    unpickle(bytes).map_err(|e| format!("not a readable pickle: {e}"))
}

/// Whether `bytes` are JSON text (an object or an array after optional whitespace and
/// byte order mark) rather than a pickle.
fn is_json(bytes: &[u8]) -> bool {
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    matches!(
        text.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    )
}

/// A JSON value as the unpickler would have decoded the same Python object.
fn from_json(v: serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::None,
        J::Bool(b) => Value::Bool(b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i.into()),
            (_, Some(u)) => Value::Int(u.into()),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::Str(s.into()),
        J::Array(items) => Value::List(items.into_iter().map(from_json).collect()),
        J::Object(map) => Value::Dict(
            map.into_iter()
                .map(|(k, v)| (Value::Str(k.into()), from_json(v)))
                .collect(),
        ),
    }
}

impl PytorchSnapshot {
    /// Checks that `root` is a memory snapshot and picks the device to show: `device`,
    /// or the one with the most segments and events.
    pub fn new(root: Value, device: Option<u64>) -> Result<PytorchSnapshot, String> {
        let top = match Dict::new(&root, String::new()) {
            Ok(d) if d.get("segments").is_some() || d.get("device_traces").is_some() => d,
            Ok(_) => {
                return Err("not a PyTorch memory snapshot: the dict has neither `segments` nor `device_traces` (expected the output of torch.cuda.memory._dump_snapshot)".into());
            }
            Err(_) => {
                let old = if matches!(root, Value::List(_)) {
                    " (torch.cuda.memory_snapshot() returns this list of segments alone, without the history of allocations: dump torch.cuda.memory._snapshot(), or call torch.cuda.memory._dump_snapshot(), after torch.cuda.memory._record_memory_history())"
                } else {
                    ""
                };
                return Err(format!(
                    "not a PyTorch memory snapshot: it holds {}; expected a dict with `segments` and `device_traces` (the output of torch.cuda.memory._dump_snapshot){old}",
                    crate::view_pickle::type_name(&root)
                ));
            }
        };
        let notes = Vec::new();
        let mut unknown = BTreeSet::new();
        top.note_unknown("snapshot", TOP_KEYS, &mut unknown);
        // Count what each device has.
        let mut weight: HashMap<u64, usize> = HashMap::new();
        let (segments, spath) = top.list("segments").map_err(|e| e.to_string())?;
        for (i, s) in segments.iter().enumerate() {
            let seg = Dict::new(s, format!("{spath}[{i}]")).map_err(|e| e.to_string())?;
            let d = seg
                .opt_u64("device")
                .map_err(|e| e.to_string())?
                .unwrap_or(0);
            *weight.entry(d).or_default() += 1;
        }
        let (traces, tpath) = top.list("device_traces").map_err(|e| e.to_string())?;
        for (d, t) in traces.iter().enumerate() {
            let events = as_list(t, &format!("{tpath}[{d}]")).map_err(|e| e.to_string())?;
            if !events.is_empty() {
                *weight.entry(d as u64).or_default() += events.len();
            }
        }
        let mut present: Vec<u64> = weight.keys().copied().collect();
        present.sort_unstable();
        let device = match device {
            Some(d) if weight.contains_key(&d) || present.is_empty() => d,
            Some(d) => {
                return Err(format!(
                    "device {d} has no segments or events in this snapshot; it has device(s) {}",
                    list(&present)
                ));
            }
            None => present
                .iter()
                .copied()
                .max_by_key(|d| (weight[d], std::cmp::Reverse(*d)))
                .unwrap_or(0),
        };
        let snap = PytorchSnapshot {
            root,
            device,
            devices: present,
            notes,
        };
        // Walk once for the unknown fields of segments, blocks, events and frames.
        snap.walk_unknown(&mut unknown).map_err(|e| e.to_string())?;
        if !unknown.is_empty() {
            let names: Vec<String> = unknown.into_iter().collect();
            let mut note = format!(
                "ignored field(s) this version of gpuscope does not know (a newer PyTorch?): {}",
                names
                    .iter()
                    .take(12)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if names.len() > 12 {
                note.push_str(&format!(" and {} more", names.len() - 12));
            }
            let mut notes = snap.notes;
            notes.push(note);
            return Ok(PytorchSnapshot { notes, ..snap });
        }
        Ok(snap)
    }

    fn top(&self) -> Dict<'_> {
        Dict::new(&self.root, String::new()).expect("checked in new")
    }

    fn walk_unknown(&self, unknown: &mut BTreeSet<String>) -> Result<(), Malformed> {
        let top = self.top();
        let (segments, spath) = top.list("segments")?;
        for (i, s) in segments.iter().enumerate() {
            let seg = Dict::new(s, format!("{spath}[{i}]"))?;
            seg.note_unknown("segment", SEGMENT_KEYS, unknown);
            let (blocks, bpath) = seg.list("blocks")?;
            for (j, b) in blocks.iter().enumerate() {
                let block = Dict::new(b, format!("{bpath}[{j}]"))?;
                block.note_unknown("block", BLOCK_KEYS, unknown);
                frames_unknown(&block, unknown)?;
            }
        }
        let (traces, _) = top.list("device_traces")?;
        for d in 0..traces.len() {
            for (_, e) in self.events(d as u64)? {
                e.note_unknown("event", EVENT_KEYS, unknown);
                frames_unknown(&e, unknown)?;
            }
        }
        Ok(())
    }

    /// `device`'s trace entries, with their paths.
    fn events(&self, device: u64) -> Result<Vec<(usize, Dict<'_>)>, Malformed> {
        let top = self.top();
        let (traces, tpath) = top.list("device_traces")?;
        let Some(trace) = usize::try_from(device).ok().and_then(|d| traces.get(d)) else {
            return Ok(Vec::new());
        };
        let path = format!("{tpath}[{device}]");
        as_list(trace, &path)?
            .iter()
            .enumerate()
            .map(|(i, e)| Ok((i, Dict::new(e, format!("{path}[{i}]"))?)))
            .collect()
    }

    /// The memory of each of `devices` as a gpuscope snapshot (`cuda:N (PyTorch
    /// snapshot)`) with its history, in the order given; the segments are read once.
    pub fn to_snapshots(&self, devices: &[u64]) -> Result<Vec<MemorySnapshot>, Malformed> {
        let top = self.top();
        let mut by_device: HashMap<u64, Vec<SegmentSnapshot>> =
            devices.iter().map(|d| (*d, Vec::new())).collect();
        let (list, spath) = top.list("segments")?;
        for (i, s) in list.iter().enumerate() {
            let seg = Dict::new(s, format!("{spath}[{i}]"))?;
            let d = seg.opt_u64("device")?.unwrap_or(0);
            if let Some(segments) = by_device.get_mut(&d) {
                segments.push(segment(&seg)?);
            }
        }
        let mut snaps = Vec::with_capacity(devices.len());
        for &device in devices {
            let mut segments = by_device.remove(&device).unwrap_or_default();
            segments.sort_by_key(|s: &SegmentSnapshot| s.addr);
            let allocated = segments.iter().map(|s| s.allocated()).sum();
            let reserved = segments.iter().map(|s| s.size).sum();
            let history = self.history(device, &segments)?;
            snaps.push(MemorySnapshot {
                format: SNAPSHOT_FORMAT.to_string(),
                device: format!("cuda:{device} (PyTorch snapshot)"),
                allocated,
                reserved,
                segments,
                unplaced: Vec::new(),
                history,
            });
        }
        Ok(snaps)
    }

    fn history(
        &self,
        device: u64,
        segments: &[SegmentSnapshot],
    ) -> Result<Option<History>, Malformed> {
        let entries = self.events(device)?;
        if entries.is_empty() {
            return Ok(None);
        }
        let mut sites: Vec<String> = Vec::new();
        let mut site_index: HashMap<String, u32> = HashMap::new();
        let mut events = Vec::with_capacity(entries.len());
        let mut t0: Option<i128> = None;
        let (mut net_alloc, mut net_reserved) = (0i128, 0i128);
        for (i, e) in &entries {
            let action = e.str("action")?;
            let action = match action {
                "alloc" => HistoryAction::Alloc,
                "free_completed" => HistoryAction::Free,
                "segment_alloc" | "segment_map" => HistoryAction::SegmentAlloc,
                "segment_free" | "segment_unmap" => HistoryAction::SegmentFree,
                // The memory stays in use until the free completes.
                // `oom`, `snapshot`, and actions of newer versions: see `skipped_actions`.
                _ => continue,
            };
            let size = e.u64("size")?;
            let addr = e.opt_u64("addr")?.unwrap_or(0);
            let time_ns = match e.int("time_us")? {
                Some(us) => {
                    let base = *t0.get_or_insert(us);
                    ((us - base).max(0) as u64).saturating_mul(1000)
                }
                None => *i as u64 * 1000,
            };
            let site = if action == HistoryAction::Alloc {
                site_of(e)?.map(|s| {
                    *site_index.entry(s.clone()).or_insert_with(|| {
                        sites.push(s);
                        (sites.len() - 1) as u32
                    })
                })
            } else {
                None
            };
            match action {
                HistoryAction::Alloc => net_alloc += size as i128,
                HistoryAction::Free => net_alloc -= size as i128,
                HistoryAction::SegmentAlloc => net_reserved += size as i128,
                HistoryAction::SegmentFree => net_reserved -= size as i128,
            }
            events.push(HistoryEvent {
                time_ns,
                action,
                addr,
                size,
                stream: stream(e)?,
                site,
            });
        }
        // PyTorch keeps the last `max_entries` events: what happened before them is the
        // difference between the snapshot's memory and the events' net change.
        let end_alloc: u64 = segments
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state != BlockState::Free)
            .map(|b| if b.requested > 0 { b.requested } else { b.size })
            .sum();
        let end_reserved: u64 = segments.iter().map(|s| s.size).sum();
        Ok(Some(History {
            max_entries: entries.len() as u64,
            dropped: 0,
            base_allocated: (end_alloc as i128 - net_alloc).max(0) as u64,
            base_reserved: (end_reserved as i128 - net_reserved).max(0) as u64,
            sites,
            events,
        }))
    }

    /// Actions of `devices`' traces that are not shown (`oom`, `snapshot`, unknown
    /// ones), with their counts (summed over the devices).
    pub fn skipped_actions(&self, devices: &[u64]) -> Result<Vec<(String, usize)>, Malformed> {
        let mut skipped: HashMap<String, usize> = HashMap::new();
        for (_, e) in devices
            .iter()
            .map(|d| self.events(*d))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
        {
            let a = e.str("action")?;
            if !matches!(
                a,
                "alloc"
                    | "free_requested"
                    | "free_completed"
                    | "segment_alloc"
                    | "segment_map"
                    | "segment_free"
                    | "segment_unmap"
            ) {
                *skipped.entry(a.to_string()).or_default() += 1;
            }
        }
        let mut v: Vec<(String, usize)> = skipped.into_iter().collect();
        v.sort();
        Ok(v)
    }

    /// The chosen device's allocations and frees (`alloc` and `free_requested`, when the
    /// program gave the memory back) as a trace for `gpuscope replay`. Streams are
    /// numbered in order of appearance (the default stream stays 0).
    ///
    /// A `free_requested` that the block's `free_completed` does not follow at once was
    /// deferred by PyTorch for the events of other streams (`Tensor.record_stream`):
    /// it becomes record_stream operations before the free, on the default stream for a
    /// block of another stream, else on every other stream the trace uses (the
    /// snapshot does not say which streams used the block). The last event of a trace
    /// cannot tell and is taken as immediate. `bench/record_traces/record.py` converts
    /// histories to CSV traces by the same rule. Also returns how many frees were
    /// deferred so.
    pub fn to_trace(&self) -> Result<(Trace, usize), Malformed> {
        let events = self.events(self.device)?;
        let mut streams: HashMap<u64, u32> = HashMap::from([(0, 0)]);
        for (_, e) in &events {
            if e.str("action")? == "alloc" {
                let n = streams.len() as u32;
                streams.entry(stream(e)?).or_insert(n);
            }
        }
        let others: Vec<u32> = (1..streams.len() as u32).collect();
        let mut ops = Vec::new();
        let mut live: HashMap<u64, (u64, u32, String)> = HashMap::new();
        let mut next_id = 0u64;
        let mut deferred_frees = 0;
        for (k, (_, e)) in events.iter().enumerate() {
            match e.str("action")? {
                "alloc" => {
                    let addr = e.u64("addr")?;
                    let size = e.u64("size")? as usize;
                    let stream = streams[&stream(e)?];
                    if let Some((_, _, first)) =
                        live.insert(addr, (next_id, stream, e.path.clone()))
                    {
                        return Err(Malformed {
                            path: e.path.clone(),
                            message: format!(
                                "alloc at {addr:#x}, which is already allocated (by `{first}`) and was not freed"
                            ),
                        });
                    }
                    ops.push(TraceOp::Alloc {
                        id: next_id,
                        size,
                        stream,
                    });
                    next_id += 1;
                }
                "free_requested" => {
                    let addr = e.u64("addr")?;
                    // A free of memory allocated before the trace began: not in it.
                    let Some((id, own, _)) = live.remove(&addr) else {
                        continue;
                    };
                    let deferred = match events.get(k + 1) {
                        None => false,
                        Some((_, next)) => {
                            next.str("action")? != "free_completed" || next.u64("addr")? != addr
                        }
                    };
                    if deferred {
                        deferred_frees += 1;
                        let users = if own != 0 { &[0][..] } else { &others[..] };
                        ops.extend(
                            users
                                .iter()
                                .map(|&stream| TraceOp::RecordStream { id, stream }),
                        );
                    }
                    ops.push(TraceOp::Free { id });
                }
                _ => {}
            }
        }
        Ok((Trace::from_ops(ops), deferred_frees))
    }
}

/// `0, 1, 3`.
pub fn list(devices: &[u64]) -> String {
    devices
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn stream(d: &Dict<'_>) -> Result<u64, Malformed> {
    Ok(d.int("stream")?.map_or(0, |s| s as u64))
}

fn frames_unknown(d: &Dict<'_>, unknown: &mut BTreeSet<String>) -> Result<(), Malformed> {
    let (frames, fpath) = d.list("frames")?;
    for (k, f) in frames.iter().enumerate() {
        Dict::new(f, format!("{fpath}[{k}]"))?.note_unknown("frame", FRAME_KEYS, unknown);
    }
    Ok(())
}

fn segment(seg: &Dict<'_>) -> Result<SegmentSnapshot, Malformed> {
    let addr = seg.u64("address")?;
    let size = seg.u64("total_size")?;
    let (blocks, bpath) = seg.list("blocks")?;
    let mut at = addr;
    let mut out = Vec::with_capacity(blocks.len());
    for (j, b) in blocks.iter().enumerate() {
        let block = Dict::new(b, format!("{bpath}[{j}]"))?;
        let bsize = block.u64("size")?;
        let state = match block.str("state")? {
            "active_allocated" => BlockState::Allocated,
            "active_pending_free" => BlockState::PendingFree,
            "inactive" => BlockState::Free,
            other => {
                return Err(Malformed {
                    path: format!("{}.state", block.path),
                    message: format!(
                        "unknown block state `{other}`: expected active_allocated, active_pending_free or inactive"
                    ),
                });
            }
        };
        let baddr = block.opt_u64("address")?.unwrap_or(at);
        at = baddr + bsize;
        let requested = if state == BlockState::Free {
            0
        } else {
            block.opt_u64("requested_size")?.unwrap_or(bsize)
        };
        out.push(BlockSnapshot {
            addr: baddr,
            size: bsize,
            requested,
            state,
            site: if state == BlockState::Free {
                None
            } else {
                site_of(&block)?
            },
            tensor: None,
        });
    }
    Ok(SegmentSnapshot {
        addr,
        size,
        stream: stream(seg)?,
        pool: match seg.get("segment_type") {
            Some(Value::Str(s)) => s.to_string(),
            _ => "unknown".to_string(),
        },
        blocks: out,
    })
}

/// Where an allocation was made: the innermost Python frame outside PyTorch's own
/// package (`/home/user/train.py:41 (forward)`), else the innermost frame.
fn site_of(d: &Dict<'_>) -> Result<Option<String>, Malformed> {
    let (frames, fpath) = d.list("frames")?;
    let mut first = None;
    for (k, f) in frames.iter().enumerate() {
        let frame = Dict::new(f, format!("{fpath}[{k}]"))?;
        let file = frame.str("filename")?;
        let line = frame.u64("line")?;
        let name = frame.get("name").and_then(|v| match v {
            Value::Str(s) => Some(&**s),
            _ => None,
        });
        let text = match name {
            Some(n) if file == "??" || file.is_empty() => n.to_string(),
            Some(n) => format!("{file}:{line} ({n})"),
            None => format!("{file}:{line}"),
        };
        let internal =
            file.is_empty() || file == "??" || file.starts_with('<') || file.contains("/torch/");
        if !internal {
            return Ok(Some(text));
        }
        first.get_or_insert(text);
    }
    Ok(first)
}
