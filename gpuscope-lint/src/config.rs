//! `gpuscope.toml` (feature `config`): rule levels for a whole crate and per path.
//!
//! ```toml
//! [lints]
//! graph_accumulation = "deny"
//! out_of_place_update = "warn"
//!
//! # Globs relative to this file's directory (`*` stays within a directory, `**` crosses).
//! [paths."examples/**"]
//! missing_zero_grad = "allow"
//! ```
//!
//! Every mistake is a [`ConfigError`] naming the file, the line and the column: TOML that
//! does not parse, an unknown table, an unknown rule (with the known rules and a
//! did-you-mean), a level that is not `allow` / `warn` / `deny`, a glob that does not parse.

use std::ops::Range;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use toml_edit::{ImDocument, Item, TableLike};

use crate::rule_levels::UnknownRule;
use crate::{Level, Levels, Rule, rule};

/// A mistake in a config file, with where it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {message}", file.display())]
pub struct ConfigError {
    /// The config file.
    pub file: PathBuf,
    /// 1-based line (0 when the file could not be read).
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong and what to do.
    pub message: String,
}

/// The levels of one `[paths."glob"]` table.
#[derive(Clone, Debug)]
struct PathLevels {
    matcher: GlobMatcher,
    levels: Vec<(&'static Rule, Level)>,
}

/// A parsed `gpuscope.toml`.
///
/// ```
/// use std::path::Path;
/// use gpuscope_lint::{Level, Levels, config::Config};
///
/// let text = "[lints]\ngraph_accumulation = \"deny\"\n\n[paths.\"examples/**\"]\ngraph_accumulation = \"allow\"\n";
/// let config = Config::parse(text, Path::new("crate/gpuscope.toml")).unwrap();
/// let base = config.apply(Levels::default());
/// assert_eq!(base.get("graph_accumulation"), Some(Level::Deny));
/// let example = config.levels_for(&base, Path::new("crate/examples/train.rs"));
/// assert_eq!(example.get("graph_accumulation"), Some(Level::Allow));
/// let src = config.levels_for(&base, Path::new("crate/src/lib.rs"));
/// assert_eq!(src.get("graph_accumulation"), Some(Level::Deny));
///
/// let err = Config::parse("[lints]\ngraph_acumulation = \"deny\"\n", Path::new("gpuscope.toml")).unwrap_err();
/// assert_eq!((err.line, err.column), (2, 1));
/// assert!(err.to_string().starts_with("gpuscope.toml:2:1: unknown lint rule `graph_acumulation`; did you mean `graph_accumulation`?"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The directory path globs are relative to.
    root: PathBuf,
    lints: Vec<(&'static Rule, Level)>,
    paths: Vec<PathLevels>,
}

impl Config {
    /// Reads and parses the config file `file`.
    ///
    /// # Errors
    /// The file cannot be read (line 0), or [`Config::parse`] fails.
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(file).map_err(|e| ConfigError {
            file: file.to_owned(),
            line: 0,
            column: 0,
            message: format!("cannot read the config file: {e}"),
        })?;
        Config::parse(&text, file)
    }

