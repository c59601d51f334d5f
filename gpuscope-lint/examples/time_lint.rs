//! Times linting a tree of `.rs` files on one thread, one file at a time as the command does:
//! `lint_source` end to end (lex, the scan for the nesting bound and the trigger words,
//! parse, rules where a trigger word appears, positions), and its phases one by one:
//! lexing, the scan (`nesting_depth`), `syn` parsing, the rules (`lint_file`, on every
//! file) and dropping the syntax tree; best of `RUNS` (default 5). Like the command, it
//! allocates with mimalloc:
//!
//! ```text
//! cargo run -p gpuscope-lint --release --example time_lint -- DIR [RUNS]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};

use gpuscope_lint::{Levels, lint_file, lint_source, nesting_depth};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Time spent in each phase, summed over the files of one run.
#[derive(Clone, Copy)]
struct Phases {
    lex: Duration,
    nesting: Duration,
    parse: Duration,
    rules: Duration,
    drop: Duration,
}

impl Phases {
    const MAX: Phases = Phases {
        lex: Duration::MAX,
        nesting: Duration::MAX,
        parse: Duration::MAX,
        rules: Duration::MAX,
        drop: Duration::MAX,
    };

    /// Each phase's time in one file.
    fn of(source: &str, levels: &Levels) -> Option<Phases> {
        let start = Instant::now();
        drop(proc_macro2::TokenStream::from_str(source).ok()?);
        proc_macro2::extra::invalidate_current_thread_spans();
        let lexed = Instant::now();
        // Lexes again, then scans the text for the nesting bound.
        nesting_depth(source)?;
        let bounded = Instant::now();
        let ast = syn::parse_file(source).ok()?;
        let parsed = Instant::now();
        let _ = lint_file(&ast, levels);
        let linted = Instant::now();
        drop(ast);
        let dropped = Instant::now();
        proc_macro2::extra::invalidate_current_thread_spans();
        Some(Phases {
            lex: lexed - start,
            nesting: (bounded - lexed).saturating_sub(lexed - start),
            parse: parsed - bounded,
            rules: linted - parsed,
            drop: dropped - linted,
        })
    }

    fn add(&mut self, other: Phases) {
        self.lex += other.lex;
        self.nesting += other.nesting;
        self.parse += other.parse;
        self.rules += other.rules;
        self.drop += other.drop;
    }

    fn min(self, other: Phases) -> Phases {
        Phases {
            lex: self.lex.min(other.lex),
            nesting: self.nesting.min(other.nesting),
            parse: self.parse.min(other.parse),
            rules: self.rules.min(other.rules),
            drop: self.drop.min(other.drop),
        }
    }
}

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
    let mut total_best = Duration::MAX;
    let mut phases_best = Phases::MAX;
    let mut findings = 0;
    for _ in 0..runs {
        // What the command does per file: lex, scan, parse, lint, resolve.
        let start = Instant::now();
        findings = sources
            .iter()
            .map(|s| lint_source(s, &levels).map_or(0, |f| f.len()))
            .sum();
        total_best = total_best.min(start.elapsed());
        // The phases, one file at a time (a file that does not lex or parse counts nothing).
        let zero = Duration::ZERO;
        let mut phases = Phases {
            lex: zero,
            nesting: zero,
            parse: zero,
            rules: zero,
            drop: zero,
        };
        for source in &sources {
            if let Some(p) = Phases::of(source, &levels) {
                phases.add(p);
            }
        }
        phases_best = phases_best.min(phases);
    }
    let mb = bytes as f64 / 1e6;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{} files, {lines} lines, {mb:.1} MB, {findings} findings (best of {runs}, one thread):\n  \
         lint_source {:.0} ms ({:.3} s per 10 MB)\n  \
         lex {:.0} ms, scan {:.0} ms, parse {:.0} ms, rules on every file {:.0} ms, drop {:.0} ms",
        sources.len(),
        ms(total_best),
        total_best.as_secs_f64() / mb * 10.0,
        ms(phases_best.lex),
        ms(phases_best.nesting),
        ms(phases_best.parse),
        ms(phases_best.rules),
        ms(phases_best.drop),
    );
    ExitCode::SUCCESS
}
