//! Words in messages: "did you mean" suggestions for misspelt names (edit distance from
//! `strsim`) and lists of alternatives.

/// The candidate closest to `word` when it is close enough to be a likely typo
/// (`leak` → `leaks`, `nme` → `name`, `Deny` → `deny`).
pub(crate) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(&lower, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3) && *d < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `; did you mean `x`?` or nothing.
pub(crate) fn suggestion(word: &str, candidates: &[&str]) -> String {
    match did_you_mean(word, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

/// "`a`, `b` or `c`".
pub(crate) fn one_of(words: &[&str]) -> String {
    alternatives(words.iter().map(|w| format!("`{w}`")).collect())
}

/// "a, b or c".
pub(crate) fn alternatives(items: Vec<String>) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let args = ["name", "leaks", "sync", "device"];
        assert_eq!(did_you_mean("leak", &args), Some("leaks"));
        assert_eq!(did_you_mean("nme", &args), Some("name"));
        assert_eq!(did_you_mean("devise", &args), Some("device"));
        assert_eq!(did_you_mean("snyc", &args), Some("sync"));
        assert_eq!(did_you_mean("frobnicate", &args), None);
        assert_eq!(did_you_mean("x", &args), None);
        assert_eq!(
            did_you_mean("Deny", &["warn", "deny", "allow"]),
            Some("deny")
        );
        assert_eq!(did_you_mean("maybe", &["warn", "deny", "allow"]), None);
        // Ties go to the first candidate.
        assert_eq!(did_you_mean("wan", &["warn", "wean"]), Some("warn"));
    }

    #[test]
    fn lists() {
        assert_eq!(
            one_of(&["warn", "deny", "allow"]),
            "`warn`, `deny` or `allow`"
        );
        assert_eq!(one_of(&["warn"]), "`warn`");
        assert_eq!(one_of(&[]), "");
    }
}
