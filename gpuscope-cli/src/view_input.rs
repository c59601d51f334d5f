//! What `gpuscope view` (and `gpuscope replay`, for pickles) read: a gpuscope snapshot
//! (JSON), an allocation trace (CSV `op,id,size,stream`) or a PyTorch snapshot
//! (pickle), told apart by their first bytes, each turned into a [`MemorySnapshot`] per
//! device (a gpuscope file of several devices and a PyTorch snapshot of several GPUs
//! give one each).
//! Every error names the file and what is wrong; a file larger than the limit is
//! refused before it is read.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use gpuscope_runtime::Device;
use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::StreamId;
use gpuscope_runtime::backend::test::TestBackend;
use gpuscope_runtime::format_bytes;
use gpuscope_runtime::memory::{self, MemorySnapshot};
use gpuscope_runtime::trace::{Trace, TraceError, TraceOp, is_header};

use crate::compressed::{CompressedError, decompress};
use crate::view_pytorch::{self, PytorchSnapshot};

/// Files larger than this many MiB are refused unless the limit is raised.
pub const DEFAULT_MAX_INPUT_MIB: u64 = 512;
/// The environment variable that raises (or lowers) the limit for `gpuscope replay`.
pub const MAX_INPUT_VAR: &str = "GPUSCOPE_MAX_INPUT_MIB";

/// Why an input could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The input is not something `gpuscope view` reads, or is malformed.
    #[error("{file}: {message}")]
    Input {
        /// The file.
        file: String,
        /// What is wrong, and what to do.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What kind of file an input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputKind {
    /// A gpuscope snapshot (JSON, `gpuscope_runtime::memory::write_json`).
    Gpuscope,
    /// An allocation trace (CSV `op,id,size,stream`).
    Trace,
    /// A PyTorch snapshot (pickle, `torch.cuda.memory._dump_snapshot`).
    Pytorch,
}

/// How to read an input.
pub struct LoadOptions {
    /// Its kind (`None`: from its first bytes).
    pub kind: Option<InputKind>,
    /// The largest file read, in MiB.
    pub max_input_mib: u64,
    /// The device of a PyTorch snapshot to show (`None`: every device it has).
    pub device: Option<u64>,
}

/// A loaded input: a snapshot per device (at least one), and notes for the user.
pub struct Loaded {
    pub snapshots: Vec<MemorySnapshot>,
    pub kind: InputKind,
    pub notes: Vec<String>,
}

