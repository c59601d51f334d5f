//! Every input a fuzz target once failed on (`fuzz/regressions/<target>/`), run through
//! the same entry point as the target: each must now be an answer (a value or an
//! error), never a panic.

use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn pytorch_snapshot_regressions_are_answered() {
    let cases = inputs("pytorch_snapshot");
    assert!(
        !cases.is_empty(),
        "the regression inputs are in the repository"
    );
    for (path, bytes) in cases {
        let r = gpuscope_cli::fuzzing::pytorch_snapshot(&bytes);
        println!("{}: {:?}", path.display(), r.as_ref().map(|_| "read"));
        assert!(
            r.is_err(),
            "{}: a list that holds itself is refused",
            path.display()
        );
    }
}

#[test]
fn every_regression_directory_names_a_fuzz_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let targets = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for entry in std::fs::read_dir(root.join("regressions"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            targets.contains(&format!("name = \"{name}\"")),
            "fuzz/regressions/{name} is not a fuzz target"
        );
    }
}
