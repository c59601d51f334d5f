//! The levels each file is linted at: the rules' defaults, then the config file's `[lints]`
//! and matching `[paths."glob"]` tables, then `-A` / `-W` / `-D` on the command line.
//! (Attributes in the source come last; the lint crate applies those.)

use std::path::{Path, PathBuf};

use gpuscope_lint::config::Config;
use gpuscope_lint::{Level, Levels};

use super::args::Args;

/// The levels in force, per file.
pub struct Settings {
    /// Defaults and `[lints]`.
    base: Levels,
    config: Option<Config>,
    /// `-A` / `-W` / `-D`, in that order.
    flags: Vec<(String, Level)>,
}

impl Settings {
    /// Reads the config file (`--config`, else the default one when present) and checks the
    /// flags' rule names.
    ///
    /// # Errors
    /// A message for the user: the config's file, line, column and mistake, or the flag
    /// naming an unknown rule (with the known rules).
    pub fn from_args(args: &Args) -> Result<Settings, String> {
        let path = match &args.config {
            Some(path) => Some(path.clone()),
            None => default_config(&args.paths),
        };
        let config = match path {
            Some(path) => Some(Config::load(&path).map_err(|e| e.to_string())?),
            None => None,
        };
        let base = match &config {
            Some(config) => config.apply(Levels::default()),
            None => Levels::default(),
        };
        let mut flags = Vec::new();
        let mut check = base.clone();
        for (names, level) in [
            (&args.allow, Level::Allow),
            (&args.warn, Level::Warn),
            (&args.deny, Level::Deny),
        ] {
            for name in names {
                check
                    .set(name, level)
                    .map_err(|e| format!("-{} {name}: {e}", flag_letter(level)))?;
                flags.push((name.clone(), level));
            }
        }
        Ok(Settings {
            base,
            config,
            flags,
        })
    }

    /// The levels for `file`.
    pub fn levels_for(&self, file: &Path) -> Levels {
        let mut levels = match &self.config {
            Some(config) => config.levels_for(&self.base, file),
            None => self.base.clone(),
        };
        for (name, level) in &self.flags {
            let _ = levels.set(name, *level);
        }
        levels
    }

    /// The levels outside any `[paths]` table (for `--list-rules` and SARIF's rule list).
    pub fn global(&self) -> Levels {
        let mut levels = self.base.clone();
        for (name, level) in &self.flags {
            let _ = levels.set(name, *level);
        }
        levels
    }
}

fn flag_letter(level: Level) -> char {
    match level {
        Level::Allow => 'A',
        Level::Warn => 'W',
        Level::Deny => 'D',
    }
}

/// `gpuscope.toml` in the first path's directory (the path itself, or a file's parent), else
/// in the current directory, when it exists.
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
        .map(|dir| {
            // `gpuscope.toml` rather than `./gpuscope.toml` in messages.
            if dir == Path::new(".") || dir.as_os_str().is_empty() {
                PathBuf::from("gpuscope.toml")
            } else {
                dir.join("gpuscope.toml")
            }
        })
        .find(|candidate| candidate.is_file())
}
