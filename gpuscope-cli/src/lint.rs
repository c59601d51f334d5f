//! `gpuscope lint`: runs gpuscope's GPU-memory lint rules (crate `gpuscope-lint`) over
//! every `.rs` file under the given paths and prints rustc-style diagnostics, JSON or SARIF.
//!
//! - Paths (default `.`) are walked with the `ignore` crate: `.gitignore`, `.ignore` and
//!   hidden files are honoured, inside a git repository or not. A file named on the command
//!   line is linted whatever its name.
//! - Levels come from the rules' defaults, then the `[lints]` table of a config file
//!   (`--config FILE`, else `gpuscope.toml` in the first path's directory, else in the current
//!   directory), then `-A` / `-W` / `-D RULE` on the command line:
//!
//!   ```toml
//!   [lints]
//!   graph_accumulation = "deny"
//!   out_of_place_update = "warn"
//!   ```
//! - Exit code: 1 when a deny finding exists or a file does not parse, 0 otherwise, 2 on a
//!   usage or config error (unknown rule, bad level, missing path).
//! - Files are read, parsed and linted on all cores (`-j N` for N threads); output is in
//!   path order whatever the thread count.
//!
//! # As a cargo subcommand
//!
//! `cargo gpuscope lint ..` runs a binary named `cargo-gpuscope` with the arguments
//! `gpuscope lint ..`: cargo repeats the subcommand's name. `src/bin/cargo-gpuscope.rs`
//! is that binary (it calls the same `main` as `gpuscope`), and `main` parses the command
//! line through [`cargo_subcommand_args`], which drops the repeat.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use annotate_snippets::{Level as Annotation, Renderer, Snippet};
use clap::ValueEnum;
use gpuscope_lint::{Level, Levels, RULES, lint_file};
use serde::Serialize;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// rustc-style diagnostics with source snippets, then a summary line.
    Text,
    /// A JSON array of findings: rule, level, file, line, column, message, help.
    Json,
    /// SARIF 2.1.0, for code-scanning services.
    Sarif,
}

/// When text output is colored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Color {
    /// When standard output is a terminal and `NO_COLOR` is unset.
    Auto,
    Always,
    Never,
}

#[derive(clap::Args)]
pub struct Args {
    /// Files and directories to lint; directories are walked for `.rs` files, honouring `.gitignore`.
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// A TOML file with a `[lints]` table of rule levels (default: `gpuscope.toml` in the first
    /// path's directory, else in the current directory, when present).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Set a rule to `allow`, after the config file (repeatable).
    #[arg(short = 'A', long = "allow", value_name = "RULE")]
    allow: Vec<String>,
    /// Set a rule to `warn`, after the config file (repeatable).
    #[arg(short = 'W', long = "warn", value_name = "RULE")]
    warn: Vec<String>,
    /// Set a rule to `deny`, after the config file (repeatable).
    #[arg(short = 'D', long = "deny", value_name = "RULE")]
    deny: Vec<String>,
    /// Colors in text output.
    #[arg(long, value_enum, default_value = "auto")]
    color: Color,
    /// Threads that read, parse and lint files (default: one per core).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Print the rules with their levels (after the config and flags) and exit.
    #[arg(long)]
    list_rules: bool,
}

/// The exit code of a usage or config error.
const USAGE_ERROR: u8 = 2;

/// The name of the pseudo-rule under which files that do not parse are reported.
const PARSE: &str = "parse";

