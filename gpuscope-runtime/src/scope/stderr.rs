//! Leak reports on stderr, for programs that set no `tracing` subscriber: compact and
//! rustc-like, with the creating line of source when the file is readable, and repeats
//! from one site folded.
//!
//! The first leak from a site is shown in full:
//!
//! ```text
//! warning: tensor leaked from scope `collect_activations`: f32[256, 256] (256.00 KiB) on host:0 (host)
//!   --> examples/leak_report.rs:42:22
//!    |
//! 42 |     let activation = Tensor::ones(&[256, 256], dev)?;
//!    |                      ^ created here, still alive when `collect_activations` returned
//!    |
//!    = note: scope `collect_activations` is at examples/leak_report.rs:41:4
//!    = help: return it, drop it before the scope ends, or adopt it on purpose with `gpuscope::keep(&t)`
//! ```
//!
//! Later leaks from the same site print one line when their count reaches 10, 100,
//! 1000, ... (`warning: ×1000 at src/train.rs:42:17, 250.00 MiB in all, ...`), so a
//! leak in a loop of a million steps prints six lines, not a million. Everything here
//! runs only when a scope has leaked.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::format_bytes;
use crate::record::leak::what;
use crate::record::{LeakReport, TrackRecord};

/// Leaks seen so far from one site.
#[derive(Default)]
struct Tally {
    count: u64,
    bytes: u64,
    /// The count at which the next one-line reminder is printed.
    next_line_at: u64,
}

type SiteKey = (&'static str, u32, u32);

fn key(site: &Location<'_>) -> (String, u32, u32) {
    (site.file().to_string(), site.line(), site.column())
}

static TALLIES: Mutex<Option<HashMap<SiteKey, Tally>>> = Mutex::new(None);

/// Writes `report` to stderr (folding what was reported before from the same sites).
pub(crate) fn report(report: &LeakReport) {
    let text = render(report, &mut |site, n, bytes| {
        let mut all = super::stack::lock(&TALLIES);
        let tally = all
            .get_or_insert_with(HashMap::new)
            .entry((site.file(), site.line(), site.column()))
            .or_default();
        let first = tally.count == 0;
        tally.count += n;
        tally.bytes += bytes;
        if first {
            tally.next_line_at = 10;
            Fold::First
        } else if tally.count >= tally.next_line_at {
            while tally.next_line_at <= tally.count {
                tally.next_line_at = tally.next_line_at.saturating_mul(10);
            }
            Fold::Line {
                count: tally.count,
                bytes: tally.bytes,
            }
        } else {
            Fold::Quiet
        }
    });
    if !text.is_empty() {
        write_stderr(&text);
    }
}

/// What to print for a site's leaks in one report.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// The first leak from the site: in full.
    First,
    /// A reminder: the count and bytes so far.
    Line { count: u64, bytes: u64 },
    /// Nothing (counted only).
    Quiet,
}

