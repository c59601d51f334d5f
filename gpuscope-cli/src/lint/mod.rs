//! `gpuscope lint`: runs gpuscope's GPU-memory lint rules (crate `gpuscope-lint`) over
//! every `.rs` file under the given paths and prints rustc-style diagnostics, JSON or SARIF.
//!
//! - Levels come from the rules' defaults, then `gpuscope.toml` (`--config FILE`, else
//!   `gpuscope.toml` in the first path's directory, else in the current directory): its
//!   `[lints]` table, then the `[paths."glob"]` tables matching the file; then `-A` / `-W` /
//!   `-D RULE` on the command line; then `#[gpuscope::lints::allow(..)]` and
//!   `#[gpu_scope(allow(..))]` attributes in the code, as the macros read them.
//! - Exit code: 1 when an error exists (a deny finding, or a file that could not be linted:
//!   it does not parse, is not UTF-8, nests too deep, is too large, cannot be read, a link
//!   loop), 0 otherwise, 2 on a usage or config error (unknown rule, bad level, bad
//!   `gpuscope.toml`, missing path).
//! - Files are read, parsed and linted on all cores (`-j N` for N threads), each thread
//!   with a stack deep enough for any input; output is in path order whatever the thread
//!   count, and streamed, so memory holds a few files at a time.
//!
//! - The files of one package (a directory `D` with `D/src/lib.rs`, `D/src/main.rs` or
//!   `D/src/bin/` files among those linted, and every file under `D`) are linted together
//!   where `item_in_hot_loop` is on: a read in a helper of one file that a loop of another
//!   repeats through calls is reported too.
//!
//! Where things live: `args.rs` (the command line), `settings.rs` (levels per file:
//! config and flags), `files.rs` (walking), `packages.rs` (the packages linted together),
//! `check.rs` (one file, every outcome a diagnostic), `run.rs` (threads, order, a package's
//! findings across files), `output/` (text, JSON, SARIF), `cargo_args.rs` (`cargo gpuscope`
//! argument rewriting).

mod args;
mod cargo_args;
mod check;
mod files;
mod output;
mod packages;
mod run;
mod settings;

use std::io::Write;
use std::process::ExitCode;

use gpuscope_lint::{Level, Levels, RULES, UnknownRule};

pub use args::Args;
pub use cargo_args::cargo_subcommand_args;

use settings::Settings;

/// The exit code of a usage or config error.
const USAGE_ERROR: u8 = 2;

/// Runs `gpuscope lint` with `args`.
///
/// # Errors
/// The report could not be written, or a lint thread could not be started.
pub fn run(args: Args) -> Result<ExitCode, String> {
    if let Some(name) = &args.explain {
        return Ok(match gpuscope_lint::rule(name) {
            Some(rule) => {
                write!(std::io::stdout().lock(), "{}", rule.docs).map_err(crate::cannot_write)?;
                ExitCode::SUCCESS
            }
            None => usage_error(&format!("--explain {name}: {}", UnknownRule::new(name))),
        });
    }
    let settings = match Settings::from_args(&args) {
        Ok(settings) => settings,
        Err(message) => return Ok(usage_error(&message)),
    };
    if args.list_rules {
        print_rules(&settings.global()).map_err(crate::cannot_write)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(missing) = args.paths.iter().find(|p| !p.exists()) {
        return Ok(usage_error(&format!(
            "no such file or directory: {}",
            missing.display()
        )));
    }
    let inputs = files::collect(&args.paths);
    let packages = packages::group(&inputs, &settings);
    let mut out = output::for_format(args.format, args.color, &settings.global());
    let mut failed = false;
    let mut written = Ok(());
    run::lint_all(
        &inputs,
        &settings,
        &packages,
        args.jobs.map(usize::from),
        args.max_file_size << 20,
        |report| {
            failed |= report.diags.iter().any(|d| d.level == Level::Deny);
            if written.is_ok() {
                written = out.report(&report);
            }
        },
    )?;
    written
        .and_then(|()| out.finish())
        .map_err(crate::cannot_write)?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn usage_error(message: &str) -> ExitCode {
    crate::stderr_line(format_args!("error: {message}"));
    ExitCode::from(USAGE_ERROR)
}

/// The rules and their levels, a line each, through one handle (a reader that stops
/// early, `| head -1`, is an error, not a panic).
fn print_rules(levels: &Levels) -> std::io::Result<()> {
    let width = RULES.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for (rule, level) in levels.iter() {
        writeln!(
            out,
            "{:width$}  {:5}  {}",
            rule.name,
            level.as_str(),
            rule.summary
        )?;
    }
    out.flush()
}
