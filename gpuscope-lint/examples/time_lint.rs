//! Times linting a tree of `.rs` files on one thread, one file at a time as the command does:
//! `lint_source` end to end (lex, nesting bound, parse, rules, positions), and its two halves,
//! `syn` parsing and the rules (`lint_file`); best of `RUNS` (default 5):
//!
//! ```text
//! cargo run -p gpuscope-lint --release --example time_lint -- DIR [RUNS]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpuscope_lint::{Levels, lint_file, lint_source};

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
    let bytes: usize = sources.iter().map(String::len).sum();
    let levels = Levels::default();
    let (mut total_best, mut parse_best, mut lint_best) =
        (Duration::MAX, Duration::MAX, Duration::MAX);
    let mut findings = 0;
    for _ in 0..runs {
        // What the command does per file: lex, bound the nesting, parse, lint, resolve.
        let start = Instant::now();
        findings = sources
            .iter()
            .map(|s| lint_source(s, &levels).map_or(0, |f| f.len()))
            .sum();
        total_best = total_best.min(start.elapsed());
        // The two halves, one file at a time.
        let (mut parse, mut lint) = (Duration::ZERO, Duration::ZERO);
        for source in &sources {
            let start = Instant::now();
            let Ok(ast) = syn::parse_file(source) else {
                continue;
            };
            let parsed = Instant::now();
            let _ = lint_file(&ast, &levels);
            lint += parsed.elapsed();
            parse += parsed - start;
            drop(ast);
            proc_macro2::extra::invalidate_current_thread_spans();
        }
        parse_best = parse_best.min(parse);
        lint_best = lint_best.min(lint);
    }
    let mb = bytes as f64 / 1e6;
    println!(
        "{} files, {lines} lines, {mb:.1} MB, {findings} findings (best of {runs}, one thread):\n  \
         lint_source {:.0} ms ({:.3} s per 10 MB)\n  parse {:.0} ms, rules {:.0} ms",
        sources.len(),
        total_best.as_secs_f64() * 1e3,
        total_best.as_secs_f64() / mb * 10.0,
        parse_best.as_secs_f64() * 1e3,
        lint_best.as_secs_f64() * 1e3,
    );
    ExitCode::SUCCESS
}
