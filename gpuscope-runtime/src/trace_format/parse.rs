//! Reading trace text: the header, which names the columns, then one operation a line,
//! each checked against the ids live so far.
//!
//! The header decides where the four columns are, so files written by other tools
//! read as they are: columns in any order, extra columns (ignored), fields in double
//! quotes, a UTF-8 byte order mark, CRLF line ends, whole numbers written as decimals
//! (`4096.0`, as pandas writes an integer column that has a gap) and an empty size on
//! a free or a `record_stream` (whose size is not used).

use std::collections::HashMap;

use super::{HEADER, MAX_STREAMS, TraceError, TraceOp};

/// Parses `text` into operations and the line each came from.
pub(super) fn parse(text: &str, name: &str) -> Result<(Vec<TraceOp>, Vec<u32>), TraceError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parser = Parser {
        name,
        columns: Columns::STANDARD,
        ops: Vec::new(),
        lines: Vec::new(),
        live: HashMap::new(),
        streams: HashMap::new(),
    };
    let mut lines = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    match lines.next() {
        Some((_, h)) if h.trim().is_empty() && text.trim().is_empty() => {
            return Err(parser.err(1, format!("empty file: expected the header `{HEADER}`")));
        }
        Some((n, h)) => {
            parser.columns = Columns::from_header(h).map_err(|m| parser.err(n, m))?;
        }
        None => unreachable!("split yields at least one item"),
    }
    for (n, line) in lines {
        if !line.trim().is_empty() {
            parser.line(n, line)?;
        }
    }
    Ok((parser.ops, parser.lines))
}

/// Where the four columns are, and how many fields a line has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Columns {
    op: usize,
    id: usize,
    size: usize,
    stream: usize,
    count: usize,
}

const NAMES: [&str; 4] = ["op", "id", "size", "stream"];

impl Columns {
    const STANDARD: Columns = Columns {
        op: 0,
        id: 1,
        size: 2,
        stream: 3,
        count: 4,
    };