    /// Parses the text of config file `file` (named in errors; its directory is what path
    /// globs are relative to).
    ///
    /// # Errors
    /// A [`ConfigError`] for the first mistake, with its line and column.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let error = |span: Option<Range<usize>>, message: String| {
            let (line, column) = line_column(text, span.map_or(0, |s| s.start));
            ConfigError {
                file: file.to_owned(),
                line,
                column,
                message,
            }
        };
        let doc = ImDocument::parse(text).map_err(|e| {
            error(
                e.span(),
                format!("invalid TOML: {}", e.message().trim_end()),
            )
        })?;
        let mut config = Config {
            root: file.parent().unwrap_or(Path::new("")).to_owned(),
            ..Config::default()
        };
        let top = doc.as_table();
        for (key, item) in top.iter() {
            let key_span = top.get_key_value(key).and_then(|(k, _)| k.span());
            match key {
                "lints" => {
                    let table = as_table(item, "lints", key_span.clone(), &error)?;
                    config.lints = levels(table, "[lints]", &error)?;
                }
                "paths" => {
                    let paths = as_table(item, "paths", key_span.clone(), &error)?;
                    for (glob, table) in paths.iter() {
                        let glob_span = paths.get_key_value(glob).and_then(|(k, _)| k.span());
                        let matcher = GlobBuilder::new(glob)
                            .literal_separator(true)
                            .build()
                            .map_err(|e| {
                                error(
                                    glob_span.clone(),
                                    format!("[paths] `{glob}` is not a glob: {e}"),
                                )
                            })?
                            .compile_matcher();
                        let section = format!("[paths.\"{glob}\"]");
                        let table = as_table(table, &section, glob_span, &error)?;
                        let levels = levels(table, &section, &error)?;
                        config.paths.push(PathLevels { matcher, levels });
                    }
                }
                other => {
                    return Err(error(
                        key_span,
                        format!(
                            "unknown table `{other}`: `gpuscope.toml` has a `[lints]` table and `[paths.\"glob\"]` tables"
                        ),
                    ));
                }
            }
        }
        Ok(config)
    }

    /// `base` with the `[lints]` table applied.
    pub fn apply(&self, mut base: Levels) -> Levels {
        for (rule, level) in &self.lints {
            let _ = base.set(rule.name, *level);
        }
        base
    }

    /// `base` with the `[paths."glob"]` tables whose glob matches `file` applied, in the
    /// file's order. `file` is matched relative to the config file's directory; a file
    /// outside that directory gets `base`.
    pub fn levels_for(&self, base: &Levels, file: &Path) -> Levels {
        let mut levels = base.clone();
        if self.paths.is_empty() {
            return levels;
        }
        // A config named without a directory (`gpuscope.toml`) is in the current one.
        let root = if self.root.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.root
        };
        let (Ok(file), Ok(root)) = (std::path::absolute(file), std::path::absolute(root)) else {
            return levels;
        };
        let Ok(relative) = file.strip_prefix(&root) else {
            return levels;
        };
        for section in &self.paths {
            if section.matcher.is_match(relative) {
                for (rule, level) in &section.levels {
                    let _ = levels.set(rule.name, *level);
                }
            }
        }
        levels
    }
}

/// `item` as a table, or an error saying `name` must be one.
fn as_table<'a>(
    item: &'a Item,
    name: &str,
    span: Option<Range<usize>>,
    error: &impl Fn(Option<Range<usize>>, String) -> ConfigError,
) -> Result<&'a dyn TableLike, ConfigError> {
    item.as_table_like()
        .ok_or_else(|| error(span, format!("`{name}` must be a table (`[{name}]`)")))
}

/// Reads a table of `rule = "level"` entries.
fn levels(
    table: &dyn TableLike,
    section: &str,
    error: &impl Fn(Option<Range<usize>>, String) -> ConfigError,
) -> Result<Vec<(&'static Rule, Level)>, ConfigError> {
    let mut out = Vec::new();
    for (name, value) in table.iter() {
        let key_span = table.get_key_value(name).and_then(|(k, _)| k.span());
        let rule = rule(name).ok_or_else(|| error(key_span, UnknownRule::new(name).to_string()))?;
        let value_span = value.span();
        let word = value.as_str().ok_or_else(|| {
            let shown = value.to_string();
            error(
                value_span.clone(),
                format!(
                    "{section} {name} = {}: expected a string, one of \"allow\", \"warn\", \"deny\"",
                    shown.trim()
                ),
            )
        })?;
        let level: Level = word
            .parse()
            .map_err(|e| error(value_span, format!("{section} {name}: {e}")))?;
        out.push((rule, level));
    }
    Ok(out)
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, index: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, mut index: usize) -> usize {
        while !self.is_char_boundary(index) {
            index -= 1;
        }
        index
    }
}

