//! The examples' `main`: warnings and errors of the `tracing` spans on stderr
//! (`RUST_LOG` overrides the level), then the run, whose error is printed as
//! `error: ...` with a failing exit status.
//!
//! Shared by the `train` and `gpt` examples (`#[path = "common/main_with_errors.rs"]`).

use std::process::ExitCode;

/// Sets up logging, runs `run` and turns its error into `error: ...` and a failure.
pub fn main_with_errors(run: impl FnOnce() -> Result<ExitCode, String>) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
