//! # gpuscope-cli
//!
//! The `gpuscope` command and its `cargo gpuscope` twin, kept apart from the `gpuscope`
//! library so that programs depending on the library compile none of the command's
//! dependencies (clap, ignore, toml, annotate-snippets, serde_json, tracing-subscriber).
//!
//! Where things live:
//! - `replay`: `gpuscope replay`, allocation traces through gpuscope's caching allocator;
//! - `lint`: `gpuscope lint`, gpuscope's lint rules (`gpuscope-lint`) over whole crates;
//! - `view`: `gpuscope view`, the memory viewer page; `view_input` (what it reads),
//!   `view_pytorch`, `view_pickle` and `view_unpickle` (PyTorch snapshot pickles, also
//!   for `replay`);
//! - `compressed`: gzip-compressed inputs of `view` and `replay`, and the other
//!   compressed formats named;
//! - `src/bin/`: the two binaries, both calling [`main`].

mod compressed;
mod lint;
mod replay;
mod view;
mod view_input;
mod view_pickle;
mod view_pytorch;
mod view_unpickle;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Writes a line to standard error, as `eprintln!` does, but a standard error that cannot
/// be written (closed, as when `2>&1 | head` has stopped reading) costs the line only:
/// `eprintln!` would panic and the command would exit 101 rather than with its status.
pub(crate) fn stderr_line(line: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The error of a report that standard output did not take (a reader that stopped early:
/// `| head -1`), for the commands' `Err`: exit status 1 and this line, not a panic.
pub(crate) fn cannot_write(e: std::io::Error) -> String {
    format!("cannot write the report: {e}")
}

#[derive(Parser)]
#[command(
    name = "gpuscope",
    version,
    about = "GPU memory tools: replay allocation traces, lint training code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay allocation traces (CSV: op,id,size,stream) through gpuscope's caching allocator.
    Replay(replay::Args),
    /// Lint Rust sources for GPU-memory mistakes (leaked tensors, graphs kept across iterations, ...).
    Lint(lint::Args),
    /// Write a self-contained HTML page showing a memory snapshot and its history
    /// (gpuscope JSON, an allocation trace CSV, or a PyTorch snapshot pickle).
    View(view::Args),
}

/// Runs the command (also the entry point of `cargo-gpuscope`).
pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GPUSCOPE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // As `cargo gpuscope ..`, cargo runs `cargo-gpuscope gpuscope ..`: drop the repeat.
    let cli = Cli::parse_from(lint::cargo_subcommand_args(std::env::args_os()));
    let result = match cli.command {
        Command::Replay(args) => replay::run(args),
        Command::Lint(args) => lint::run(args),
        Command::View(args) => view::run(args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            stderr_line(format_args!("error: {message}"));
            ExitCode::FAILURE
        }
    }
}

/// Entry points for the fuzz targets in `fuzz/`: not a public API.
#[doc(hidden)]
pub mod fuzzing {
    use crate::view_pytorch::{PytorchSnapshot, decode};

    /// Reads a PyTorch snapshot pickle as `gpuscope view` and `gpuscope replay` do: the
    /// page's snapshots (every device) and the replay trace (their sizes), or the error
    /// the user sees.
    pub fn pytorch_snapshot(bytes: &[u8]) -> Result<(usize, usize), String> {
        let snap = PytorchSnapshot::new(decode(bytes)?, None)?;
        let pages = snap
            .to_snapshots(&snap.devices)
            .map_err(|e| e.to_string())?;
        let _ = snap.skipped_actions(&snap.devices);
        let (trace, _) = snap.to_trace().map_err(|e| e.to_string())?;
        Ok((
            pages.iter().map(|p| p.segments.len()).sum(),
            trace.ops().len(),
        ))
    }

    /// Reads a file's bytes as `gpuscope replay` does after reading it: decompressed if
    /// gzip-compressed (at most 16 MiB), then a trace or a PyTorch snapshot's trace; its
    /// operations, or the error the user sees.
    pub fn replay_input(bytes: &[u8]) -> Result<usize, String> {
        let bytes =
            crate::compressed::decompress(bytes.to_vec(), 16 << 20).map_err(|e| e.to_string())?;
        let (trace, _) = crate::view_input::replay_trace_from_bytes(&bytes, "input")?;
        Ok(trace.ops().len())
    }
}