/// The name a package's other crates (binaries, tests, examples) use its library by, from
/// the text of its `Cargo.toml`: `[lib] name`, else `[package] name` with `-` as `_`;
/// `None` where the text says neither or is not TOML.
///
/// ```
/// use gpuscope_lint::config::library_name;
///
/// assert_eq!(library_name("[package]\nname = \"mz-train\"\n").as_deref(), Some("mz_train"));
/// assert_eq!(library_name("[package]\nname = \"a\"\n[lib]\nname = \"mz_rs\"\n").as_deref(), Some("mz_rs"));
/// assert_eq!(library_name("[workspace]\nmembers = []\n"), None);
/// ```
pub fn library_name(manifest: &str) -> Option<String> {
    let doc = ImDocument::parse(manifest).ok()?;
    let name = |section: &str| {
        doc.as_table()
            .get(section)?
            .as_table_like()?
            .get("name")?
            .as_str()
            .map(|name| name.replace('-', "_"))
    };
    name("lib").or_else(|| name("package"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("dir/gpuscope.toml"))
    }

    fn err(text: &str) -> ConfigError {
        parse(text).unwrap_err()
    }

    #[test]
    fn lints_table_overrides_levels() {
        let config =
            parse("[lints]\ngraph_accumulation = \"deny\"\nout_of_place_update = \"warn\"\n")
                .unwrap();
        let levels = config.apply(Levels::default());
        assert_eq!(levels.get("graph_accumulation"), Some(Level::Deny));
        assert_eq!(levels.get("out_of_place_update"), Some(Level::Warn));
        assert_eq!(levels.get("forget_tensor"), Some(Level::Deny));
        assert_eq!(
            parse("").unwrap().apply(Levels::default()),
            Levels::default()
        );
    }

    #[test]
    fn errors_name_file_line_column_and_what_to_do() {
        let e = err("[lints]\ngraph_acumulation = \"deny\"\n");
        assert_eq!((e.line, e.column), (2, 1));
        assert!(
            e.message.contains("did you mean `graph_accumulation`?"),
            "{e}"
        );
        assert!(e.message.contains("known rules: forget_tensor"), "{e}");
        let e = err("[lints]\nforget_tensor = \"loud\"\n");
        assert_eq!((e.line, e.column), (2, 17));
        assert!(e.message.contains("`allow`, `warn`, `deny`"), "{e}");
        let e = err("[lints]\n\nforget_tensor = 3\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("expected a string"), "{e}");
        let e = err("[lints\n");
        assert_eq!(e.line, 1);
        assert!(e.message.starts_with("invalid TOML"), "{e}");
        let e = err("lints = 1\n");
        assert_eq!(e.line, 1);
        let e = err("[lints]\n[lint]\nforget_tensor = \"warn\"\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("unknown table `lint`"), "{e}");
        let e = err("[paths.\"src/[\"]\nforget_tensor = \"warn\"\n");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("is not a glob"), "{e}");
        let e = err("[paths.\"src/**\"]\nforget_tensr = \"warn\"\n");
        assert_eq!(e.line, 2);
        assert!(
            e.to_string()
                .starts_with("dir/gpuscope.toml:2:1: unknown lint rule"),
            "{e}"
        );
    }

    #[test]
    fn path_tables_apply_to_matching_files_only() {
        let config = parse(
            "[paths.\"examples/**\"]\nmissing_zero_grad = \"allow\"\n[paths.\"src/*.rs\"]\nforget_tensor = \"warn\"\n",
        )
        .unwrap();
        let base = Levels::default();
        let at = |p: &str| config.levels_for(&base, Path::new(p));
        assert_eq!(
            at("dir/examples/a/b.rs").get("missing_zero_grad"),
            Some(Level::Allow)
        );
        assert_eq!(at("dir/src/lib.rs").get("forget_tensor"), Some(Level::Warn));
        assert_eq!(
            at("dir/src/deep/lib.rs").get("forget_tensor"),
            Some(Level::Deny)
        );
        assert_eq!(
            at("other/examples/a.rs").get("missing_zero_grad"),
            Some(Level::Warn)
        );
        assert_eq!(
            at("dir/./examples/a.rs").get("missing_zero_grad"),
            Some(Level::Allow)
        );
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(line_column("é = 1\nab", 0), (1, 1));
        assert_eq!(line_column("é = 1\nab", 7), (2, 1));
        assert_eq!(line_column("éx", 2), (1, 2));
        assert_eq!(line_column("éx", 1), (1, 1));
    }
}
