//! Lint levels written in attributes, read the same way by the macros and by
//! `gpuscope lint`:
//!
//! - `#[gpuscope::lints::allow(rule, ..)]` on an item (function, `impl`, trait, module) or, inside
//!   a function that carries `#[gpu_scope]`, `#[no_grad]` or `#[gpuscope::lints::allow]`, on a
//!   statement or an expression;
//! - the `allow(rule, ..)`, `warn(..)`, `deny(..)` arguments of `#[gpu_scope(..)]` and
//!   `#[no_grad(..)]`.
//!
//! An unknown rule name is an error listing the known rules, never ignored.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Meta, Token};

use crate::rule_levels::UnknownRule;
use crate::{Level, Rule, rule};

/// One rule named in an attribute, with the level it gets there.
#[derive(Clone, Copy, Debug)]
pub struct LevelArg {
    /// The rule.
    pub rule: &'static Rule,
    /// Its level there.
    pub level: Level,
    /// The rule's name in the attribute.
    pub span: Span,
}

/// The level a word names: `allow`, `warn`, `deny` (lowercase, as attribute arguments).
pub fn level_word(key: &str) -> Option<Level> {
    match key {
        "allow" => Some(Level::Allow),
        "warn" => Some(Level::Warn),
        "deny" => Some(Level::Deny),
        _ => None,
    }
}

/// Parses the value of a level argument of `#[gpu_scope(..)]` / `#[no_grad(..)]`
/// (`allow(rule, ..)`, `warn(..)`, `deny(..)`) when `key` is one of those words; `Ok(None)`
/// for any other key (left unparsed for the caller).
///
/// # Errors
/// A level without a list, an empty list, something other than a rule name, or an unknown
/// rule (the error names the known rules and suggests a near miss).
///
/// ```
/// use gpuscope_lint::attrs::parse_level_list;
///
/// let attr: syn::Attribute = syn::parse_quote!(#[gpu_scope(name = "x", allow(forget_tensor))]);
/// let mut found = Vec::new();
/// attr.parse_nested_meta(|meta| {
///     let key = meta.path.get_ident().unwrap().to_string();
///     match parse_level_list(&meta, &key)? {
///         Some(list) => found.extend(list.into_iter().map(|arg| arg.rule.name)),
///         None => { meta.value()?.parse::<syn::Expr>()?; }
///     }
///     Ok(())
/// }).unwrap();
/// assert_eq!(found, ["forget_tensor"]);
/// ```
pub fn parse_level_list(
    meta: &ParseNestedMeta<'_>,
    key: &str,
) -> syn::Result<Option<Vec<LevelArg>>> {
    let Some(level) = level_word(key) else {
        return Ok(None);
    };
    if !meta.input.peek(syn::token::Paren) {
        return Err(meta.error(format!(
            "`{key}` takes a list of gpuscope lint rules: `{key}(graph_accumulation)`"
        )));
    }
    let fork = meta.input.fork();
    let content;
    syn::parenthesized!(content in fork);
    if content.is_empty() {
        return Err(meta.error(format!("`{key}()` names no rule")));
    }
    // A quoted rule name gets its own answer (syn's would be "unexpected literal").
    while !content.is_empty() {
        if content.peek(syn::LitStr) {
            let lit: syn::LitStr = content.parse()?;
            return Err(syn::Error::new(
                lit.span(),
                format!(
                    "rule names are written without quotes: `{key}({})`",
                    lit.value()
                ),
            ));
        }
        content.parse::<proc_macro2::TokenTree>()?;
    }
    let mut out = Vec::new();
    meta.parse_nested_meta(|item| {
        let Some(ident) = item.path.get_ident() else {
            return Err(item
                .error("expected the name of a gpuscope lint rule, such as `graph_accumulation`"));
        };
        let name = ident.to_string();
        let rule = rule(&name).ok_or_else(|| item.error(UnknownRule::new(&name).to_string()))?;
        if !item.input.is_empty() && !item.input.peek(Token![,]) {
            return Err(item.error(format!("`{name}` is a rule name and takes no value")));
        }
        out.push(LevelArg {
            rule,
            level,
            span: ident.span(),
        });
        Ok(())
    })?;
    if out.is_empty() {
        return Err(meta.error(format!("`{key}()` names no rule")));
    }
    Ok(Some(out))
}

/// Whether `attr` is `#[gpuscope::lints::allow(..)]` (also `lints::allow` after
/// `use gpuscope::lints;`, and the macro's own path `gpuscope_macros::allow`).
pub fn is_allow_attr(attr: &Attribute) -> bool {
    is_allow_path(attr.path())
}

/// Whether `path` names the `allow` attribute: `gpuscope::lints::allow`, `lints::allow`,
/// `::gpuscope::lints::allow` or `gpuscope_macros::allow`.
pub fn is_allow_path(path: &syn::Path) -> bool {
    let segments = crate::syntax::path_names(path);
    matches!(
        segments
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["gpuscope", "lints", "allow"] | ["lints", "allow"] | ["gpuscope_macros", "allow"]
    )
}

