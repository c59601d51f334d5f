//! The JSON format of snapshots (feature `serde`): [`to_json`], [`write_json`],
//! [`read_json`]. The format is described in the [module docs](super).

use std::path::Path;

use crate::record::{MemorySnapshot, SNAPSHOT_FORMAT};

/// A snapshot file that could not be read or written: the file, and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// The file could not be read or written.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a gpuscope snapshot.
    #[error("{file}: not a gpuscope memory snapshot: {message}")]
    Format {
        /// The file.
        file: String,
        /// What is wrong (with the line and column of the JSON where it was found).
        message: String,
    },
}

/// The snapshot as JSON text (one line).
///
/// ```
/// use gpuscope_runtime::{memory, Device};
/// let snap = memory::snapshot(&Device::host().unwrap());
/// let text = memory::to_json(&snap);
/// assert!(text.starts_with(r#"{"format":"gpuscope-memory/1""#));
/// assert_eq!(memory::read_json(text.as_bytes(), "inline").unwrap(), snap);
/// ```
pub fn to_json(snapshot: &MemorySnapshot) -> String {
    serde_json::to_string(snapshot).expect("a snapshot always serialises")
}

/// Writes the snapshot to `path` as JSON.
pub fn write_json(snapshot: &MemorySnapshot, path: &Path) -> Result<(), JsonError> {
    let io = |source| JsonError::Io {
        file: path.display().to_string(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::new(file);
    serde_json::to_writer(&mut out, snapshot).map_err(|e| io(e.into()))?;
    std::io::Write::flush(&mut out).map_err(io)
}

/// Reads a snapshot from JSON bytes; `name` (the file) is used in errors.
pub fn read_json(bytes: &[u8], name: &str) -> Result<MemorySnapshot, JsonError> {
    let format = |message: String| JsonError::Format {
        file: name.to_string(),
        message,
    };
    let snapshot: MemorySnapshot = serde_json::from_slice(bytes).map_err(|e| {
        format(match e.classify() {
            serde_json::error::Category::Eof => format!(
                "the JSON ends early (line {}, column {}): is the file truncated?",
                e.line(),
                e.column()
            ),
            _ => e.to_string(),
        })
    })?;
    if snapshot.format != SNAPSHOT_FORMAT {
        return Err(format(format!(
            "format `{}`; this version reads `{SNAPSHOT_FORMAT}`",
            snapshot.format
        )));
    }
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_the_place() {
        let e = read_json(
            b"{\"format\": \"gpuscope-memory/1\", \"device\": ",
            "snap.json",
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "snap.json: not a gpuscope memory snapshot: the JSON ends early (line 1"
            ),
            "{e}"
        );
        let e = read_json(b"[1, 2]", "x.json").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("x.json: not a gpuscope memory snapshot: invalid type"),
            "{e}"
        );
        let e = read_json(
            br#"{"format":"other/2","device":"d","allocated":0,"reserved":0,"segments":[]}"#,
            "o.json",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "o.json: not a gpuscope memory snapshot: format `other/2`; this version reads `gpuscope-memory/1`"
        );
    }
}
