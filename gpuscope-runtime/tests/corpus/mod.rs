//! The trace corpus of `tests/data/traces`, for the tests that replay all of it: plain
//! traces (`NAME.csv`) and gzip-compressed ones (`NAME.csv.gz`, the larger recordings),
//! each with PyTorch's figures beside it (`NAME.json`).

// Each test file uses the helpers it needs.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};

use gpuscope_runtime::trace::Trace;

/// `tests/data/traces`.
pub fn traces_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/traces")
}

/// Whether `path` names a trace: `.csv`, or `.csv.gz`.
pub fn is_trace(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.ends_with(".csv") || name.ends_with(".csv.gz")
}

/// The trace's name without `.csv` or `.csv.gz`.
pub fn stem(name: &str) -> &str {
    let name = name.strip_suffix(".gz").unwrap_or(name);
    name.strip_suffix(".csv").unwrap_or(name)
}

/// Reads a trace, decompressing a `.gz` one.
pub fn read_trace(path: &Path) -> Trace {
    let name = path.display().to_string();
    if name.ends_with(".gz") {
        let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(file)
            .read_to_end(&mut bytes)
            .unwrap_or_else(|e| panic!("{name}: not gzip data: {e}"));
        Trace::parse_bytes(&bytes, &name).unwrap()
    } else {
        Trace::read(path).unwrap()
    }
}

/// Every trace of the corpus, by file name, sorted.
pub fn all_traces() -> Vec<(String, Trace)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(traces_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| is_trace(p))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, read_trace(p))
        })
        .collect()
}

/// The JSON of PyTorch's figures beside trace `name`.
pub fn json_beside(name: &str) -> PathBuf {
    traces_dir().join(format!("{}.json", stem(name)))
}