/// Parses the rule list of `#[gpuscope::lints::allow(rule, ..)]`: the attribute's arguments.
///
/// # Errors
/// An empty list, something other than a rule name, or an unknown rule.
///
/// ```
/// let rules = gpuscope_lint::attrs::parse_allow_list(quote::quote!(forget_tensor, static_escape)).unwrap();
/// assert_eq!(rules.iter().map(|arg| arg.rule.name).collect::<Vec<_>>(), ["forget_tensor", "static_escape"]);
/// let err = gpuscope_lint::attrs::parse_allow_list(quote::quote!(forget_tensr)).unwrap_err();
/// assert!(err.to_string().contains("did you mean `forget_tensor`?"));
/// ```
pub fn parse_allow_list(tokens: proc_macro2::TokenStream) -> syn::Result<Vec<LevelArg>> {
    let span = tokens.span();
    let paths = Punctuated::<syn::Path, Token![,]>::parse_terminated.parse2(tokens)?;
    let mut out = Vec::new();
    for path in &paths {
        let Some(ident) = path.get_ident() else {
            return Err(syn::Error::new_spanned(
                path,
                "expected the name of a gpuscope lint rule, such as `graph_accumulation`",
            ));
        };
        let name = ident.to_string();
        let rule = rule(&name)
            .ok_or_else(|| syn::Error::new(ident.span(), UnknownRule::new(&name).to_string()))?;
        out.push(LevelArg {
            rule,
            level: Level::Allow,
            span: ident.span(),
        });
    }
    if out.is_empty() {
        return Err(syn::Error::new(
            span,
            "`gpuscope::lints::allow()` names no rule: `#[gpuscope::lints::allow(graph_accumulation)]`",
        ));
    }
    Ok(out)
}

/// Which gpuscope attribute an attribute is, by the last segment of its path.
fn scope_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "gpu_scope" || s.ident == "no_grad")
}

/// The levels that `attrs` set for the code they are on, in order (later ones win), and
/// the errors in them (unknown rules, malformed lists). Other arguments of
/// `#[gpu_scope(..)]` are skipped.
pub(crate) fn levels_of(attrs: &[Attribute]) -> (Vec<LevelArg>, Vec<syn::Error>) {
    let mut levels = Vec::new();
    let mut errors = Vec::new();
    for attr in attrs {
        if is_allow_attr(attr) {
            let tokens = match &attr.meta {
                Meta::List(list) => list.tokens.clone(),
                _ => proc_macro2::TokenStream::new(),
            };
            match parse_allow_list(tokens) {
                Ok(list) => levels.extend(list),
                Err(e) => errors.push(e),
            }
        } else if scope_attr(attr) && matches!(attr.meta, Meta::List(_)) {
            let parsed = attr.parse_nested_meta(|meta| {
                let key = meta
                    .path
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                match parse_level_list(&meta, &key)? {
                    Some(list) => levels.extend(list),
                    None => skip_value(&meta)?,
                }
                Ok(())
            });
            if let Err(e) = parsed {
                errors.push(e);
            }
        }
    }
    (levels, errors)
}

/// Consumes the value of an argument that is not a lint level: `= expr`, `(..)`, or nothing.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.input.parse::<proc_macro2::TokenTree>()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(attrs: &[Attribute]) -> Vec<(&'static str, Level)> {
        let (levels, errors) = levels_of(attrs);
        assert!(errors.is_empty(), "{errors:?}");
        levels.iter().map(|a| (a.rule.name, a.level)).collect()
    }

    #[test]
    fn reads_allow_attributes_and_scope_arguments() {
        let attrs: Vec<Attribute> = vec![
            syn::parse_quote!(#[gpuscope::lints::allow(forget_tensor, static_escape)]),
            syn::parse_quote!(#[gpu_scope(name = "x", sync, device = &dev, deny(graph_accumulation))]),
            syn::parse_quote!(#[gpuscope::no_grad(warn(item_in_hot_loop))]),
            syn::parse_quote!(#[allow(dead_code)]),
            syn::parse_quote!(#[gpu_scope]),
        ];
        assert_eq!(
            levels(&attrs),
            [
                ("forget_tensor", Level::Allow),
                ("static_escape", Level::Allow),
                ("graph_accumulation", Level::Deny),
                ("item_in_hot_loop", Level::Warn)
            ]
        );
    }

    #[test]
    fn unknown_rules_and_bad_lists_are_errors() {
        for (attr, message) in [
            (
                syn::parse_quote!(#[gpuscope::lints::allow(forget_tensors)]),
                "unknown lint rule `forget_tensors`; did you mean `forget_tensor`?",
            ),
            (
                syn::parse_quote!(#[gpu_scope(allow(mystery))]),
                "unknown lint rule `mystery` (known rules: forget_tensor,",
            ),
            (syn::parse_quote!(#[gpu_scope(deny)]), "`deny` takes a list"),
            (
                syn::parse_quote!(#[no_grad(warn())]),
                "`warn()` names no rule",
            ),
            (
                syn::parse_quote!(#[gpuscope::lints::allow()]),
                "names no rule",
            ),
            (
                syn::parse_quote!(#[gpuscope::lints::allow(a::b)]),
                "expected the name of a gpuscope lint rule",
            ),
        ] {
            let attr: Attribute = attr;
            let (_, errors) = levels_of(&[attr]);
            assert_eq!(errors.len(), 1);
            let text = errors[0].to_string();
            assert!(text.contains(message), "{text}");
        }
    }

    #[test]
    fn only_gpuscope_allow_paths_count() {
        let yes: Attribute = syn::parse_quote!(#[gpuscope::lints::allow(forget_tensor)]);
        let also: Attribute = syn::parse_quote!(#[::gpuscope::lints::allow(forget_tensor)]);
        let imported: Attribute = syn::parse_quote!(#[lints::allow(forget_tensor)]);
        assert!(is_allow_attr(&imported));
        let no: Attribute = syn::parse_quote!(#[other::allow(forget_tensor)]);
        let builtin: Attribute = syn::parse_quote!(#[allow(forget_tensor)]);
        assert!(is_allow_attr(&yes) && is_allow_attr(&also));
        assert!(!is_allow_attr(&no) && !is_allow_attr(&builtin));
    }
}