pub fn run(args: Args) -> Result<ExitCode, String> {
    let levels = match levels(&args) {
        Ok(levels) => levels,
        Err(message) => return Ok(usage_error(&message)),
    };
    if args.list_rules {
        print_rules(&levels);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(missing) = args.paths.iter().find(|p| !p.exists()) {
        return Ok(usage_error(&format!(
            "no such file or directory: {}",
            missing.display()
        )));
    }
    let files = collect_files(&args.paths);
    let jobs = args.jobs.map(usize::from);
    let reports = lint_all(&files, &levels, jobs);

    let mut out = std::io::stdout().lock();
    let written = match args.format {
        Format::Text => write_text(&mut out, &reports, use_color(args.color)),
        Format::Json => write_json(&mut out, &reports),
        Format::Sarif => write_sarif(&mut out, &reports, &levels),
    };
    written.map_err(|e| format!("cannot write the report: {e}"))?;

    let failed = reports
        .iter()
        .any(|r| r.read_error.is_some() || r.diags.iter().any(|d| d.level == Level::Deny));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(USAGE_ERROR)
}

/// The rules' levels: defaults, then the config file, then `-A` / `-W` / `-D`.
fn levels(args: &Args) -> Result<Levels, String> {
    let mut levels = Levels::default();
    let config = match &args.config {
        Some(path) => Some(path.clone()),
        None => default_config(&args.paths),
    };
    if let Some(path) = config {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        apply_config(&text, &path, &mut levels)?;
    }
    for (names, level) in [
        (&args.allow, Level::Allow),
        (&args.warn, Level::Warn),
        (&args.deny, Level::Deny),
    ] {
        for name in names {
            levels
                .set(name, level)
                .map_err(|e| format!("-{} {name}: {e}", flag_letter(level)))?;
        }
    }
    Ok(levels)
}

fn flag_letter(level: Level) -> char {
    match level {
        Level::Allow => 'A',
        Level::Warn => 'W',
        Level::Deny => 'D',
    }
}

/// `gpuscope.toml` in the first path's directory (the path itself, or a file's parent), else in
/// the current directory, when it exists.
fn default_config(paths: &[PathBuf]) -> Option<PathBuf> {
    let first = paths.first().map(|p| {
        if p.is_dir() {
            p.clone()
        } else {
            p.parent().unwrap_or(Path::new(".")).to_path_buf()
        }
    });
    [first, Some(PathBuf::from("."))]
        .into_iter()
        .flatten()
        .map(|dir| dir.join("gpuscope.toml"))
        .find(|candidate| candidate.is_file())
}

/// Applies the `[lints]` table of config file `path` (contents `text`) to `levels`. Other
/// tables are left for other tools.
fn apply_config(text: &str, path: &Path, levels: &mut Levels) -> Result<(), String> {
    let file = path.display();
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{file}: invalid TOML: {e}"))?;
    let Some(lints) = table.get("lints") else {
        return Ok(());
    };
    let lints = lints
        .as_table()
        .ok_or_else(|| format!("{file}: `lints` must be a table (`[lints]`)"))?;
    for (key, value) in lints {
        let word = value.as_str().ok_or_else(|| {
            format!("{file}: [lints] {key} = {value}: expected a string, one of \"allow\", \"warn\", \"deny\"")
        })?;
        let level: Level = word
            .parse()
            .map_err(|e| format!("{file}: [lints] {key}: {e}"))?;
        levels
            .set(key, level)
            .map_err(|e| format!("{file}: [lints] {key}: {e}"))?;
    }
    Ok(())
}

fn print_rules(levels: &Levels) {
    let width = RULES.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for (rule, level) in levels.iter() {
        println!(
            "{:width$}  {:5}  {}",
            rule.name,
            level.as_str(),
            rule.summary
        );
    }
}

/// The files to lint under `paths`, sorted: every `.rs` file the walk keeps, and every file
/// named directly.
fn collect_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = BTreeSet::new();
    for root in paths {
        let walk = ignore::WalkBuilder::new(root).require_git(false).build();
        for entry in walk {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    eprintln!("warning: {e}");
                    continue;
                }
            };
            let is_file = entry.file_type().is_some_and(|t| t.is_file());
            let is_rust = entry.path().extension().is_some_and(|ext| ext == "rs");
            if is_file && (is_rust || entry.depth() == 0) {
                files.insert(entry.into_path());
            }
        }
    }
    files.into_iter().collect()
}

