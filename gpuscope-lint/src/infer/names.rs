//! What names say: the words of an identifier, and whether a binding or a function is
//! named for a loss. Names are the weakest evidence the rules use, and only where the
//! type is unknown.

/// The lowercase words of a CamelCase or snake_case name: `GradBuffer` gives `grad`,
/// `buffer`; `to_string_lossy` gives `to`, `string`, `lossy`; `HTTPTensor` gives `httptensor`
/// is avoided by splitting before an uppercase letter that follows a lowercase one or
/// precedes one (`HTTP`, `Tensor`).
pub(crate) fn words(name: &str) -> Vec<String> {
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
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
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

/// Whether a binding or field name says it holds a loss: one of its words is `loss` or
/// `losses` (`loss`, `val_loss`, `totalLoss`; not `to_string_lossy` or `lost`).
pub(crate) fn is_loss_name(name: &str) -> bool {
    words(name).iter().any(|w| w == "loss" || w == "losses")
}

/// Whether a function or method name says it computes a loss: a word `loss`, or the names
/// of the common criteria (`cross_entropy`, `mse`, `nll`, `bce`, `kl_div`, `huber`).
pub(crate) fn is_loss_fn_name(name: &str) -> bool {
    let words = words(name);
    let has = |w: &str| words.iter().any(|x| x == w);
    has("loss")
        || (has("cross") && has("entropy"))
        || has("mse")
        || has("nll")
        || has("bce")
        || (has("kl") && has("div"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
