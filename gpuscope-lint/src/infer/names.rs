//! What names say: the words of an identifier, and whether a binding or a function is
//! named for a loss. Names are the weakest evidence the rules use, and only where the
//! type is unknown.

/// Calls `each` with every word of a CamelCase or snake_case name, as a slice of `name` in
/// its own case, until `each` returns `true`; returns whether it did. Words are split at
/// `_` and other non-alphanumeric characters, and before an uppercase letter that follows
/// a lowercase letter or a digit, or that precedes a lowercase letter after an uppercase
/// one: `HTTPTensor` gives `HTTP`, `Tensor`. Nothing is allocated: the rules ask this of
/// every binding and callee name.
fn any_word(name: &str, mut each: impl FnMut(&str) -> bool) -> bool {
    let mut start: Option<usize> = None;
    let mut prev: Option<char> = None;
    let mut chars = name.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '_' || !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                if each(&name[s..i]) {
                    return true;
                }
            }
            prev = None;
            continue;
        }
        if let (Some(s), Some(p)) = (start, prev) {
            if c.is_uppercase() {
                let next_lower = chars.peek().is_some_and(|&(_, n)| n.is_lowercase());
                if p.is_lowercase() || p.is_ascii_digit() || (p.is_uppercase() && next_lower) {
                    if each(&name[s..i]) {
                        return true;
                    }
                    start = Some(i);
                }
            }
        }
        start.get_or_insert(i);
        prev = Some(c);
    }
    start.is_some_and(|s| each(&name[s..]))
}

/// The lowercase words of a CamelCase or snake_case name: `GradBuffer` gives `grad`,
/// `buffer`; `to_string_lossy` gives `to`, `string`, `lossy`; `HTTPTensor` gives `http`,
/// `tensor` (split before an uppercase letter that follows a lowercase one or precedes one).
#[cfg(test)]
pub(crate) fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    any_word(name, |w| {
        words.push(w.to_lowercase());
        false
    });
    words
}

/// Whether a binding or field name says it holds a loss: one of its words is `loss` or
/// `losses` (`loss`, `val_loss`, `totalLoss`; not `to_string_lossy` or `lost`).
pub(crate) fn is_loss_name(name: &str) -> bool {
    any_word(name, |w| {
        w.eq_ignore_ascii_case("loss") || w.eq_ignore_ascii_case("losses")
    })
}

/// Whether a function or method name says it computes a loss: a word `loss`, or the names
/// of the common criteria (`cross_entropy`, `mse`, `nll`, `bce`, `kl_div`, `huber`).
pub(crate) fn is_loss_fn_name(name: &str) -> bool {
    // Bits: cross, entropy, kl, div.
    let mut pairs = 0u8;
    let one_word = any_word(name, |w| {
        let is = |word: &str| w.eq_ignore_ascii_case(word);
        if is("loss") || is("mse") || is("nll") || is("bce") {
            return true;
        }
        for (bit, word) in ["cross", "entropy", "kl", "div"].iter().enumerate() {
            if is(word) {
                pairs |= 1 << bit;
            }
        }
        false
    });
    one_word || pairs & 0b0011 == 0b0011 || pairs & 0b1100 == 0b1100
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The splitting as first written, over a vector of the name's characters.
    fn words_by_index(name: &str) -> Vec<String> {
        let chars: Vec<char> = name.chars().collect();
        let mut words = Vec::new();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            if c == '_' || !c.is_alphanumeric() {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                continue;
            }
            if c.is_uppercase() && !current.is_empty() {
                let prev = chars[i - 1];
                let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
                if prev.is_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_uppercase() && next_lower)
                {
                    words.push(std::mem::take(&mut current));
                }
            }
            current.extend(c.to_lowercase());
        }
        if !current.is_empty() {
            words.push(current);
        }
        words
    }

    proptest! {
        #[test]
        fn splits_as_the_indexed_version(name in "[a-zA-Z0-9_ÄäÉé.]{0,24}") {
            prop_assert_eq!(words(&name), words_by_index(&name));
        }
    }

    #[test]
    fn splits_camel_and_snake_case() {
        assert_eq!(words("GradBuffer"), ["grad", "buffer"]);
        assert_eq!(words("to_string_lossy"), ["to", "string", "lossy"]);
        assert_eq!(words("HTTPTensor"), ["http", "tensor"]);
        assert_eq!(words("val_Loss2"), ["val", "loss2"]);
        assert_eq!(words("__x__"), ["x"]);
        assert!(words("").is_empty());
    }

    #[test]
    fn loss_names_are_whole_words() {
        for yes in ["loss", "val_loss", "totalLoss", "losses", "LOSS"] {
            assert!(is_loss_name(yes), "{yes}");
        }
        for no in ["lossy", "to_string_lossy", "lost", "gloss", "closs"] {
            assert!(!is_loss_name(no), "{no}");
        }
        for yes in [
            "cross_entropy",
            "mse_loss",
            "nll",
            "bce_with_logits",
            "kl_div",
            "loss_fn",
        ] {
            assert!(is_loss_fn_name(yes), "{yes}");
        }
        for no in ["forward", "itemset", "to_string_lossy", "entropy", "cross"] {
            assert!(!is_loss_fn_name(no), "{no}");
        }
    }
}