/// Whether `path` is `-`, which names standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How an input is named in messages: its path, or `<stdin>` for `-`.
pub fn shown(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

fn input_err(path: &Path, message: impl Into<String>) -> ViewError {
    ViewError::Input {
        file: shown(path),
        message: message.into(),
    }
}

/// How the user raises the input size limit: `gpuscope view`'s option or `gpuscope
/// replay`'s environment variable, as the text to show for `n` MiB.
pub type RaiseLimit = fn(u64) -> String;

/// `gpuscope view`'s way: `--max-input-mib N`.
pub fn raise_with_option(mib: u64) -> String {
    format!("--max-input-mib {mib}")
}

/// `gpuscope replay`'s way: `GPUSCOPE_MAX_INPUT_MIB=N`.
pub fn raise_with_variable(mib: u64) -> String {
    format!("{MAX_INPUT_VAR}={mib}")
}

/// Reads `path` (`-`: standard input), refusing files larger than `max_mib` MiB before
/// reading them, and decompresses it if it is gzip-compressed (to at most `max_mib`
/// MiB; other compressed formats are named with the command that decompresses them).
pub fn read_bytes(path: &Path, max_mib: u64, raise: RaiseLimit) -> Result<Vec<u8>, ViewError> {
    let io = |source| ViewError::Io {
        file: shown(path),
        source,
    };
    let max = max_mib.saturating_mul(1 << 20);
    if is_stdin(path) {
        // Read up to one byte past the limit, which tells a larger input.
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > max {
            return Err(input_err(
                path,
                format!(
                    "more than the {} this command reads; if it really is a snapshot or trace, raise the limit with {}",
                    format_bytes(max as usize),
                    raise(max_mib.saturating_mul(4).max(1))
                ),
            ));
        }
        return decompressed(path, bytes, max_mib, raise);
    }
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(input_err(
            path,
            "is a directory; expected a snapshot or trace file",
        ));
    }
    if meta.len() > max {
        return Err(input_err(
            path,
            format!(
                "the file is {} ({} bytes), more than the {} this command reads by default; if it really is a snapshot or trace, raise the limit with {} (reading a snapshot takes several times its size in memory)",
                format_bytes(meta.len() as usize),
                meta.len(),
                format_bytes(max as usize),
                raise(meta.len().div_ceil(1 << 20))
            ),
        ));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    decompressed(path, bytes, max_mib, raise)
}

/// `bytes` of `path` decompressed if gzip-compressed (see [`read_bytes`]).
fn decompressed(
    path: &Path,
    bytes: Vec<u8>,
    max_mib: u64,
    raise: RaiseLimit,
) -> Result<Vec<u8>, ViewError> {
    decompress(bytes, max_mib.saturating_mul(1 << 20)).map_err(|e| match e {
        CompressedError::TooLarge { .. } => input_err(
            path,
            format!(
                "{e}: if it really is a snapshot or trace, raise the limit with {}",
                raise(max_mib.saturating_mul(4).max(1))
            ),
        ),
        other => input_err(path, other.to_string()),
    })
}

/// The keys a PyTorch snapshot dict starts with when written as JSON (`segments` first
/// in every PyTorch 2 release; the others in case a tool reorders them).
const PYTORCH_FIRST_KEYS: [&[u8]; 3] = [
    b"\"segments\"",
    b"\"device_traces\"",
    b"\"allocator_settings\"",
];

/// The kind of input `bytes` are, from their first bytes.
pub fn detect(bytes: &[u8]) -> Option<InputKind> {
    // Pickle protocols 2 and up start with PROTO (0x80); a dict or list pickled with
    // protocol 0 starts with MARK and DICT or LIST (`(dp`, `(lp`), with protocol 1 with
    // EMPTY_DICT or EMPTY_LIST and then BINPUT or MARK (`}q`, `}(`, `]q`, `](`).
    if bytes.first() == Some(&0x80)
        || [b"(dp", b"(lp"].iter().any(|p| bytes.starts_with(*p))
        || [b"}q", b"}(", b"]q", b"]("]
            .iter()
            .any(|p| bytes.starts_with(*p))
    {
        return Some(InputKind::Pytorch);
    }
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let start = text.iter().position(|b| !b.is_ascii_whitespace())?;
    let text = &text[start..];
    if text.starts_with(b"{") {
        // gpuscope's snapshots start with their `format`; PyTorch's snapshot dict,
        // written as JSON, with one of its own keys.
        let head = &text[1..text.len().min(200)];
        let first_key = head
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .map(|i| &head[i..]);
        match first_key {
            Some(k) if PYTORCH_FIRST_KEYS.iter().any(|key| k.starts_with(key)) => {
                Some(InputKind::Pytorch)
            }
            _ => Some(InputKind::Gpuscope),
        }
    } else if text.starts_with(b"op,") || names_trace_columns(text) {
        Some(InputKind::Trace)
    } else {
        None
    }
}

/// Whether the first line is a trace's header (as `Trace::parse_str` reads it: the four
/// columns in any order, quoted or not, among others).
fn names_trace_columns(text: &[u8]) -> bool {
    let end = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
    std::str::from_utf8(&text[..end.min(4096)])
        .is_ok_and(|line| is_header(line.strip_suffix('\r').unwrap_or(line)))
}

/// Loads `path` as `options` say.
pub fn load(path: &Path, options: &LoadOptions) -> Result<Loaded, ViewError> {
    let bytes = read_bytes(path, options.max_input_mib, raise_with_option)?;
    if bytes.is_empty() {
        return Err(input_err(path, "the file is empty"));
    }
    let kind = match options.kind.or_else(|| detect(&bytes)) {
        Some(k) => k,
        None => {
            let head: String = String::from_utf8_lossy(&bytes[..bytes.len().min(24)])
                .chars()
                .map(|c| if c.is_control() { '.' } else { c })
                .collect();
            return Err(input_err(
                path,
                format!(
                    "not a gpuscope snapshot (JSON), an allocation trace (CSV with the header `op,id,size,stream`) or a PyTorch snapshot (pickle from torch.cuda.memory._dump_snapshot): it starts with `{head}`"
                ),
            ));
        }
    };
    let mut notes = Vec::new();
    let snapshots = match kind {
        InputKind::Gpuscope => {
            memory::read_json_all(&bytes, &shown(path)).map_err(|e| match e {
                memory::JsonError::Format { message, .. } => {
                    input_err(path, format!("not a gpuscope memory snapshot: {message}"))
                }
                memory::JsonError::Io { file, source } => ViewError::Io { file, source },
            })?
        }
        InputKind::Trace => {
            let text = std::str::from_utf8(&bytes)
                .map_err(|e| input_err(path, format!("not UTF-8 text: {e}")))?;
            let trace = Trace::parse_str(text, &shown(path)).map_err(|e| match e {
                TraceError::Line { line, message, .. } => {
                    input_err(path, format!("line {line}: {message}"))
                }
                TraceError::Io { message, .. } => input_err(path, message),
            })?;
            notes.push("an allocation trace has no creating sites: the chart has one band; gpuscope's allocator (a simulated 80 GiB device with 2 MiB virtual-memory pages) replayed it for reserved memory and segments".into());
            vec![from_trace(&trace).map_err(|m| input_err(path, m))?]
        }
        InputKind::Pytorch => {
            let root = view_pytorch::decode(&bytes).map_err(|m| input_err(path, m))?;
            let snap =
                PytorchSnapshot::new(root, options.device).map_err(|m| input_err(path, m))?;
            notes.extend(snap.notes.iter().cloned());
            // Every device, each shown apart; or the one asked for.
            let shown = match options.device {
                Some(d) => vec![d],
                None if snap.devices.is_empty() => vec![snap.device],
                None => snap.devices.clone(),
            };
            let devices = view_pytorch::list(&snap.devices);
            if snap.devices.len() > 1 {
                notes.push(match options.device {
                    Some(d) => format!("the snapshot has devices {devices}; showing device {d}"),
                    None => format!(
                        "the snapshot has devices {devices}: the page shows each (choose at its top; --device N shows one)"
                    ),
                });
            }
            let invalid = |e: crate::view_pickle::Malformed| {
                input_err(path, format!("not a valid PyTorch memory snapshot: {e}"))
            };
            let skipped = snap.skipped_actions(&shown).map_err(invalid)?;
            if !skipped.is_empty() {
                let list: Vec<String> = skipped.iter().map(|(a, n)| format!("{a} ×{n}")).collect();
                notes.push(format!("trace entries not shown: {}", list.join(", ")));
            }
            snap.to_snapshots(&shown).map_err(invalid)?
        }
    };
    let empty = |s: &MemorySnapshot| {
        s.segments.is_empty() && s.history.as_ref().is_none_or(|h| h.events.is_empty())
    };
    if snapshots.iter().all(empty) {
        return Err(input_err(
            path,
            match kind {
                InputKind::Pytorch => {
                    "nothing to show: the snapshot has no segments and an empty history (record one with torch.cuda.memory._record_memory_history() before the code to look at)"
                }
                InputKind::Gpuscope => {
                    "nothing to show: the snapshot has no segments and an empty history (record one with gpuscope::memory::record_history before the code to look at)"
                }
                InputKind::Trace => "nothing to show: the trace has no operations",
            },
        ));
    }
    Ok(Loaded {
        snapshots,
        kind,
        notes,
    })
}

/// Replays `trace` through gpuscope's allocator on a simulated 80 GiB device with 2 MiB
/// virtual-memory pages (as `gpuscope replay --backend sim`), recording the history,
/// and returns the snapshot at its end.
pub fn from_trace(trace: &Trace) -> Result<MemorySnapshot, String> {
    let backend = TestBackend::builder()
        .capacity(80 << 30)
        .virtual_memory(2 << 20)
        .build();
    let config = AllocConfig::from_env().map_err(|e| e.to_string())?;
    let device = Device::with_backend(Arc::new(backend), config).map_err(|e| e.to_string())?;
    let needed = trace
        .ops()
        .iter()
        .filter_map(|op| match op {
            TraceOp::Alloc { stream, .. } | TraceOp::RecordStream { stream, .. } => {
                Some(*stream as usize + 1)
            }
            TraceOp::Free { .. } => None,
        })
        .max()
        .unwrap_or(1);
    let mut streams = vec![StreamId::DEFAULT];
    while streams.len() < needed {
        streams.push(
            device
                .backend()
                .create_stream()
                .map_err(|e| e.to_string())?,
        );
    }
    memory::record_history(&device, 2 * trace.ops().len() + 1024);
    let mut live = HashMap::new();
    for (i, op) in trace.ops().iter().enumerate() {
        match *op {
            TraceOp::Alloc { id, size, stream } => {
                let buf = device
                    .alloc_on(size, streams[stream as usize])
                    .map_err(|e| format!("operation {} (allocate id {id}): {e}", i + 1))?;
                live.insert(id, buf);
            }
            TraceOp::Free { id } => {
                live.remove(&id);
            }
            TraceOp::RecordStream { id, stream } => {
                if let Some(buf) = live.get(&id) {
                    buf.record_stream(streams[stream as usize]).map_err(|e| {
                        format!("operation {} (record_stream of id {id}): {e}", i + 1)
                    })?;
                }
            }
        }
    }
    let mut snapshot = memory::snapshot(&device);
    // The sites recorded are this function's: a trace has none.
    if let Some(h) = snapshot.history.as_mut() {
        h.sites.clear();
        h.events.iter_mut().for_each(|e| e.site = None);
    }
    snapshot.device = "simulated 80 GiB device (trace replayed by gpuscope's allocator)".into();
    drop(live);
    Ok(snapshot)
}

/// A trace for `gpuscope replay`: a CSV trace, or the allocations and frees of a PyTorch
/// snapshot pickle (its busiest device), with notes for the user (a pickle's ignored
/// fields, its frees that waited for other streams). Files over
/// `GPUSCOPE_MAX_INPUT_MIB` (default 512) MiB are refused.
pub fn read_replay_trace(path: &Path) -> Result<(Trace, Vec<String>), String> {
    let max = std::env::var(MAX_INPUT_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MAX_INPUT_MIB);
    let bytes = read_bytes(path, max, raise_with_variable).map_err(|e| e.to_string())?;
    replay_trace_from_bytes(&bytes, &shown(path))
}

/// [`read_replay_trace`] of a file's (decompressed) bytes; `name` names the file in
/// errors.
pub fn replay_trace_from_bytes(bytes: &[u8], name: &str) -> Result<(Trace, Vec<String>), String> {
    match detect(bytes) {
        Some(InputKind::Pytorch) => {}
        Some(InputKind::Gpuscope) => {
            let what = if bytes.windows(10).take(400).any(|w| w == b"\"workload\"") {
                "the PyTorch figures recorded beside a trace: replay the `.csv` (or `.csv.gz`) of the same name"
            } else {
                "a gpuscope memory snapshot (`gpuscope view` shows it)"
            };
            return Err(format!(
                "{name}: JSON, {what}; `gpuscope replay` takes an allocation trace (CSV `op,id,size,stream`) or a PyTorch memory snapshot (pickle, or the same dict as JSON)"
            ));
        }
        // Parsed from the bytes already read (and within the size limit).
        _ => {
            let trace = Trace::parse_bytes(bytes, name).map_err(|e| e.to_string())?;
            return Ok((trace, Vec::new()));
        }
    }
    let root = view_pytorch::decode(bytes).map_err(|m| format!("{name}: {m}"))?;
    let snap = PytorchSnapshot::new(root, None).map_err(|m| format!("{name}: {m}"))?;
    let (trace, deferred) = snap
        .to_trace()
        .map_err(|e| format!("{name}: not a valid PyTorch memory snapshot: {e}"))?;
    if trace.ops().is_empty() {
        return Err(format!(
            "{name}: the snapshot's trace of device {} has no allocations (record one with torch.cuda.memory._record_memory_history() before the code to replay)",
            snap.device
        ));
    }
    let mut notes = snap.notes.clone();
    if deferred > 0 {
        notes.push(format!(
            "{deferred} frees waited for other streams' work in PyTorch (record_stream): replayed as record_stream on the default stream for blocks of other streams, else on every other stream"
        ));
    }
    Ok((trace, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_apart_by_their_first_bytes() {
        assert_eq!(detect(b"\x80\x04\x95"), Some(InputKind::Pytorch));
        assert_eq!(detect(b"  \n{\"format\""), Some(InputKind::Gpuscope));
        assert_eq!(detect(b"op,id,size,stream\n"), Some(InputKind::Trace));
        assert_eq!(detect(b"\xef\xbb\xbfop,id"), Some(InputKind::Trace));
        assert_eq!(detect(b"PK\x03\x04"), None);
        assert_eq!(detect(b""), None);
        // PyTorch's snapshot dict as JSON, and pickles of protocols 0 and 1.
        assert_eq!(detect(b"{\"segments\": []"), Some(InputKind::Pytorch));
        assert_eq!(detect(b" { \"device_traces\":"), Some(InputKind::Pytorch));
        assert_eq!(detect(b"{\"workload\": \"x\"}"), Some(InputKind::Gpuscope));
        assert_eq!(detect(b"(dp0\nVsegments"), Some(InputKind::Pytorch));
        assert_eq!(detect(b"}q\x00(X\x08"), Some(InputKind::Pytorch));
        // Traces as a spreadsheet or pandas writes them.
        assert_eq!(
            detect(b"\"op\",\"id\",\"size\",\"stream\"\r\n"),
            Some(InputKind::Trace)
        );
        assert_eq!(detect(b",stream,size,id,op,t\n"), Some(InputKind::Trace));
        assert_eq!(detect(b"op_name,id,size\n"), None);
    }

    /// A snapshot written by Python as JSON, or pickled with protocol 0, replays as the
    /// pickle it came from (`make_test_snapshots.py other_encodings` made them).
    #[test]
    fn snapshots_in_json_and_old_pickle_protocols_replay_alike() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/pytorch-snapshots");
        for (original, other) in [
            ("small_train.pickle", "other-encodings/small_train.json"),
            (
                "synthetic_training.pickle",
                "other-encodings/synthetic_training_protocol0.pickle",
            ),
        ] {
            let (want, want_notes) = read_replay_trace(&dir.join(original)).unwrap();
            let (got, got_notes) = read_replay_trace(&dir.join(other)).unwrap();
            assert!(!want.ops().is_empty(), "{original}");
            assert_eq!(got.ops(), want.ops(), "{other}");
            assert_eq!(got_notes, want_notes, "{other}");
        }
    }

    #[test]
    fn json_that_is_not_a_snapshot_says_what_it_is() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/traces");
        let e = read_replay_trace(&dir.join("bert_infer.json")).unwrap_err();
        assert!(
            e.contains("the PyTorch figures recorded beside a trace: replay the `.csv`"),
            "{e}"
        );
    }

    #[test]
    fn a_trace_replays_into_a_history_and_a_snapshot() {
        let t = Trace::parse_str(
            "op,id,size,stream\na,0,4096,0\na,1,3145728,0\nf,0,0,0\n",
            "t",
        )
        .unwrap();
        let s = from_trace(&t).unwrap();
        let h = s.history.as_ref().unwrap();
        let allocs = h
            .events
            .iter()
            .filter(|e| e.action == memory::HistoryAction::Alloc)
            .count();
        assert_eq!(allocs, 2);
        assert!(h.sites.is_empty() && h.events.iter().all(|e| e.site.is_none()));
        assert_eq!(s.allocated, 3 << 20);
        assert!(s.reserved >= 3 << 20);
    }

    /// Real PyTorch 2.11 snapshots from the H100 (`bench/record_traces/record.py
    /// --pickle`), with tensors handed between streams: the frees PyTorch deferred for
    /// other streams' events replay as record_stream operations. The expected counts
    /// are those of `record.py`'s own converter (Python) on the same histories.
    #[test]
    fn deferred_frees_of_real_snapshots_replay_as_record_streams() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/pytorch-snapshots");
        for (file, allocs, frees, records, deferred, streams) in [
            // Two towers on two streams, a loader stream, the default stream.
            ("branch_streams.pickle", 612, 604, 14, 10, 4),
            // A loader stream under expandable segments (segment_map events).
            ("side_stream_expandable.pickle", 307, 304, 6, 6, 2),
        ] {
            let (t, notes) = read_replay_trace(&dir.join(file)).unwrap();
            let said = format!("{deferred} frees waited for other streams");
            assert!(notes.iter().any(|n| n.contains(&said)), "{file}: {notes:?}");
            let count = |f: fn(&TraceOp) -> bool| t.ops().iter().filter(|o| f(o)).count();
            assert_eq!(
                count(|o| matches!(o, TraceOp::Alloc { .. })),
                allocs,
                "{file}"
            );
            assert_eq!(
                count(|o| matches!(o, TraceOp::Free { .. })),
                frees,
                "{file}"
            );
            assert_eq!(
                count(|o| matches!(o, TraceOp::RecordStream { .. })),
                records,
                "{file}"
            );
            let used: std::collections::BTreeSet<u32> = t
                .ops()
                .iter()
                .filter_map(|o| match o {
                    TraceOp::Alloc { stream, .. } => Some(*stream),
                    _ => None,
                })
                .collect();
            assert_eq!(used, (0..streams).collect(), "{file}");
            // Every record_stream comes right before its block's free, on another stream.
            for (i, op) in t.ops().iter().enumerate() {
                if let TraceOp::RecordStream { id, .. } = op {
                    let next = t.ops()[i + 1..]
                        .iter()
                        .find(|o| !matches!(o, TraceOp::RecordStream { .. }));
                    assert!(
                        matches!(next, Some(TraceOp::Free { id: f }) if f == id),
                        "{file}"
                    );
                }
            }
        }
    }
}
