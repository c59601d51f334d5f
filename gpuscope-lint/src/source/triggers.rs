//! Whether a file can give any finding at the levels in force: the trigger words of the
//! enabled rules ([`Check::triggers`](crate::check::Check::triggers)) and of the attributes
//! that set levels, matched against the file's identifiers as the scan hands them over.
//! A file with none of them is parsed (so its syntax errors are still reported) but not
//! walked.

use crate::Levels;
use crate::check::Trigger;
use crate::rules::CHECKS;
use crate::syntax::is_screaming_case;

/// The words that make the walker report without any rule: the attributes that set levels
/// (`#[gpuscope::lints::allow(..)]`, `#[gpuscope_macros::allow(..)]`, `#[gpu_scope(..)]`,
/// `#[no_grad(..)]`), whose unknown rule names are errors.
const ATTRIBUTES: &[Trigger] = &[
    Trigger::Part("lints"),
    Trigger::Part("gpuscope_macros"),
    Trigger::Part("gpu_scope"),
    Trigger::Part("no_grad"),
];

/// The trigger words in force, and whether one was seen.
pub(super) struct Triggers {
    /// `Part` words, in lowercase.
    parts: Vec<&'static [u8]>,
    /// For each lowercase byte, the `parts` that start with it (bit `i` for `parts[i]`).
    starts: [u64; 256],
    keywords: Vec<&'static str>,
    screaming_root: bool,
    found: bool,
}

impl Triggers {
    /// The triggers of the rules enabled in `levels` and of the level attributes; `None`
    /// when an enabled rule declares none (every file must be walked).
    pub(super) fn of(levels: &Levels) -> Option<Triggers> {
        let mut triggers = Triggers {
            parts: Vec::new(),
            starts: [0; 256],
            keywords: Vec::new(),
            screaming_root: false,
            found: false,
        };
        triggers.add(ATTRIBUTES);
        for (index, check) in CHECKS.iter().enumerate() {
            if levels.at(index) != crate::Level::Allow {
                triggers.add(check.triggers()?);
            }
        }
        Some(triggers)
    }

    fn add(&mut self, triggers: &[Trigger]) {
        for trigger in triggers {
            match *trigger {
                Trigger::Part(part) => {
                    debug_assert!(!part.is_empty() && part == part.to_ascii_lowercase());
                    if self.parts.contains(&part.as_bytes()) {
                        continue;
                    }
                    assert!(self.parts.len() < 64, "at most 64 trigger words");
                    self.starts[usize::from(part.as_bytes()[0])] |= 1 << self.parts.len();
                    self.parts.push(part.as_bytes());
                }
                Trigger::Keyword(keyword) => self.keywords.push(keyword),
                Trigger::ScreamingRoot => self.screaming_root = true,
            }
        }
    }

    /// Whether a trigger was among the identifiers seen so far.
    pub(super) fn found(&self) -> bool {
        self.found
    }

    /// Looks at identifier `ident`, followed in the text by `rest`.
    pub(super) fn ident(&mut self, ident: &str, rest: &str) {
        if self.found {
            return;
        }
        self.found = self.keywords.contains(&ident)
            || self.has_part(ident.as_bytes())
            || (self.screaming_root && is_screaming_case(ident) && roots_a_place(rest));
    }

    fn has_part(&self, ident: &[u8]) -> bool {
        for (at, byte) in ident.iter().enumerate() {
            let mut candidates = self.starts[usize::from(byte.to_ascii_lowercase())];
            while candidates != 0 {
                let part = self.parts[candidates.trailing_zeros() as usize];
                candidates &= candidates - 1;
                if ident
                    .get(at..at + part.len())
                    .is_some_and(|window| window.eq_ignore_ascii_case(part))
                {
                    return true;
                }
            }
        }
        false
    }
}

/// Whether the text after an identifier makes it the root of a place that can be stored
/// into: a method chain or index (`.`, `[`), or the target of `=` or `op=`. A comment or
/// a character beyond ASCII there counts too (not worth reading further).
fn roots_a_place(rest: &str) -> bool {
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let b = rest.as_bytes();
    match b.first() {
        Some(b'.' | b'[') => true,
        Some(b'=') => !matches!(b.get(1), Some(b'=' | b'>')),
        Some(b'/') if matches!(b.get(1), Some(b'/' | b'*' | b'=')) => true,
        Some(b'+' | b'-' | b'*' | b'%' | b'^' | b'&' | b'|') => b.get(1) == Some(&b'='),
        Some(b'<') => rest.starts_with("<<="),
        Some(b'>') => rest.starts_with(">>="),
        Some(&c) => c >= 0x80,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Level;

    fn fires(levels: &Levels, idents: &[(&str, &str)]) -> bool {
        let mut triggers = Triggers::of(levels).expect("every default rule has triggers");
        for (ident, rest) in idents {
            triggers.ident(ident, rest);
        }
        triggers.found()
    }

    #[test]
    fn parts_match_inside_identifiers_in_any_case() {
        let levels = Levels::default();
        assert!(fires(&levels, &[("val_loss", " ")]));
        assert!(fires(&levels, &[("TotalLoss", " ")]));
        assert!(fires(&levels, &[("r#backward", "(")]));
        assert!(fires(&levels, &[("ManuallyDrop", "::")]));
        assert!(!fires(
            &levels,
            &[("tensor", " "), ("matmul", "("), ("los", " ")]
        ));
    }

    #[test]
    fn static_is_a_keyword_not_a_part() {
        let levels = Levels::default();
        assert!(fires(&levels, &[("static", " X")]));
        assert!(!fires(&levels, &[("statics", " "), ("r#static", " ")]));
    }

    #[test]
    fn screaming_case_counts_only_at_the_root_of_a_place() {
        let levels = Levels::default();
        for rest in [
            ".lock()",
            " [0] = t",
            " = t",
            " += t",
            " <<= 1",
            " // c",
            "\n.with(f)",
        ] {
            assert!(fires(&levels, &[("CACHE", rest)]), "{rest}");
        }
        for rest in [",", ")", " => 1", " == x", " + 1", "::new()", ";", " >> 1"] {
            assert!(!fires(&levels, &[("F32", rest)]), "{rest}");
        }
    }

    #[test]
    fn rules_without_triggers_make_every_file_walked() {
        let mut levels = Levels::default();
        assert!(Triggers::of(&levels).is_some());
        levels
            .set("out_of_place_update", Level::Warn)
            .expect("known rule");
        assert!(Triggers::of(&levels).is_none());
    }

    #[test]
    fn with_every_rule_allowed_only_the_attributes_trigger() {
        let levels = Levels::all(Level::Allow);
        assert!(!fires(&levels, &[("backward", "()"), ("static", " X")]));
        assert!(fires(&levels, &[("lints", "::allow")]));
    }
}
