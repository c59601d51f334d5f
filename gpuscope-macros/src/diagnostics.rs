//! How the macros fail: one `compile_error!` spanned on the offending token, followed by
//! the user's item unchanged (as `tokio-macros` does), so that nothing else cascades
//! from the mistake; and "did you mean" suggestions for misspelt words.

use proc_macro2::TokenStream;
use quote::ToTokens;

/// The error as a `compile_error!`, then `original` untouched.
pub(crate) fn error_with_item(error: syn::Error, original: TokenStream) -> TokenStream {
    let mut out = error.to_compile_error();
    original.to_tokens(&mut out);
    out
}

/// The candidate closest to `word` when it is close enough to be a likely typo
/// (`leak` → `leaks`, `nme` → `name`, `Deny` → `deny`).
pub(crate) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (edit_distance(&lower, c), *c))
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

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
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
    }

    #[test]
    fn lists() {
        assert_eq!(
            one_of(&["warn", "deny", "allow"]),
            "`warn`, `deny` or `allow`"
        );
        assert_eq!(one_of(&["warn"]), "`warn`");
    }
}