/// A finding as printed: positions resolved (1-based line and column, in characters), owned
/// text. Spans only resolve on the thread that parsed the file, so workers make these.
struct Diag {
    rule: &'static str,
    level: Level,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    message: String,
    help: String,
}

/// The outcome for one file.
struct Report {
    /// The path as shown: as walked, without a leading `./`.
    file: String,
    source: String,
    diags: Vec<Diag>,
    read_error: Option<String>,
}

fn display_path(path: &Path) -> String {
    let shown = path.strip_prefix(".").unwrap_or(path);
    let text = shown.to_string_lossy();
    if text.is_empty() {
        path.to_string_lossy().into_owned()
    } else {
        text.into_owned()
    }
}

/// Lints `files` on `jobs` threads (default: one per core); reports in the order of `files`.
fn lint_all(files: &[PathBuf], levels: &Levels, jobs: Option<usize>) -> Vec<Report> {
    let threads = jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(files.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let mut reports: Vec<Option<Report>> = files.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = files.get(i) else { break };
                        done.push((i, lint_one(path, levels)));
                    }
                    done
                })
            })
            .collect();
        for worker in workers {
            match worker.join() {
                Ok(done) => done
                    .into_iter()
                    .for_each(|(i, report)| reports[i] = Some(report)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    reports.into_iter().flatten().collect()
}

fn lint_one(path: &Path, levels: &Levels) -> Report {
    let file = display_path(path);
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            return Report {
                file,
                source: String::new(),
                diags: Vec::new(),
                read_error: Some(e.to_string()),
            };
        }
    };
    let source = match String::from_utf8(bytes) {
        Ok(mut source) => {
            if source.starts_with('\u{feff}') {
                source.drain(..'\u{feff}'.len_utf8());
            }
            source
        }
        Err(_) => {
            let diag = Diag {
                rule: PARSE,
                level: Level::Deny,
                line: 1,
                column: 1,
                end_line: 1,
                end_column: 1,
                message: format!("`{file}` is not valid UTF-8"),
                help: "save the file as UTF-8; it was not linted".to_owned(),
            };
            return Report {
                file,
                source: String::new(),
                diags: vec![diag],
                read_error: None,
            };
        }
    };
    let diags = match syn::parse_file(&source) {
        Ok(ast) => lint_file(&ast, levels)
            .into_iter()
            .map(|f| {
                let (start, end) = (f.span.start(), f.span.end());
                Diag {
                    rule: f.rule,
                    level: f.level,
                    line: start.line,
                    column: start.column + 1,
                    end_line: end.line,
                    end_column: end.column + 1,
                    message: f.message,
                    help: f.help,
                }
            })
            .collect(),
        Err(e) => {
            let start = e.span().start();
            let end = e.span().end();
            vec![Diag {
                rule: PARSE,
                level: Level::Deny,
                line: start.line.max(1),
                column: start.column + 1,
                end_line: end.line.max(1),
                end_column: end.column + 1,
                message: format!("`{file}` does not parse: {e}"),
                help: "fix the syntax error; the rest of this file was not linted".to_owned(),
            }]
        }
    };
    Report {
        file,
        source,
        diags,
        read_error: None,
    }
}

fn use_color(choice: Color) -> bool {
    match choice {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    }
}