    fn from_header(header: &str) -> Result<Columns, String> {
        let names: Vec<String> = header
            .split(',')
            .map(|f| unquote(f).to_ascii_lowercase())
            .collect();
        let mut at = [None; 4];
        for (i, n) in names.iter().enumerate() {
            if let Some(k) = NAMES.iter().position(|&want| want == n) {
                if at[k].is_some() {
                    return Err(format!(
                        "the header `{}` names the column `{n}` twice",
                        clip(header)
                    ));
                }
                at[k] = Some(i);
            }
        }
        if let [Some(op), Some(id), Some(size), Some(stream)] = at {
            return Ok(Columns {
                op,
                id,
                size,
                stream,
                count: names.len(),
            });
        }
        if matches!(names.first().map(String::as_str), Some("a" | "f" | "r")) && names.len() == 4 {
            return Err(format!(
                "the first line `{}` is an operation, not the header: add the line `{HEADER}` before it",
                clip(header)
            ));
        }
        let missing: Vec<&str> = NAMES
            .iter()
            .zip(at)
            .filter(|(_, a)| a.is_none())
            .map(|(n, _)| *n)
            .collect();
        Err(format!(
            "expected the header `{HEADER}`, found `{}` (no column {}; the four columns may come in any order, and other columns are ignored)",
            clip(header),
            missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// Whether `line` is a trace's header: it names the columns `op`, `id`, `size` and
/// `stream` (in any order, quoted or not, among others), each once.
pub fn is_header(line: &str) -> bool {
    Columns::from_header(line.strip_prefix('\u{feff}').unwrap_or(line)).is_ok()
}

/// A field without the spaces and the double quotes around it.
fn unquote(field: &str) -> &str {
    let f = field.trim();
    f.strip_prefix('"')
        .and_then(|f| f.strip_suffix('"'))
        .map_or(f, str::trim)
}

/// A whole number, also when written as a decimal with a zero fraction (`4096.0`).
fn whole<T: std::str::FromStr>(field: &str) -> Option<T> {
    if let Ok(v) = field.parse() {
        return Some(v);
    }
    let (int, frac) = field.split_once('.')?;
    if !int.is_empty() && !frac.is_empty() && frac.bytes().all(|b| b == b'0') {
        int.parse().ok()
    } else {
        None
    }
}

/// Parsing state: ops so far, live ids (with the line that allocated them) and streams.
struct Parser<'a> {
    name: &'a str,
    columns: Columns,
    ops: Vec<TraceOp>,
    lines: Vec<u32>,
    live: HashMap<u64, usize>,
    streams: HashMap<u32, ()>,
}

impl Parser<'_> {
    fn err(&self, line: usize, message: String) -> TraceError {
        TraceError::Line {
            file: self.name.to_string(),
            line,
            message,
        }
    }

    fn line(&mut self, n: usize, line: &str) -> Result<(), TraceError> {
        let c = self.columns;
        let mut fields = [""; 4];
        let mut count = 0;
        for (i, f) in line.split(',').enumerate() {
            count += 1;
            let slot = if i == c.op {
                0
            } else if i == c.id {
                1
            } else if i == c.size {
                2
            } else if i == c.stream {
                3
            } else {
                continue;
            };
            fields[slot] = unquote(f);
        }
        if count != c.count {
            let expected = if c == Columns::STANDARD {
                format!("4 fields `{HEADER}`")
            } else {
                format!("{} fields, as the header has", c.count)
            };
            return Err(self.err(
                n,
                format!("expected {expected}, found {count} in `{}`", clip(line)),
            ));
        }
        let [op, id, size, stream] = fields;
        let id: u64 = whole(id).ok_or_else(|| {
            self.err(
                n,
                format!("id `{}` is not an integer from 0 to {}", clip(id), u64::MAX),
            )
        })?;
        let size: usize = match whole(size) {
            Some(s) => s,
            // A free's or a record_stream's size is not used.
            None if size.is_empty() && matches!(op, "f" | "r") => 0,
            None => {
                return Err(self.err(
                    n,
                    format!(
                        "size `{}` is not a byte count from 0 to {}",
                        clip(size),
                        usize::MAX
                    ),
                ));
            }
        };
        let stream: u32 = whole(stream).ok_or_else(|| {
            self.err(
                n,
                format!(
                    "stream `{}` is not a stream number from 0 to {}: number the trace's streams 0, 1, 2, ... (0 is the default stream); `gpuscope replay` reads PyTorch snapshots, whose streams are handles, as they are",
                    clip(stream),
                    u32::MAX
                ),
            )
        })?;
        let op = match op {
            "a" => {
                if let Some(first) = self.live.get(&id) {
                    return Err(self.err(
                        n,
                        format!(
                            "id {id} allocated again while still live (allocated at line {first})"
                        ),
                    ));
                }
                self.use_stream(n, stream)?;
                self.live.insert(id, n);
                TraceOp::Alloc { id, size, stream }
            }
            "f" => {
                if self.live.remove(&id).is_none() {
                    return Err(self.err(
                        n,
                        format!(
                            "free of id {id}, which is not allocated (never allocated, or freed already)"
                        ),
                    ));
                }
                TraceOp::Free { id }
            }
            "r" => {
                if !self.live.contains_key(&id) {
                    return Err(self.err(
                        n,
                        format!(
                            "record_stream of id {id}, which is not allocated (never allocated, or freed already)"
                        ),
                    ));
                }
                self.use_stream(n, stream)?;
                TraceOp::RecordStream { id, stream }
            }
            other => {
                return Err(self.err(
                    n,
                    format!(
                        "unknown op `{}`: expected `a` (allocate), `f` (free) or `r` (record_stream)",
                        clip(other)
                    ),
                ));
            }
        };
        self.ops.push(op);
        self.lines.push(n.min(u32::MAX as usize) as u32);
        Ok(())
    }

    fn use_stream(&mut self, n: usize, stream: u32) -> Result<(), TraceError> {
        if self.streams.len() >= MAX_STREAMS && !self.streams.contains_key(&stream) {
            return Err(self.err(
                n,
                format!(
                    "stream {stream} is the trace's {}th stream: a replay makes a stream for each, and at most {MAX_STREAMS} are supported",
                    MAX_STREAMS + 1
                ),
            ));
        }
        self.streams.insert(stream, ());
        Ok(())
    }
}

/// At most 40 characters of `s`, for error messages.
fn clip(s: &str) -> String {
    if s.chars().count() > 40 {
        format!(
            "{}... ({} bytes)",
            s.chars().take(40).collect::<String>(),
            s.len()
        )
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Trace;
    use super::*;

    fn ops(text: &str) -> Vec<TraceOp> {
        Trace::parse_str(text, "t.csv").unwrap().ops().to_vec()
    }

    fn message(text: &str) -> String {
        Trace::parse_str(text, "t.csv").unwrap_err().to_string()
    }

    const STANDARD: &str = "op,id,size,stream\na,7,4096,1\nr,7,0,0\nf,7,0,1\n";

    #[test]
    fn files_written_by_other_tools_read_as_the_standard_one() {
        let want = ops(STANDARD);
        for text in [
            "\u{feff}op,id,size,stream\na,7,4096,1\nr,7,0,0\nf,7,0,1\n",
            "\"op\",\"id\",\"size\",\"stream\"\n\"a\",\"7\",\"4096\",\"1\"\n\"r\",\"7\",\"0\",\"0\"\n\"f\",\"7\",\"0\",\"1\"\n",
            "stream,size,id,op\n1,4096,7,a\n0,0,7,r\n1,0,7,f\n",
            ",op,id,size,stream,time_us\n0,a,7,4096,1,0.5\n1,r,7,0,0,0.7\n2,f,7,0,1,0.9\n",
            "Op, ID, Size, Stream\na, 7, 4096, 1\nr, 7, 0, 0\nf, 7, 0, 1\n",
            "op,id,size,stream\r\na,7,4096.0,1.0\r\nr,7,,0\r\nf,7,,1\r\n",
        ] {
            assert_eq!(ops(text), want, "{text:?}");
        }
        // Lines are still the file's lines.
        let t = Trace::parse_str("\u{feff}op,id,size,stream\n\na,7,4096,1\n", "t").unwrap();
        assert_eq!(t.line_of(0), Some(3));
    }

    #[test]
    fn headers_that_cannot_be_read_say_what_is_missing() {
        let m = message("op,id,bytes,stream\na,1,2,0\n");
        assert!(m.starts_with("t.csv:1: expected the header"), "{m}");
        assert!(m.contains("no column `size`"), "{m}");
        let m = message("op,id,size,stream,id\n");
        assert!(m.contains("names the column `id` twice"), "{m}");
        let m = message("a,0,4096,0\nf,0,0,0\n");
        assert!(m.contains("is an operation, not the header"), "{m}");
        assert!(m.contains("add the line `op,id,size,stream`"), "{m}");
    }

    #[test]
    fn only_whole_numbers_and_only_unused_sizes_may_be_empty() {
        for (line, what) in [
            ("a,7,1.5e6,0", "size `1.5e6`"),
            ("a,7,4096.5,0", "size `4096.5`"),
            ("a,7,.0,0", "size `.0`"),
            ("a,7,,0", "size ``"),
            ("a,7.25,4096,0", "id `7.25`"),
        ] {
            let m = message(&format!("op,id,size,stream\n{line}\n"));
            assert!(m.contains(what), "{line}: {m}");
        }
        let m = message("op,id,size,stream,x\na,1,4096,0\n");
        assert!(
            m.contains("expected 5 fields, as the header has, found 4"),
            "{m}"
        );
        let m = message("op,id,size,stream\na,1,4096,94823749234123\n");
        assert!(m.contains("number the trace's streams 0, 1, 2"), "{m}");
    }

    #[test]
    fn headers_are_told_from_other_first_lines() {
        for h in [
            "op,id,size,stream",
            "\u{feff}\"Stream\",op,id,size,t",
            ",op,id,size,stream",
        ] {
            assert!(is_header(h), "{h}");
        }
        for h in [
            "op,id,size",
            "a,0,4096,0",
            "op,id,size,stream,id",
            "{\"format\":1}",
        ] {
            assert!(!is_header(h), "{h}");
        }
    }

    #[test]
    fn whole_numbers() {
        assert_eq!(whole::<u64>("12"), Some(12));
        assert_eq!(whole::<u64>("12.000"), Some(12));
        assert_eq!(whole::<u64>("12."), None);
        assert_eq!(whole::<u64>("-1.0"), None);
        assert_eq!(whole::<u32>("4294967296.0"), None);
    }
}
