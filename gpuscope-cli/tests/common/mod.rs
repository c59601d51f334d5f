//! What the command's integration tests share.

use std::path::PathBuf;

/// The path of `name` in the repository's trace corpus (`tests/data/traces`).
pub fn trace(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/traces")
        .join(name)
        .display()
        .to_string()
}