fn write_text(
    out: &mut impl std::io::Write,
    reports: &[Report],
    color: bool,
) -> std::io::Result<()> {
    let renderer = if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let (mut errors, mut warnings) = (0, 0);
    for report in reports {
        if let Some(e) = &report.read_error {
            errors += 1;
            writeln!(out, "error: cannot read {}: {e}\n", report.file)?;
        }
        for diag in &report.diags {
            match diag.level {
                Level::Deny => errors += 1,
                _ => warnings += 1,
            }
            writeln!(out, "{}\n", render(&renderer, report, diag))?;
        }
    }
    writeln!(
        out,
        "gpuscope lint: {}, {} in {}",
        plural(errors, "error"),
        plural(warnings, "warning"),
        plural(reports.len(), "file")
    )
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// One diagnostic: `error[rule]: message`, ` --> file:line:col`, the line with the span
/// underlined (to the end of the line when the span goes on), `= help: ..`.
fn render(renderer: &Renderer, report: &Report, diag: &Diag) -> String {
    let level = if diag.level == Level::Deny {
        Annotation::Error
    } else {
        Annotation::Warning
    };
    let line = report.source.lines().nth(diag.line - 1).unwrap_or("");
    let byte_at = |column: usize| {
        line.char_indices()
            .nth(column - 1)
            .map_or(line.len(), |(i, _)| i)
    };
    let start = byte_at(diag.column.max(1));
    let mut end = if diag.end_line == diag.line {
        byte_at(diag.end_column.max(1))
    } else {
        line.trim_end().len()
    };
    if end <= start {
        end = line[start..]
            .chars()
            .next()
            .map_or(start, |c| start + c.len_utf8());
    }
    let mut snippet = Snippet::source(line)
        .line_start(diag.line)
        .origin(&report.file);
    if end > start {
        snippet = snippet.annotation(level.span(start..end));
    }
    let message = level
        .title(&diag.message)
        .id(diag.rule)
        .snippet(snippet)
        .footer(Annotation::Help.title(&diag.help));
    renderer.render(message).to_string()
}

/// A finding in `--format json`.
#[derive(Serialize)]
struct JsonFinding<'a> {
    rule: &'a str,
    level: &'a str,
    file: &'a str,
    line: usize,
    column: usize,
    message: &'a str,
    help: &'a str,
}

fn json_findings(reports: &[Report]) -> impl Iterator<Item = JsonFinding<'_>> {
    reports.iter().flat_map(|report| {
        report.diags.iter().map(|d| JsonFinding {
            rule: d.rule,
            level: d.level.as_str(),
            file: &report.file,
            line: d.line,
            column: d.column,
            message: &d.message,
            help: &d.help,
        })
    })
}

fn write_json(out: &mut impl std::io::Write, reports: &[Report]) -> std::io::Result<()> {
    for report in reports {
        if let Some(e) = &report.read_error {
            eprintln!("error: cannot read {}: {e}", report.file);
        }
    }
    let findings: Vec<JsonFinding<'_>> = json_findings(reports).collect();
    serde_json::to_writer_pretty(&mut *out, &findings)?;
    writeln!(out)
}

fn sarif_level(level: Level) -> &'static str {
    match level {
        Level::Deny => "error",
        Level::Warn => "warning",
        Level::Allow => "note",
    }
}

/// A relative path as a SARIF URI: `/` separators, unsafe characters percent-encoded.
fn sarif_uri(file: &str) -> String {
    let mut uri = String::new();
    for byte in file.replace('\\', "/").bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                uri.push(char::from(byte))
            }
            _ => {
                let _ = write!(uri, "%{byte:02X}");
            }
        }
    }
    uri
}

