//! Where a file can give findings at the levels in force: the trigger words of the enabled
//! rules ([`Check::triggers`](crate::check::Check::triggers)), matched against the file's
//! identifiers as the scan hands them over. A file with none of them is parsed (so its
//! syntax errors are still reported) but not walked; in a file with some, only the
//! functions whose lines hold one are walked, unless the file has what can change a
//! function from outside: a level attribute (which can switch on a rule without trigger
//! words) or a `static` (which a function can store into by a name that is no trigger).

use crate::Levels;
use crate::check::Trigger;
use crate::rules::CHECKS;
use crate::syntax::is_screaming_case;

/// The words of the attributes that set levels (`#[gpuscope::lints::allow(..)]`,
/// `#[gpuscope_macros::allow(..)]`, `#[gpu_scope(..)]`, `#[no_grad(..)]`): they make the
/// walker report unknown rule names, and change levels for what they are on.
const ATTRIBUTES: &[&str] = &["lints", "gpuscope_macros", "gpu_scope", "no_grad"];

/// What a file needs walked, once scanned.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Walk {
    /// Nothing: no trigger word.
    Nothing,
    /// The functions that span one of these lines (1-based, ascending).
    Lines(Vec<usize>),
    /// Everything.
    Everything,
}

/// The trigger words in force, and where they were seen.
pub(super) struct Triggers {
    /// `Part` words, in lowercase: the attributes' first.
    parts: Vec<&'static [u8]>,
    /// For each lowercase byte, the `parts` whose first (second) byte it is: bit `i` for
    /// `parts[i]`. Most places in an identifier start no part's first two bytes.
    firsts: [u64; 256],
    seconds: [u64; 256],
    keywords: Vec<&'static str>,
    screaming_root: bool,
    /// Byte offsets of the identifiers holding a rule's word.
    hits: Vec<usize>,
    /// Something seen makes the whole file walked.
    everything: bool,
}

impl Triggers {
    /// The triggers of the rules enabled in `levels` and of the level attributes; `None`
    /// when an enabled rule declares none (every file must be walked).
    pub(super) fn of(levels: &Levels) -> Option<Triggers> {
        let mut triggers = Triggers {
            parts: Vec::new(),
            firsts: [0; 256],
            seconds: [0; 256],
            keywords: Vec::new(),
            screaming_root: false,
            hits: Vec::new(),
            everything: false,
        };
        for word in ATTRIBUTES {
            triggers.add_part(word);
        }
        for (index, check) in CHECKS.iter().enumerate() {
            if levels.at(index) != crate::Level::Allow {
                for trigger in check.triggers()? {
                    match *trigger {
                        Trigger::Part(part) => triggers.add_part(part),
                        Trigger::Keyword(keyword) => triggers.keywords.push(keyword),
                        Trigger::ScreamingRoot => triggers.screaming_root = true,
                    }
                }
            }
        }
        Some(triggers)
    }

    fn add_part(&mut self, part: &'static str) {
        debug_assert!(part.len() >= 2 && part == part.to_ascii_lowercase());
        if self.parts.contains(&part.as_bytes()) {
            return;
        }
        assert!(self.parts.len() < 64, "at most 64 trigger words");
        let bytes = part.as_bytes();
        self.firsts[usize::from(bytes[0])] |= 1 << self.parts.len();
        self.seconds[usize::from(bytes[1])] |= 1 << self.parts.len();
        self.parts.push(bytes);
    }

    /// Looks at the identifier `text[start..end]`.
    pub(super) fn ident(&mut self, text: &str, start: usize, end: usize) {
        if self.everything {
            return;
        }
        let ident = &text[start..end];
        if self.keywords.contains(&ident) {
            // Only `static` is a keyword trigger.
            self.everything = true;
            return;
        }
        let parts = self.parts_in(ident.as_bytes());
        if parts & ((1 << ATTRIBUTES.len()) - 1) != 0 {
            self.everything = true;
        } else if parts != 0
            || (self.screaming_root && is_screaming_case(ident) && roots_a_place(&text[end..]))
        {
            self.hits.push(start);
        }
    }

    /// The `parts` in `ident`, as a bit set.
    fn parts_in(&self, ident: &[u8]) -> u64 {
        let mut found = 0;
        for (at, pair) in ident.windows(2).enumerate() {
            let mut candidates = self.firsts[usize::from(pair[0].to_ascii_lowercase())]
                & self.seconds[usize::from(pair[1].to_ascii_lowercase())];
            while candidates != 0 {
                let index = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                let part = self.parts[index];
                if ident
                    .get(at..at + part.len())
                    .is_some_and(|window| window.eq_ignore_ascii_case(part))
                {
                    found |= 1 << index;
                }
            }
        }
        found
    }

    /// What the file `text` needs walked, after every identifier was seen.
    pub(super) fn walk(self, text: &str) -> Walk {
        if self.everything {
            return Walk::Everything;
        }
        if self.hits.is_empty() {
            return Walk::Nothing;
        }
        let mut lines = Vec::with_capacity(self.hits.len());
        let (mut line, mut counted) = (1, 0);
        for offset in self.hits {
            line += text.as_bytes()[counted..offset]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            counted = offset;
            if lines.last() != Some(&line) {
                lines.push(line);
            }
        }
        Walk::Lines(lines)
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

    /// What `src` needs walked.
    fn walk(levels: &Levels, src: &str) -> Walk {
        let mut triggers = Triggers::of(levels).expect("every rule enabled has triggers");
        super::super::scan::depth(src, |start, end| triggers.ident(src, start, end));
        triggers.walk(src)
    }

    fn fires(levels: &Levels, src: &str) -> bool {
        walk(levels, src) != Walk::Nothing
    }

    #[test]
    fn parts_match_inside_identifiers_in_any_case() {
        let levels = Levels::default();
        for src in ["val_loss", "TotalLoss", "r#backward", "ManuallyDrop"] {
            assert!(fires(&levels, src), "{src}");
        }
        assert!(!fires(&levels, "tensor matmul los"));
    }

    #[test]
    fn hits_give_their_lines() {
        let levels = Levels::default();
        assert_eq!(
            walk(&levels, "fn a\nfn b\nloss\nx\n\nmy_loss backward"),
            Walk::Lines(vec![3, 6])
        );
    }

    #[test]
    fn static_items_and_level_attributes_make_everything_walked() {
        let levels = Levels::default();
        assert_eq!(walk(&levels, "loss\nstatic X"), Walk::Everything);
        assert_eq!(walk(&levels, "gpuscope lints allow"), Walk::Everything);
        assert_eq!(walk(&levels, "gpu_scope\nfn f"), Walk::Everything);
        assert_eq!(walk(&levels, "statics r#static"), Walk::Nothing);
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
            let src = format!("CACHE{rest}");
            assert!(roots_a_place(rest) && fires(&levels, &src), "{rest}");
        }
        for rest in [",", ")", " => 1", " == x", " + 1", "::new()", ";", " >> 1"] {
            assert!(!roots_a_place(rest), "{rest}");
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
    fn with_every_rule_allowed_only_the_attributes_count() {
        let levels = Levels::all(Level::Allow);
        assert_eq!(walk(&levels, "backward static loss"), Walk::Nothing);
        assert_eq!(walk(&levels, "lints"), Walk::Everything);
    }
}