/// The text for `report`; `fold(site, leaked here, bytes)` says how to show each site.
pub(crate) fn render(
    report: &LeakReport,
    fold: &mut dyn FnMut(&'static Location<'static>, u64, u64) -> Fold,
) -> String {
    // The report's records grouped by site, in order of first appearance.
    let mut groups: Vec<(&'static Location<'static>, Vec<&TrackRecord>)> = Vec::new();
    let mut index: HashMap<(String, u32, u32), usize> = HashMap::new();
    for r in &report.leaked {
        let i = *index.entry(key(r.site())).or_insert_with(|| {
            groups.push((r.site(), Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(r);
    }
    let scope = &report.scope;
    let mut out = String::new();
    for (site, records) in groups {
        let n = records.len() as u64;
        let bytes: u64 = records.iter().map(|r| r.bytes() as u64).sum();
        match fold(site, n, bytes) {
            Fold::Quiet => {}
            Fold::Line { count, bytes } => {
                let _ = writeln!(
                    out,
                    "warning: ×{count} at {}:{}:{}, {} in all: tensors from this line keep leaking from scope `{}` (last: {})",
                    site.file(),
                    site.line(),
                    site.column(),
                    format_bytes(bytes as usize),
                    scope.name,
                    what(records[records.len() - 1]),
                );
            }
            Fold::First => {
                let first = records[0];
                if n == 1 {
                    let _ = writeln!(
                        out,
                        "warning: tensor leaked from scope `{}`: {}",
                        scope.name,
                        what(first)
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "warning: {n} tensors leaked from scope `{}`, ×{n} at {}:{}:{}, {} in all: {}",
                        scope.name,
                        site.file(),
                        site.line(),
                        site.column(),
                        format_bytes(bytes as usize),
                        what(first)
                    );
                }
                let label = format!("created here, still alive when `{}` returned", scope.name);
                snippet(&mut out, site.file(), site.line(), site.column(), &label);
                let gutter = " ".repeat(site.line().to_string().len());
                let _ = writeln!(
                    out,
                    "{gutter} = note: scope `{}` is at {}:{}:{}",
                    scope.name, scope.file, scope.line, scope.column
                );
                let _ = writeln!(
                    out,
                    "{gutter} = help: return it, drop it before the scope ends, or adopt it on purpose with `gpuscope::keep(&t)`"
                );
                out.push('\n');
            }
        }
    }
    out
}

/// ` --> file:line:col`, then the source line with a caret under the column when the
/// file can be read.
pub(crate) fn snippet(out: &mut String, file: &'static str, line: u32, column: u32, label: &str) {
    let line_no = line.to_string();
    let gutter = " ".repeat(line_no.len());
    let _ = writeln!(out, "{gutter}--> {file}:{line}:{column}");
    match source_line(file, line) {
        Some(raw) => {
            // Columns count characters; a tab is shown (and counted) as four spaces.
            let pad: usize = raw
                .chars()
                .take(column.saturating_sub(1) as usize)
                .map(|c| if c == '\t' { 4 } else { 1 })
                .sum();
            let _ = writeln!(out, "{gutter} |");
            let _ = writeln!(out, "{line_no} | {}", raw.replace('\t', "    ").trim_end());
            let _ = writeln!(out, "{gutter} | {}^ {label}", " ".repeat(pad));
            let _ = writeln!(out, "{gutter} |");
        }
        None => {
            let _ = writeln!(out, "{gutter} = {label}");
        }
    }
}

/// A file's lines (`None`: not readable), by the path a site names.
type SourceCache = HashMap<&'static str, Option<Vec<String>>>;

/// Files read so far.
static SOURCES: Mutex<Option<SourceCache>> = Mutex::new(None);

/// Largest source file read for a snippet.
const MAX_SOURCE: u64 = 4 << 20;

/// Line `line` (1-based) of `file`, when it can be found: as named (relative to the
/// working directory), or under `CARGO_MANIFEST_DIR` or one of its parents (what
/// `cargo run` sets; a workspace member's paths are relative to the workspace).
fn source_line(file: &'static str, line: u32) -> Option<String> {
    let mut cache = super::stack::lock(&SOURCES);
    let lines = cache
        .get_or_insert_with(HashMap::new)
        .entry(file)
        .or_insert_with(|| read_lines(file));
    lines.as_ref()?.get(line.checked_sub(1)? as usize).cloned()
}

fn read_lines(file: &str) -> Option<Vec<String>> {
    let path = Path::new(file);
    let mut candidates: Vec<PathBuf> = vec![path.to_path_buf()];
    if path.is_relative() {
        if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
            candidates.extend(Path::new(&dir).ancestors().map(|d| d.join(path)));
        }
    }
    let found = candidates
        .into_iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() <= MAX_SOURCE))?;
    let text = std::fs::read_to_string(found).ok()?;
    Some(text.lines().map(str::to_string).collect())
}

/// Writes `text` to stderr in one call. Straight to file descriptor 2 on Unix, so that
/// it also works at process exit, after the standard library's thread-locals are gone.
pub(crate) fn write_stderr(text: &str) {
    #[cfg(unix)]
    {
        let mut bytes = text.as_bytes();
        while !bytes.is_empty() {
            // SAFETY: writes `bytes.len()` bytes from a live slice to fd 2.
            let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
            if n <= 0 {
                return;
            }
            bytes = &bytes[n as usize..];
        }
    }
    #[cfg(not(unix))]
    {
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ScopeSite;

    fn record(site: &'static Location<'static>, bytes: usize) -> TrackRecord {
        TrackRecord::for_test(site, bytes)
    }

    fn scope() -> ScopeSite {
        ScopeSite {
            name: "step",
            file: "src/train.rs",
            line: 40,
            column: 4,
        }
    }

    #[test]
    fn a_first_leak_shows_the_source_line_under_its_site() {
        let site = Location::caller(); // this line, in this file
        let report = LeakReport::new(scope(), vec![record(site, 1024)]);
        let text = render(&report, &mut |_, _, _| Fold::First);
        assert!(
            text.starts_with(
                "warning: tensor leaked from scope `step`: f32[256] (1.00 KiB) on host:0 (host)\n"
            ),
            "{text}"
        );
        let at = format!("--> {}:{}:{}", site.file(), site.line(), site.column());
        assert!(text.contains(&at), "{text}");
        // The caret sits under `Location::caller()`.
        let lines: Vec<&str> = text.lines().collect();
        let src = lines
            .iter()
            .position(|l| l.contains("let site = Location::caller();"))
            .expect("source line shown");
        let caret = lines[src + 1];
        let col = caret.find('^').unwrap() - (src_prefix(lines[src]));
        assert_eq!(&lines[src][src_prefix(lines[src]) + col..][..8], "Location");
        assert!(
            text.contains("= note: scope `step` is at src/train.rs:40:4"),
            "{text}"
        );
        assert!(text.contains("gpuscope::keep(&t)"), "{text}");
    }

    fn src_prefix(line: &str) -> usize {
        line.find(" | ").unwrap() + 3
    }

    #[test]
    fn repeats_in_one_report_fold_into_one_block() {
        let site = Location::caller();
        let report = LeakReport::new(scope(), (0..1000).map(|_| record(site, 262144)).collect());
        let text = render(&report, &mut |_, n, bytes| {
            assert_eq!((n, bytes), (1000, 1000 * 262144));
            Fold::First
        });
        assert_eq!(text.matches("warning:").count(), 1, "{text}");
        assert!(
            text.contains("1000 tensors leaked from scope `step`, ×1000 at"),
            "{text}"
        );
        assert!(text.contains("250.00 MiB in all"), "{text}");
    }

    #[test]
    fn later_leaks_print_a_line_at_powers_of_ten() {
        let site: &'static Location<'static> = Location::caller();
        // A site of its own, so other tests' tallies do not count.
        let mut lines = 0;
        let mut texts = Vec::new();
        let mut tallies: HashMap<u32, Tally> = HashMap::new();
        for _ in 0..1000 {
            let report = LeakReport::new(scope(), vec![record(site, 4)]);
            let text = render(&report, &mut |_, n, bytes| {
                let t = tallies.entry(0).or_default();
                let first = t.count == 0;
                t.count += n;
                t.bytes += bytes;
                if first {
                    t.next_line_at = 10;
                    Fold::First
                } else if t.count >= t.next_line_at {
                    t.next_line_at *= 10;
                    Fold::Line {
                        count: t.count,
                        bytes: t.bytes,
                    }
                } else {
                    Fold::Quiet
                }
            });
            if !text.is_empty() {
                lines += 1;
                texts.push(text);
            }
        }
        assert_eq!(lines, 4, "{texts:?}"); // first, ×10, ×100, ×1000
        assert!(texts[3].starts_with("warning: ×1000 at "), "{}", texts[3]);
        assert!(texts[3].contains("3.91 KiB in all"), "{}", texts[3]);
    }

    #[test]
    fn an_unreadable_file_still_names_the_site() {
        let mut out = String::new();
        snippet(&mut out, "no/such/file.rs", 12, 5, "created here");
        assert_eq!(out, "  --> no/such/file.rs:12:5\n   = created here\n");
    }

    #[test]
    fn tabs_count_as_four_columns() {
        let dir = std::env::temp_dir().join(format!("gpuscope-stderr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tabs.rs");
        std::fs::write(&file, "fn f() {\n\tlet x = make();\n}\n").unwrap();
        let name: &'static str = Box::leak(file.display().to_string().into_boxed_str());
        let mut out = String::new();
        snippet(&mut out, name, 2, 10, "here");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[2], "2 |     let x = make();");
        // `m` of `make` is column 10 (the tab is one character), shown at 4 + 8.
        assert_eq!(lines[3], format!("  | {}^ here", " ".repeat(12)));
        assert_eq!(&lines[2][4 + 12..][..4], "make");
        std::fs::remove_dir_all(&dir).ok();
    }
}
