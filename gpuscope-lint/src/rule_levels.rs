//! [`Levels`]: the table of every rule's [`Level`], defaults overridden one rule at a time,
//! and [`UnknownRule`], the error for a rule name that does not exist (with a did-you-mean
//! from `strsim`).

use std::fmt;

use crate::{Level, Rule};

/// The level of each rule in [`RULES`](crate::RULES): every rule's default, unless [`set`](Levels::set).
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
///
/// `Default` and [`Levels::all`] are implemented beside the registry (`rules/mod.rs`), so
/// that this module knows no rule: the arrows run from the rules to their levels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Levels {
    /// The known rules, in the registry's order.
    rules: &'static [Rule],
    /// The level of each, in the same order.
    levels: Vec<Level>,
}

impl Levels {
    /// The levels of `rules`, each at `level` (or its default when `level` is `None`).
    pub(crate) fn of_rules(rules: &'static [Rule], level: Option<Level>) -> Self {
        Levels {
            rules,
            levels: rules.iter().map(|r| level.unwrap_or(r.default)).collect(),
        }
    }

    /// Sets the level of the rule named `rule`.
    ///
    /// # Errors
    /// [`UnknownRule`] when no rule has that name; the levels are unchanged.
    pub fn set(&mut self, rule: &str, level: Level) -> Result<(), UnknownRule> {
        let index = self
            .index_of(rule)
            .ok_or_else(|| UnknownRule::among(rule, self.rules))?;
        self.levels[index] = level;
        Ok(())
    }

    /// The level of the rule named `rule`, or `None` when no rule has that name.
    pub fn get(&self, rule: &str) -> Option<Level> {
        self.index_of(rule).map(|index| self.levels[index])
    }

    /// The level of a rule from [`RULES`](crate::RULES).
    pub(crate) fn of(&self, rule: &Rule) -> Level {
        self.index_of(rule.name)
            .map_or(Level::Allow, |index| self.levels[index])
    }

    /// The level of the rule at `index` of the registry's order.
    pub(crate) fn at(&self, index: usize) -> Level {
        self.levels[index]
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.rules.iter().position(|rule| rule.name == name)
    }

    /// Whether every rule is at `allow` (nothing can be reported).
    pub(crate) fn all_allowed(&self) -> bool {
        self.levels.iter().all(|level| *level == Level::Allow)
    }

    /// Each rule with its level, in the order of [`RULES`](crate::RULES).
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
        self.rules.iter().zip(self.levels.iter().copied())
    }
}

/// The error for a rule name that is not in [`RULES`](crate::RULES). Its message names the
/// known rules and, when one is close enough to be a typo, suggests it. (`UnknownRule::new`
/// is beside the registry, in `rules/mod.rs`.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownRule {
    name: String,
    suggestion: Option<&'static str>,
    known: &'static [Rule],
}

impl UnknownRule {
    /// The error for `name` among `rules`, with a suggestion when one is close to it.
    pub(crate) fn among(name: &str, rules: &'static [Rule]) -> Self {
        let suggestion = rules
            .iter()
            .map(|rule| (strsim::levenshtein(name, rule.name), rule.name))
            .filter(|(distance, rule)| *distance <= (rule.len() / 3).max(2))
            .min_by_key(|(distance, _)| *distance)
            .map(|(_, rule)| rule);
        UnknownRule {
            name: name.to_owned(),
            suggestion,
            known: rules,
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
        for (i, rule) in self.known.iter().enumerate() {
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
    use crate::RULES;

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
