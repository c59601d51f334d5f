//! Allocation traces: record what an allocator was asked, and replay it.
//!
//! The format is CSV with the header `op,id,size,stream`: `a,ID,SIZE,STREAM` allocates
//! `SIZE` bytes as `ID` on stream `STREAM`, and `f,ID,0,STREAM` frees `ID`. It is the
//! format of the PyTorch traces the benchmarks replay.
//!
//! ```
//! use gpuscope_runtime::trace::Trace;
//! let t = Trace::parse_str("op,id,size,stream\na,0,4096,0\nf,0,0,0\n", "inline").unwrap();
//! assert_eq!(t.ops().len(), 2);
//! let err = Trace::parse_str("op,id,size,stream\nf,7,0,0\n", "bad.csv").unwrap_err();
//! assert_eq!(err.to_string(), "bad.csv:2: free of id 7, which is not allocated (never allocated, or freed already)");
//! ```

pub mod replay;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

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

/// A validated allocation trace: every free names a live allocation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    ops: Vec<TraceOp>,
}

const HEADER: &str = "op,id,size,stream";

impl Trace {
    /// A trace from operations recorded by an allocator (already consistent).
    pub fn from_ops(ops: Vec<TraceOp>) -> Trace {
        Trace { ops }
    }

    /// The operations in order.
    pub fn ops(&self) -> &[TraceOp] {
        &self.ops
    }

    /// Number of allocations.
    pub fn allocations(&self) -> usize {
        self.ops
            .iter()
            .filter(|o| matches!(o, TraceOp::Alloc { .. }))
            .count()
    }

    /// Reads and validates a trace file.
    pub fn read(path: &Path) -> Result<Trace, TraceError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| TraceError::Io {
            file: name.clone(),
            message: e.to_string(),
        })?;
        Self::parse_str(&text, &name)
    }

    /// Parses and validates trace text; `name` is used in errors.
    pub fn parse_str(text: &str, name: &str) -> Result<Trace, TraceError> {
        let err = |line: usize, message: String| TraceError::Line {
            file: name.to_string(),
            line,
            message,
        };
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
        match lines.next() {
            Some((_, h)) if h.trim() == HEADER => {}
            Some((n, h)) => {
                return Err(err(
                    n,
                    format!("expected the header `{HEADER}`, found `{}`", clip(h)),
                ));
            }
            None => {
                return Err(err(
                    1,
                    format!("empty file: expected the header `{HEADER}`"),
                ));
            }
        }
        let mut ops = Vec::new();
        let mut live: HashMap<u64, usize> = HashMap::new();
        for (n, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != 4 {
                return Err(err(
                    n,
                    format!(
                        "expected 4 fields `op,id,size,stream`, found {} in `{}`",
                        fields.len(),
                        clip(line)
                    ),
                ));
            }
            let id: u64 = fields[1].parse().map_err(|_| {
                err(
                    n,
                    format!("id `{}` is not a non-negative integer", clip(fields[1])),
                )
            })?;
            let size: usize = fields[2].parse().map_err(|_| {
                err(
                    n,
                    format!("size `{}` is not a non-negative integer", clip(fields[2])),
                )
            })?;
            let stream: u32 = fields[3].parse().map_err(|_| {
                err(
                    n,
                    format!("stream `{}` is not a stream number", clip(fields[3])),
                )
            })?;
            match fields[0] {
                "a" => {
                    if let Some(first) = live.insert(id, n) {
                        return Err(err(
                            n,
                            format!(
                                "id {id} allocated again while still live (allocated at line {first})"
                            ),
                        ));
                    }
                    ops.push(TraceOp::Alloc { id, size, stream });
                }
                "f" => {
                    if live.remove(&id).is_none() {
                        return Err(err(
                            n,
                            format!(
                                "free of id {id}, which is not allocated (never allocated, or freed already)"
                            ),
                        ));
                    }
                    ops.push(TraceOp::Free { id });
                }
                other => {
                    return Err(err(
                        n,
                        format!(
                            "unknown op `{}`: expected `a` (allocate) or `f` (free)",
                            clip(other)
                        ),
                    ));
                }
            }
        }
        Ok(Trace { ops })
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

/// At most 40 characters of `s`, for error messages.
fn clip(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
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
    }

    #[test]
    fn csv_round_trips() {
        let text = "op,id,size,stream\na,0,4096,1\na,1,512,0\nf,0,0,1\nf,1,0,0\n";
        let t = Trace::parse_str(text, "t").unwrap();
        assert_eq!(t.to_csv(), text);
        assert_eq!(t.allocations(), 2);
    }

    #[test]
    fn ids_may_be_reused_after_free() {
        let t =
            Trace::parse_str("op,id,size,stream\na,5,512,0\nf,5,0,0\na,5,1024,0\r\n", "t").unwrap();
        assert_eq!(t.ops().len(), 3);
    }
}
