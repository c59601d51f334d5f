//! [`Level`]: how loudly a rule speaks (allow, warn, deny), and parsing it from text.

use std::fmt;
use std::str::FromStr;

/// How a rule's findings are treated.
///
/// Ordered from quietest to loudest, so `Level::Warn < Level::Deny`. Displays and parses as
/// the words used in `gpuscope.toml` and rustc's lint attributes:
///
/// ```
/// use gpuscope_lint::Level;
///
/// assert_eq!("deny".parse::<Level>(), Ok(Level::Deny));
/// assert_eq!(Level::Warn.to_string(), "warn");
/// assert!(Level::Allow < Level::Warn && Level::Warn < Level::Deny);
/// let err = "loud".parse::<Level>().unwrap_err();
/// assert_eq!(err.to_string(), "unknown lint level `loud`: expected one of `allow`, `warn`, `deny`");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The rule is off: its findings are not reported.
    Allow,
    /// Findings are reported as warnings; they do not fail the build or the `gpuscope lint` run.
    Warn,
    /// Findings are errors: a compile error in the macros, exit code 1 from `gpuscope lint`.
    Deny,
}

impl Level {
    /// Every level, quietest first.
    pub const ALL: [Level; 3] = [Level::Allow, Level::Warn, Level::Deny];

    /// The word for this level: `"allow"`, `"warn"` or `"deny"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Level::Allow => "allow",
            Level::Warn => "warn",
            Level::Deny => "deny",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error from parsing a [`Level`] out of a word that is not `allow`, `warn` or `deny`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseLevelError {
    input: String,
}

impl ParseLevelError {
    /// The text that was not a level.
    pub fn input(&self) -> &str {
        &self.input
    }
}

impl fmt::Display for ParseLevelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown lint level `{}`: expected one of `allow`, `warn`, `deny`",
            self.input
        )
    }
}

impl std::error::Error for ParseLevelError {}

impl FromStr for Level {
    type Err = ParseLevelError;

    /// Parses `allow`, `warn` or `deny`, ignoring ASCII case and surrounding whitespace.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let word = s.trim();
        Level::ALL
            .into_iter()
            .find(|level| level.as_str().eq_ignore_ascii_case(word))
            .ok_or_else(|| ParseLevelError {
                input: s.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_level_and_round_trips() {
        for level in Level::ALL {
            assert_eq!(level.to_string().parse::<Level>(), Ok(level));
        }
        assert_eq!(" Deny ".parse::<Level>(), Ok(Level::Deny));
        assert_eq!("WARN".parse::<Level>(), Ok(Level::Warn));
    }

    #[test]
    fn rejects_other_words() {
        for bad in ["", "warning", "error", "forbid", "off", "denyy"] {
            let err = bad.parse::<Level>().unwrap_err();
            assert_eq!(err.input(), bad);
            assert!(err.to_string().contains("`allow`, `warn`, `deny`"), "{err}");
        }
    }

    #[test]
    fn orders_quietest_first() {
        let mut levels = [Level::Deny, Level::Allow, Level::Warn];
        levels.sort();
        assert_eq!(levels, Level::ALL);
    }
}
