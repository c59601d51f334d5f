//! The allocation trace format: what an allocator was asked, as data (re-exported by
//! [`crate::trace`], which replays traces). It imports nothing else of the crate.
//!
//! The format is CSV with the header `op,id,size,stream`:
//!
//! | line | meaning |
//! |---|---|
//! | `a,ID,SIZE,STREAM` | allocate `SIZE` bytes as `ID` on stream `STREAM` |
//! | `f,ID,0,STREAM` | free `ID` (`STREAM`: its stream; not checked) |
//! | `r,ID,0,STREAM` | `ID` is used on stream `STREAM` too (`record_stream`) |
//!
//! The header names the columns: they may come in any order, quoted, with other
//! columns beside them (ignored); see [`Trace::parse_str`] for what else is read.
//!
//! It is the format of the PyTorch traces the benchmarks replay (`bench/record_traces`
//! makes them from `torch.cuda.memory._snapshot()`). Stream numbers are labels: a replay
//! gives each distinct one a stream of its own, in order of first use.
//!
//! Every malformed or inconsistent line is an error naming the file and the line:
//! gzip-compressed data (which `gpuscope replay` decompresses itself; the library reads
//! text), text that is not UTF-8, a wrong header, a wrong number of fields, a number out of range,
//! an unknown op, an id allocated twice, a free or `record_stream` of an id that is not
//! live, more than [`MAX_STREAMS`] streams.
//!
//! ```
//! use gpuscope_runtime::trace::Trace;
//! let t = Trace::parse_str("op,id,size,stream\na,0,4096,0\nr,0,0,1\nf,0,0,0\n", "inline").unwrap();
//! assert_eq!(t.ops().len(), 3);
//! assert_eq!(t.line_of(2), Some(4));
//! let err = Trace::parse_str("op,id,size,stream\nf,7,0,0\n", "bad.csv").unwrap_err();
//! assert_eq!(err.to_string(), "bad.csv:2: free of id 7, which is not allocated (never allocated, or freed already)");
//! let err = Trace::parse_bytes(b"op,id,size,stream\na,1,\xff\xfe,0\n", "bin.csv").unwrap_err();
//! assert!(err.to_string().starts_with("bin.csv:2: not UTF-8 text"));
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

mod parse;

pub use parse::is_header;

/// One operation of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOp {
    /// Allocate `size` bytes as `id` on `stream`.
    Alloc {
        /// The allocation's id.
        id: u64,
        /// Bytes requested.
        size: usize,
        /// The stream number.
        stream: u32,
    },
    /// Free `id`.
    Free {
        /// The allocation's id.
        id: u64,
    },
    /// `id` is used on `stream` too (PyTorch's `Tensor.record_stream`).
    RecordStream {
        /// The allocation's id.
        id: u64,
        /// The stream number.
        stream: u32,
    },
}

/// A malformed or inconsistent trace: the file, the line (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// A line that is not a valid operation, or an inconsistent one.
    #[error("{file}:{line}: {message}")]
    Line {
        /// The trace's path or name.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file could not be read or written.
    #[error("{file}: {message}")]
    Io {
        /// The trace's path.
        file: String,
        /// The I/O error.
        message: String,
    },
}

/// Most distinct stream numbers a trace may use: a replay creates a stream for each.
pub const MAX_STREAMS: usize = 1 << 16;

/// A validated allocation trace: every free and `record_stream` names a live
/// allocation, and no id is allocated twice while live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    ops: Vec<TraceOp>,
    /// The source line of each op (empty for traces built from ops).
    lines: Vec<u32>,
}

const HEADER: &str = "op,id,size,stream";

impl Trace {
    /// A trace from operations recorded by an allocator (already consistent).
    pub fn from_ops(ops: Vec<TraceOp>) -> Trace {
        Trace {
            ops,
            lines: Vec::new(),
        }
    }

    /// The operations in order.
    pub fn ops(&self) -> &[TraceOp] {
        &self.ops
    }

    /// The line of the file that op `index` came from (1-based), when parsed from text.
    pub fn line_of(&self, index: usize) -> Option<usize> {
        self.lines.get(index).map(|&l| l as usize)
    }

