//! Times the two halves of linting a tree of `.rs` files on one thread: `syn` parsing and
//! the rules (`lint_file`), best of `RUNS` (default 5):
//!
//! ```text
//! cargo run -p gpuscope-lint --release --example time_lint -- DIR [RUNS]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpuscope_lint::{Levels, lint_file};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: time_lint DIR [RUNS]");
        return ExitCode::from(2);
    };
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(5).max(1);
    let mut files = Vec::new();
    if let Err(e) = rust_files(&dir, &mut files) {
        eprintln!("cannot walk {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let mut sources = Vec::new();
    for f in &files {
        match std::fs::read_to_string(f) {
            Ok(s) => sources.push(s),
            Err(e) => eprintln!("skipping {}: {e}", f.display()),
        }
    }
    let lines: usize = sources.iter().map(|s| s.lines().count()).sum();
    let levels = Levels::default();
    let (mut parse_best, mut lint_best) = (Duration::MAX, Duration::MAX);
    let mut findings = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let asts: Vec<syn::File> = sources
            .iter()
            .filter_map(|s| syn::parse_file(s).ok())
            .collect();
        let parsed = Instant::now();
        findings = asts.iter().map(|ast| lint_file(ast, &levels).len()).sum();
        let linted = Instant::now();
        parse_best = parse_best.min(parsed - start);
        lint_best = lint_best.min(linted - parsed);
    }
    println!(
        "{} files, {lines} lines, {findings} findings: parse {:.1} ms, rules {:.1} ms (best of {runs}, one thread)",
        sources.len(),
        parse_best.as_secs_f64() * 1e3,
        lint_best.as_secs_f64() * 1e3,
    );
    ExitCode::SUCCESS
}
