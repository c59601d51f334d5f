//! The rules, one module each: its [`Rule`] (name, default level, summary and docs), its
//! [`Check`] implementation and its tests. This module is the registry: [`RULES`] lists the
//! descriptions, [`CHECKS`] the checks, in the same order. Adding a rule means a new module
//! here and one entry in each list (a test checks that they agree).

use crate::check::Check;
use crate::{Level, Levels, Rule, UnknownRule};

mod backward_in_no_grad;
mod empty_cache_in_loop;
mod forget_tensor;
mod graph_accumulation;
mod item_in_hot_loop;
mod missing_zero_grad;
mod out_of_place_update;
mod retain_graph_in_loop;
mod scope_escape;
mod static_escape;

/// Every rule, in the order diagnostics and `gpuscope lint --list-rules` show them.
///
/// ```
/// use gpuscope_lint::{Level, RULES};
///
/// let names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
/// assert_eq!(names[..3], ["forget_tensor", "static_escape", "backward_in_no_grad"]);
/// assert!(RULES.iter().all(|r| !r.summary.is_empty() && !r.docs.is_empty()));
/// assert_eq!(RULES.iter().filter(|r| r.default == Level::Deny).count(), 3);
/// ```
pub const RULES: &[Rule] = &[
    forget_tensor::RULE,
    static_escape::RULE,
    backward_in_no_grad::RULE,
    graph_accumulation::RULE,
    missing_zero_grad::RULE,
    scope_escape::RULE,
    empty_cache_in_loop::RULE,
    retain_graph_in_loop::RULE,
    out_of_place_update::RULE,
    item_in_hot_loop::RULE,
];

/// Every rule's checks, in the order of [`RULES`].
pub(crate) const CHECKS: &[&dyn Check] = &[
    &forget_tensor::ForgetTensor,
    &static_escape::StaticEscape,
    &backward_in_no_grad::BackwardInNoGrad,
    &graph_accumulation::GraphAccumulation,
    &missing_zero_grad::MissingZeroGrad,
    &scope_escape::ScopeEscape,
    &empty_cache_in_loop::EmptyCacheInLoop,
    &retain_graph_in_loop::RetainGraphInLoop,
    &out_of_place_update::OutOfPlaceUpdate,
    &item_in_hot_loop::ItemInHotLoop,
];

/// The rule named `name`, if there is one.
///
/// ```
/// assert_eq!(gpuscope_lint::rule("static_escape").map(|r| r.name), Some("static_escape"));
/// ```
pub fn rule(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.name == name)
}

impl Default for Levels {
    /// Every rule of [`RULES`] at its default level.
    fn default() -> Self {
        Levels::of_rules(RULES, None)
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
        Levels::of_rules(RULES, Some(level))
    }
}

impl UnknownRule {
    /// The error for `name`, with a suggestion when a known rule is close to it.
    ///
    /// ```
    /// let err = gpuscope_lint::UnknownRule::new("static_escap");
    /// assert_eq!(err.suggestion(), Some("static_escape"));
    /// ```
    pub fn new(name: &str) -> Self {
        UnknownRule::among(name, RULES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_and_descriptions_agree() {
        assert_eq!(CHECKS.len(), RULES.len());
        for (check, rule) in CHECKS.iter().zip(RULES) {
            assert_eq!(check.rule(), rule);
        }
        let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RULES.len(), "rule names are unique");
    }
}