fn write_sarif(
    out: &mut impl std::io::Write,
    reports: &[Report],
    levels: &Levels,
) -> std::io::Result<()> {
    let mut rules: Vec<serde_json::Value> = levels
        .iter()
        .map(|(rule, level)| {
            serde_json::json!({
                "id": rule.name,
                "shortDescription": { "text": rule.summary },
                "defaultConfiguration": { "level": sarif_level(level), "enabled": level != Level::Allow },
            })
        })
        .collect();
    rules.push(serde_json::json!({
        "id": PARSE,
        "shortDescription": { "text": "the file does not parse as Rust, so it was not linted" },
        "defaultConfiguration": { "level": "error" },
    }));
    let rule_index = |name: &str| {
        RULES
            .iter()
            .position(|r| r.name == name)
            .unwrap_or(RULES.len())
    };
    let mut results = Vec::new();
    for report in reports {
        if let Some(e) = &report.read_error {
            eprintln!("error: cannot read {}: {e}", report.file);
        }
        for d in &report.diags {
            results.push(serde_json::json!({
                "ruleId": d.rule,
                "ruleIndex": rule_index(d.rule),
                "level": sarif_level(d.level),
                "message": { "text": format!("{} (help: {})", d.message, d.help) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": sarif_uri(&report.file) },
                        "region": {
                            "startLine": d.line,
                            "startColumn": d.column,
                            "endLine": d.end_line,
                            "endColumn": d.end_column,
                        },
                    },
                }],
            }));
        }
    }
    let sarif = serde_json::json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "gpuscope",
                    "version": env!("CARGO_PKG_VERSION"),
                    "informationUri": env!("CARGO_PKG_REPOSITORY"),
                    "rules": rules,
                },
            },
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    serde_json::to_writer_pretty(&mut *out, &sarif)?;
    writeln!(out)
}

/// The command line as a `cargo-gpuscope` binary receives it from `cargo gpuscope lint ..`
/// (`cargo-gpuscope gpuscope lint ..`), without the repeated `gpuscope`; any other command
/// line unchanged. See the module documentation.
pub fn cargo_subcommand_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    if args.get(1).is_some_and(|a| a == "gpuscope") {
        args.remove(1);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<Levels, String> {
        let mut levels = Levels::default();
        apply_config(text, Path::new("gpuscope.toml"), &mut levels).map(|()| levels)
    }

    #[test]
    fn config_overrides_levels() {
        let levels =
            config("[lints]\ngraph_accumulation = \"deny\"\nout_of_place_update = \"warn\"\n")
                .unwrap();
        assert_eq!(levels.get("graph_accumulation"), Some(Level::Deny));
        assert_eq!(levels.get("out_of_place_update"), Some(Level::Warn));
        assert_eq!(levels.get("forget_tensor"), Some(Level::Deny));
        assert_eq!(config("[other]\nx = 1\n").unwrap(), Levels::default());
    }

    #[test]
    fn config_errors_name_file_key_and_accepted_values() {
        let err = config("[lints]\ngraph_acumulation = \"deny\"\n").unwrap_err();
        assert!(
            err.starts_with("gpuscope.toml: [lints] graph_acumulation: unknown lint rule"),
            "{err}"
        );
        assert!(err.contains("did you mean `graph_accumulation`?"), "{err}");
        let err = config("[lints]\nforget_tensor = \"loud\"\n").unwrap_err();
        assert!(
            err.contains("forget_tensor") && err.contains("`allow`, `warn`, `deny`"),
            "{err}"
        );
        let err = config("[lints]\nforget_tensor = 3\n").unwrap_err();
        assert!(err.contains("expected a string"), "{err}");
        let err = config("lints = 1\n").unwrap_err();
        assert!(err.contains("must be a table"), "{err}");
        let err = config("[lints\n").unwrap_err();
        assert!(err.starts_with("gpuscope.toml: invalid TOML"), "{err}");
    }

    #[test]
    fn cargo_args_drop_the_repeated_subcommand() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            cargo_subcommand_args(args(&["cargo-gpuscope", "gpuscope", "lint"])),
            args(&["cargo-gpuscope", "lint"])
        );
        assert_eq!(
            cargo_subcommand_args(args(&["gpuscope", "lint", "gpuscope"])),
            args(&["gpuscope", "lint", "gpuscope"])
        );
    }

    #[test]
    fn sarif_uris_are_escaped() {
        assert_eq!(sarif_uri("src/my file.rs"), "src/my%20file.rs");
        assert_eq!(sarif_uri("a\\b.rs"), "a/b.rs");
    }

    #[test]
    fn plurals() {
        assert_eq!(plural(1, "error"), "1 error");
        assert_eq!(plural(0, "warning"), "0 warnings");
    }
}
