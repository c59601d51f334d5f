//! Levels written in attributes (`#[gpuscope::lints::allow(..)]`, `#[gpu_scope(allow(..))]`)
//! applied to the code under them while it is walked.

use syn::Attribute;

use super::Walker;
use crate::UNKNOWN_RULE;
use crate::attrs::levels_of;

impl Walker<'_> {
    /// Applies the levels of `attrs` while `walk` runs; reports their errors.
    pub(super) fn with_levels(&mut self, attrs: &[Attribute], walk: impl FnOnce(&mut Self)) {
        let (levels, errors) = levels_of(attrs);
        for error in errors {
            let help =
                "use the name of a gpuscope lint rule: `gpuscope lint --list-rules` lists them"
                    .to_owned();
            self.sink
                .error(UNKNOWN_RULE, error.span(), error.to_string(), help);
        }
        if levels.is_empty() {
            walk(self);
            return;
        }
        let overrides: Vec<_> = levels.iter().map(|arg| (arg.rule, arg.level)).collect();
        self.sink.push(&overrides);
        walk(self);
        self.sink.pop();
    }
}
