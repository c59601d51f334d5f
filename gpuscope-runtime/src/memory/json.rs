//! The JSON format of snapshots (feature `serde`): [`to_json`], [`write_json`],
//! [`read_json`] for one device; [`to_json_all`], [`write_json_all`], [`read_json_all`]
//! for several (an object with `format` and a `devices` array). The format is
//! described in the [module docs](super).

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

/// Several devices' snapshots, as written: `{"format": ..., "devices": [...]}`.
#[derive(serde::Serialize)]
struct DevicesOut<'a> {
    format: &'static str,
    devices: &'a [MemorySnapshot],
}

/// Several devices' snapshots, as read.
#[derive(serde::Deserialize)]
struct DevicesIn {
    format: String,
    devices: Vec<MemorySnapshot>,
}

/// What kind of file it is: whether the top-level object has `devices`. Reading this
/// skips every value without keeping it, so it costs a fraction of the real read.
#[derive(serde::Deserialize)]
struct Shape {
    #[serde(default)]
    devices: Option<serde::de::IgnoredAny>,
}

/// Several devices' snapshots as JSON text (one line): an object with `format` and a
/// `devices` array of the snapshots (see the [module docs](super)).
///
/// ```
/// use gpuscope_runtime::{memory, Device};
/// let snaps = memory::snapshot_all();
/// let text = memory::to_json_all(&snaps);
/// assert!(text.starts_with(r#"{"format":"gpuscope-memory/1","devices":["#));
/// assert_eq!(memory::read_json_all(text.as_bytes(), "inline").unwrap(), snaps);
/// ```
pub fn to_json_all(snapshots: &[MemorySnapshot]) -> String {
    serde_json::to_string(&DevicesOut {
        format: SNAPSHOT_FORMAT,
        devices: snapshots,
    })
    .expect("a snapshot always serialises")
}

/// Writes the snapshot to `path` as JSON.
pub fn write_json(snapshot: &MemorySnapshot, path: &Path) -> Result<(), JsonError> {
    write_value(snapshot, path)
}

/// Writes several devices' snapshots to `path` as one JSON object ([`to_json_all`]).
pub fn write_json_all(snapshots: &[MemorySnapshot], path: &Path) -> Result<(), JsonError> {
    write_value(
        &DevicesOut {
            format: SNAPSHOT_FORMAT,
            devices: snapshots,
        },
        path,
    )
}

fn write_value(value: &impl serde::Serialize, path: &Path) -> Result<(), JsonError> {
    let io = |source| JsonError::Io {
        file: path.display().to_string(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::new(file);
    serde_json::to_writer(&mut out, value).map_err(|e| io(e.into()))?;
    std::io::Write::flush(&mut out).map_err(io)
}

/// Reads a snapshot from JSON bytes; `name` (the file) is used in errors. A file of
/// several devices is an error that names [`read_json_all`].
pub fn read_json(bytes: &[u8], name: &str) -> Result<MemorySnapshot, JsonError> {
    if is_several(bytes) {
        let n = read_several(bytes, name)?.len();
        return Err(format_error(
            name,
            format!("it holds the snapshots of {n} devices; read it with read_json_all"),
        ));
    }
    read_one(bytes, name)
}

/// Reads the snapshots of a JSON file of several devices, or of one (a list of one);
/// `name` (the file) is used in errors.
pub fn read_json_all(bytes: &[u8], name: &str) -> Result<Vec<MemorySnapshot>, JsonError> {
    if is_several(bytes) {
        read_several(bytes, name)
    } else {
        read_one(bytes, name).map(|s| vec![s])
    }
}

/// Whether `bytes` are an object with `devices`. Anything else (including what does
/// not parse) is read as one snapshot, whose errors are the ones to show.
fn is_several(bytes: &[u8]) -> bool {
    matches!(
        serde_json::from_slice::<Shape>(bytes),
        Ok(Shape { devices: Some(_) })
    )
}

fn format_error(name: &str, message: String) -> JsonError {
    JsonError::Format {
        file: name.to_string(),
        message,
    }
}

fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8], name: &str) -> Result<T, JsonError> {
    serde_json::from_slice(bytes).map_err(|e| {
        format_error(
            name,
            match e.classify() {
                serde_json::error::Category::Eof => format!(
                    "the JSON ends early (line {}, column {}): is the file truncated?",
                    e.line(),
                    e.column()
                ),
                _ => e.to_string(),
            },
        )
    })
}

fn check_format(found: &str, name: &str) -> Result<(), JsonError> {
    if found != SNAPSHOT_FORMAT {
        return Err(format_error(
            name,
            format!("format `{found}`; this version reads `{SNAPSHOT_FORMAT}`"),
        ));
    }
    Ok(())
}

fn read_one(bytes: &[u8], name: &str) -> Result<MemorySnapshot, JsonError> {
    let snapshot: MemorySnapshot = parse(bytes, name)?;
    check_format(&snapshot.format, name)?;
    Ok(snapshot)
}

fn read_several(bytes: &[u8], name: &str) -> Result<Vec<MemorySnapshot>, JsonError> {
    let set: DevicesIn = parse(bytes, name)?;
    check_format(&set.format, name)?;
    for s in &set.devices {
        check_format(&s.format, name)?;
    }
    Ok(set.devices)
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

    fn snap(device: &str) -> MemorySnapshot {
        MemorySnapshot {
            format: SNAPSHOT_FORMAT.into(),
            device: device.into(),
            allocated: 0,
            reserved: 0,
            segments: vec![],
            unplaced: vec![],
            history: None,
        }
    }

    #[test]
    fn several_devices_round_trip_and_one_device_files_still_read() {
        let snaps = vec![snap("cuda:0 (a)"), snap("cuda:1 (b)")];
        let text = to_json_all(&snaps);
        assert!(text.starts_with(r#"{"format":"gpuscope-memory/1","devices":[{"format":"gpuscope-memory/1","device":"cuda:0 (a)""#), "{text}");
        assert_eq!(read_json_all(text.as_bytes(), "m.json").unwrap(), snaps);
        // `devices` may come first, and none is an empty list.
        let text = r#"{"devices":[],"format":"gpuscope-memory/1"}"#;
        assert_eq!(read_json_all(text.as_bytes(), "e.json").unwrap(), vec![]);
        // A one-device file reads as a list of one, and as before.
        let one = to_json(&snaps[1]);
        assert_eq!(
            read_json_all(one.as_bytes(), "1.json").unwrap(),
            vec![snaps[1].clone()]
        );
        assert_eq!(read_json(one.as_bytes(), "1.json").unwrap(), snaps[1]);
        // read_json says what to use for several devices.
        let e = read_json(to_json_all(&snaps).as_bytes(), "m.json").unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.json: not a gpuscope memory snapshot: it holds the snapshots of 2 devices; read it with read_json_all"
        );
        // Errors inside a device are found, with their place.
        let e = read_json_all(
            br#"{"format":"gpuscope-memory/1","devices":[{"format":"gpuscope-memory/1"}]}"#,
            "d.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("missing field `device`"), "{e}");
        let e = read_json_all(br#"{"format":"other/2","devices":[]}"#, "o.json").unwrap_err();
        assert!(
            e.to_string()
                .ends_with("format `other/2`; this version reads `gpuscope-memory/1`"),
            "{e}"
        );
        // A truncated file of several devices is read as one snapshot's error: it ends early.
        let text = to_json_all(&snaps);
        let e = read_json_all(&text.as_bytes()[..text.len() - 3], "t.json").unwrap_err();
        assert!(e.to_string().contains("the JSON ends early"), "{e}");
    }
}