    /// Number of allocations.
    pub fn allocations(&self) -> usize {
        self.ops
            .iter()
            .filter(|o| matches!(o, TraceOp::Alloc { .. }))
            .count()
    }

    /// The distinct stream numbers the trace uses, in order of first use.
    pub fn streams(&self) -> Vec<u32> {
        let mut seen = HashMap::new();
        let mut out = Vec::new();
        for op in &self.ops {
            if let TraceOp::Alloc { stream, .. } | TraceOp::RecordStream { stream, .. } = *op {
                if seen.insert(stream, ()).is_none() {
                    out.push(stream);
                }
            }
        }
        out
    }

    /// Reads and validates a trace file.
    pub fn read(path: &Path) -> Result<Trace, TraceError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| TraceError::Io {
            file: name.clone(),
            message: e.to_string(),
        })?;
        Self::parse_bytes(&bytes, &name)
    }

    /// Parses and validates trace bytes (which must be UTF-8 text); `name` is used in
    /// errors.
    pub fn parse_bytes(bytes: &[u8], name: &str) -> Result<Trace, TraceError> {
        if bytes.starts_with(&[0x1f, 0x8b]) {
            return Err(TraceError::Line {
                file: name.to_string(),
                line: 1,
                message: format!(
                    "gzip-compressed data, not CSV text `{HEADER}`: decompress it first \
                     (`gzip -dc`), or replay it with `gpuscope replay`, which reads \
                     `.csv.gz` files as they are"
                ),
            });
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Self::parse_str(text, name),
            Err(e) => {
                let line = bytes[..e.valid_up_to()]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1;
                Err(TraceError::Line {
                    file: name.to_string(),
                    line,
                    message: format!(
                        "not UTF-8 text (byte {:#04x} at offset {}): a trace is CSV text `{HEADER}`; is this a binary file?",
                        bytes[e.valid_up_to()],
                        e.valid_up_to()
                    ),
                })
            }
        }
    }

    /// Parses and validates trace text; `name` is used in errors. The header names the
    /// columns (`op,id,size,stream` in any order, quoted or not; other columns are
    /// ignored); a UTF-8 byte order mark before it is skipped; the size of a free or a
    /// `record_stream` may be left empty.
    pub fn parse_str(text: &str, name: &str) -> Result<Trace, TraceError> {
        let (ops, lines) = parse::parse(text, name)?;
        Ok(Trace { ops, lines })
    }

    /// The trace as CSV text.
    pub fn to_csv(&self) -> String {
        let mut out = String::with_capacity(self.ops.len() * 24);
        out.push_str(HEADER);
        out.push('\n');
        let mut streams: HashMap<u64, u32> = HashMap::new();
        for op in &self.ops {
            match *op {
                TraceOp::Alloc { id, size, stream } => {
                    streams.insert(id, stream);
                    let _ = writeln!(out, "a,{id},{size},{stream}");
                }
                TraceOp::Free { id } => {
                    let stream = streams.remove(&id).unwrap_or(0);
                    let _ = writeln!(out, "f,{id},0,{stream}");
                }
                TraceOp::RecordStream { id, stream } => {
                    let _ = writeln!(out, "r,{id},0,{stream}");
                }
            }
        }
        out
    }

    /// Writes the trace as CSV.
    pub fn write(&self, path: &Path) -> Result<(), TraceError> {
        std::fs::write(path, self.to_csv()).map_err(|e| TraceError::Io {
            file: path.display().to_string(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_err(text: &str) -> (usize, String) {
        match Trace::parse_str(text, "t.csv").unwrap_err() {
            TraceError::Line { line, message, .. } => (line, message),
            e => panic!("unexpected {e}"),
        }
    }

    #[test]
    fn gzip_data_is_named_as_such() {
        let gz = [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff];
        let e = Trace::parse_bytes(&gz, "t.csv.gz").unwrap_err().to_string();
        assert!(
            e.starts_with("t.csv.gz:1: gzip-compressed data") && e.contains("gzip -dc"),
            "{e}"
        );
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let h = "op,id,size,stream\n";
        assert_eq!(line_err("op,id\n").0, 1);
        assert!(line_err("").1.contains("empty file"));
        let (l, m) = line_err(&format!("{h}a,1,512,0\na,2,x,0\n"));
        assert_eq!(l, 3);
        assert!(m.contains("size `x`"), "{m}");
        let (l, m) = line_err(&format!("{h}a,1,512\n"));
        assert_eq!(l, 2);
        assert!(m.contains("4 fields"), "{m}");
        let (_, m) = line_err(&format!("{h}a,1,512,0,9\n"));
        assert!(m.contains("found 5"), "{m}");
        let (_, m) = line_err(&format!("{h}z,1,512,0\n"));
        assert!(m.contains("unknown op `z`"), "{m}");
        let (_, m) = line_err(&format!("{h}a,-1,512,0\n"));
        assert!(m.contains("id `-1`"), "{m}");
        let (l, m) = line_err(&format!("{h}a,1,512,0\n\na,1,512,0\n"));
        assert_eq!(l, 4);
        assert!(m.contains("allocated again") && m.contains("line 2"), "{m}");
        let (l, m) = line_err(&format!("{h}a,1,512,0\nf,1,0,0\nf,1,0,0\n"));
        assert_eq!(l, 4);
        assert!(m.contains("not allocated"), "{m}");
        let (l, m) = line_err(&format!("{h}r,3,0,1\n"));
        assert_eq!(l, 2);
        assert!(m.contains("record_stream of id 3"), "{m}");
    }

    #[test]
    fn numbers_at_their_limits() {
        let h = "op,id,size,stream\n";
        let t = Trace::parse_str(
            &format!("{h}a,{},{},{}\n", u64::MAX, usize::MAX, u32::MAX),
            "t",
        )
        .unwrap();
        assert_eq!(
            t.ops()[0],
            TraceOp::Alloc {
                id: u64::MAX,
                size: usize::MAX,
                stream: u32::MAX
            }
        );
        let (_, m) = line_err(&format!("{h}a,1,18446744073709551616,0\n"));
        assert!(m.contains("size `18446744073709551616`"), "{m}");
        let (_, m) = line_err(&format!("{h}a,1,1,4294967296\n"));
        assert!(m.contains("stream `4294967296`"), "{m}");
        let (_, m) = line_err(&format!("{h}a,18446744073709551616,1,0\n"));
        assert!(m.contains("id `18446744073709551616`"), "{m}");
    }

    #[test]
    fn long_lines_are_clipped_in_errors() {
        let long = "9".repeat(5 << 20);
        let (l, m) = line_err(&format!("op,id,size,stream\na,1,{long},0\n"));
        assert_eq!(l, 2);
        assert!(m.len() < 200, "{} bytes", m.len());
        assert!(m.contains("5242880 bytes"), "{m}");
    }

    #[test]
    fn csv_round_trips() {
        let text = "op,id,size,stream\na,0,4096,1\na,1,512,0\nr,0,0,0\nf,0,0,1\nf,1,0,0\n";
        let t = Trace::parse_str(text, "t").unwrap();
        assert_eq!(t.to_csv(), text);
        assert_eq!(t.allocations(), 2);
        assert_eq!(t.streams(), vec![1, 0]);
    }

    #[test]
    fn ids_may_be_reused_after_free_and_crlf_is_accepted() {
        let t = Trace::parse_str(
            "op,id,size,stream\r\na,5,512,0\r\nf,5,0,0\r\na,5,1024,0\r\n",
            "t",
        )
        .unwrap();
        assert_eq!(t.ops().len(), 3);
        assert_eq!(t.line_of(2), Some(4));
    }

    #[test]
    fn too_many_streams() {
        let mut text = String::from("op,id,size,stream\n");
        for i in 0..=MAX_STREAMS {
            let _ = writeln!(text, "a,{i},512,{}", i * 3);
        }
        let (l, m) = line_err(&text);
        assert_eq!(l, MAX_STREAMS + 2);
        assert!(m.contains("at most 65536"), "{m}");
    }
}
