//! The files to lint: every `.rs` file under the given paths (walked with the `ignore`
//! crate: `.gitignore`, `.ignore` and hidden files honoured, inside a git repository or
//! not; symbolic links followed, loops reported), and every file named directly. A path
//! reached twice (through a link) is linted once.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// Something the walk found: a file to lint, or a problem with a path.
#[derive(Debug)]
pub enum Input {
    /// A file to lint.
    File(PathBuf),
    /// A path that could not be walked (a symbolic link loop, a directory that cannot be
    /// read): reported as an error, the rest is still linted.
    Problem { path: PathBuf, message: String },
}

/// The inputs under `paths`, sorted by path.
pub fn collect(paths: &[PathBuf]) -> Vec<Input> {
    let mut found: BTreeMap<PathBuf, Input> = BTreeMap::new();
    let mut seen = HashSet::new();
    for root in paths {
        let walk = ignore::WalkBuilder::new(root)
            .require_git(false)
            .follow_links(true)
            .build();
        for entry in walk {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    let (path, message) = describe(&e, root);
                    found
                        .entry(path.clone())
                        .or_insert(Input::Problem { path, message });
                    continue;
                }
            };
            let is_file = entry.file_type().is_some_and(|t| t.is_file());
            let is_rust = entry.path().extension().is_some_and(|ext| ext == "rs");
            if !is_file || !(is_rust || entry.depth() == 0) {
                continue;
            }
            // The same file through a link: once.
            let key = std::fs::canonicalize(entry.path()).unwrap_or_else(|_| entry.path().into());
            if seen.insert(key) {
                let path = entry.into_path();
                found.entry(path.clone()).or_insert(Input::File(path));
            }
        }
    }
    found.into_values().collect()
}

/// The path and a message for a walk error.
fn describe(error: &ignore::Error, root: &Path) -> (PathBuf, String) {
    match error {
        ignore::Error::WithPath { path, err } => (path.clone(), describe(err, root).1),
        ignore::Error::WithDepth { err, .. } => describe(err, root),
        ignore::Error::WithLineNumber { err, .. } => describe(err, root),
        ignore::Error::Loop { ancestor, child } => (
            child.clone(),
            format!(
                "symbolic link loop: `{}` leads back to `{}`; not followed",
                child.display(),
                ancestor.display()
            ),
        ),
        ignore::Error::Io(e) => (root.to_owned(), format!("cannot read: {e}")),
        other => (root.to_owned(), other.to_string()),
    }
}
