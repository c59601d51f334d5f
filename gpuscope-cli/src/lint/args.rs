//! The command line of `gpuscope lint`.

use std::path::PathBuf;

use clap::ValueEnum;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// rustc-style diagnostics with source snippets, then a summary line.
    Text,
    /// A JSON array of findings: rule, level, file, line, column, end_line, end_column,
    /// message, help, note.
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
    /// Files and directories to lint; directories are walked for `.rs` files, honouring
    /// `.gitignore` and `.ignore`, skipping hidden files and directories (`.git`, `.plan`:
    /// name one to lint it) and following symbolic links.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// A `gpuscope.toml` with a `[lints]` table and `[paths."glob"]` tables of rule levels
    /// (default: `gpuscope.toml` in the first path's directory, else in the current
    /// directory, when present).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Set a rule to `allow`, after the config file (repeatable).
    #[arg(short = 'A', long = "allow", value_name = "RULE")]
    pub allow: Vec<String>,
    /// Set a rule to `warn`, after the config file (repeatable).
    #[arg(short = 'W', long = "warn", value_name = "RULE")]
    pub warn: Vec<String>,
    /// Set a rule to `deny`, after the config file (repeatable).
    #[arg(short = 'D', long = "deny", value_name = "RULE")]
    pub deny: Vec<String>,
    /// Colors in text output.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: Color,
    /// Threads that read, parse and lint files (default: one per core).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Files larger than this many MiB are reported and not linted.
    #[arg(long, value_name = "MIB", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_file_size: u64,
    /// Print the rules with their levels (after the config and flags) and exit.
    #[arg(long)]
    pub list_rules: bool,
    /// Print a rule's documentation (what it does, why, an example and its fix) and exit.
    #[arg(long, value_name = "RULE")]
    pub explain: Option<String>,
}
