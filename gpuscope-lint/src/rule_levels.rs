//! [`Levels`]: the table of every rule's [`Level`], defaults overridden one rule at a time,
//! and [`UnknownRule`], the error for a rule name that does not exist (with a did-you-mean
//! from `strsim`).

use std::fmt;

use crate::{Level, RULES, Rule};

/// The level of each rule in [`RULES`]: every rule's default, unless [`set`](Levels::set).
///
/// ```
/// use gpuscope_lint::{Level, Levels};
///
/// let mut levels = Levels::default();
/// assert_eq!(levels.get("graph_accumulation"), Some(Level::Warn));
/// levels.set("graph_accumulation", Level::Deny)?;
/// assert_eq!(levels.get("graph_accumulation"), Some(Level::Deny));
///
/// let err = levels.set("graph_acumulation", Level::Deny).unwrap_err();
/// assert_eq!(err.suggestion(), Some("graph_accumulation"));
/// assert!(err.to_string().contains("did you mean `graph_accumulation`?"));
/// # Ok::<(), gpuscope_lint::UnknownRule>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Levels {
    levels: [Level; RULES.len()],
}

impl Default for Levels {
    fn default() -> Self {
        let mut levels = [Level::Allow; RULES.len()];
        for (slot, rule) in levels.iter_mut().zip(RULES) {
            *slot = rule.default;
        }
        Levels { levels }
    }
}

impl Levels {
    /// Every rule at `level`, whatever its default (for example `Levels::all(Level::Warn)` to
    /// see everything without failing).
    ///
    /// ```
    /// use gpuscope_lint::{Level, Levels, RULES};
    ///
    /// let levels = Levels::all(Level::Warn);
    /// assert!(RULES.iter().all(|rule| levels.get(rule.name) == Some(Level::Warn)));
    /// ```
    pub fn all(level: Level) -> Self {
        Levels {
            levels: [level; RULES.len()],
        }
    }

    /// Sets the level of the rule named `rule`.
    ///
    /// # Errors
    /// [`UnknownRule`] when no rule has that name; the levels are unchanged.
    pub fn set(&mut self, rule: &str, level: Level) -> Result<(), UnknownRule> {
        let index = index_of(rule).ok_or_else(|| UnknownRule::new(rule))?;
        self.levels[index] = level;
        Ok(())
    }

    /// The level of the rule named `rule`, or `None` when no rule has that name.
    pub fn get(&self, rule: &str) -> Option<Level> {
        index_of(rule).map(|index| self.levels[index])
    }

    /// The level of a rule from [`RULES`].
    pub(crate) fn of(&self, rule: &Rule) -> Level {
        index_of(rule.name).map_or(Level::Allow, |index| self.levels[index])
    }

    /// Whether every rule is at `allow` (nothing can be reported).
    pub(crate) fn all_allowed(&self) -> bool {
        self.levels.iter().all(|level| *level == Level::Allow)
    }

    /// Each rule with its level, in the order of [`RULES`].
    ///
    /// ```
    /// use gpuscope_lint::{Level, Levels};
    ///
    /// let denied: Vec<&str> = Levels::default()
    ///     .iter()
    ///     .filter(|(_, level)| *level == Level::Deny)
    ///     .map(|(rule, _)| rule.name)
    ///     .collect();
    /// assert!(denied.contains(&"forget_tensor"));
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&'static Rule, Level)> + '_ {
        RULES.iter().zip(self.levels.iter().copied())
    }
}

fn index_of(name: &str) -> Option<usize> {
    RULES.iter().position(|rule| rule.name == name)
}

/// The error for a rule name that is not in [`RULES`]. Its message names the known rules and,
/// when one is close enough to be a typo, suggests it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownRule {
    name: String,
    suggestion: Option<&'static str>,
}

impl UnknownRule {
    /// The error for `name`, with a suggestion when a known rule is close to it.
    ///
    /// ```
    /// let err = gpuscope_lint::UnknownRule::new("static_escap");
    /// assert_eq!(err.suggestion(), Some("static_escape"));
    /// ```
    pub fn new(name: &str) -> Self {
        let suggestion = RULES
            .iter()
            .map(|rule| (strsim::levenshtein(name, rule.name), rule.name))
            .filter(|(distance, rule)| *distance <= (rule.len() / 3).max(2))
            .min_by_key(|(distance, _)| *distance)
            .map(|(_, rule)| rule);
        UnknownRule {
            name: name.to_owned(),
            suggestion,
        }
    }

    /// The name that was not found.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The known rule the name is probably a typo of.
    pub fn suggestion(&self) -> Option<&'static str> {
        self.suggestion
    }
}

impl fmt::Display for UnknownRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown lint rule `{}`", self.name)?;
        if let Some(suggestion) = self.suggestion {
            write!(f, "; did you mean `{suggestion}`?")?;
        }
        f.write_str(" (known rules: ")?;
        for (i, rule) in RULES.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(rule.name)?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownRule {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_rules() {
        let levels = Levels::default();
        for rule in RULES {
            assert_eq!(levels.get(rule.name), Some(rule.default), "{}", rule.name);
        }
        assert_eq!(levels.get("forget_tensor"), Some(Level::Deny));
        assert_eq!(levels.get("graph_accumulation"), Some(Level::Warn));
        assert_eq!(levels.get("out_of_place_update"), Some(Level::Allow));
        assert_eq!(levels.get("nope"), None);
    }

    #[test]
    fn set_overrides_one_rule_only() {
        let mut levels = Levels::default();
        levels.set("out_of_place_update", Level::Warn).unwrap();
        levels.set("forget_tensor", Level::Allow).unwrap();
        assert_eq!(levels.get("out_of_place_update"), Some(Level::Warn));
        assert_eq!(levels.get("forget_tensor"), Some(Level::Allow));
        assert_eq!(levels.get("static_escape"), Some(Level::Deny));
    }

    #[test]
    fn unknown_rule_leaves_levels_unchanged_and_suggests() {
        let mut levels = Levels::default();
        let err = levels.set("forget_tensors", Level::Allow).unwrap_err();
        assert_eq!(levels, Levels::default());
        assert_eq!(err.name(), "forget_tensors");
        assert_eq!(err.suggestion(), Some("forget_tensor"));
        let text = err.to_string();
        assert!(
            text.starts_with("unknown lint rule `forget_tensors`; did you mean `forget_tensor`?"),
            "{text}"
        );
        for rule in RULES {
            assert!(text.contains(rule.name), "{text}");
        }
    }

    #[test]
    fn far_names_get_no_suggestion() {
        let err = Levels::default()
            .set("unused_variables", Level::Deny)
            .unwrap_err();
        assert_eq!(err.suggestion(), None);
        assert!(!err.to_string().contains("did you mean"));
    }
}
