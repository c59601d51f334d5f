//! Parsing and checking the attributes' arguments.
//!
//! `#[gpu_scope(name = "...", leaks = "warn" | "deny" | "allow", sync, device = <expr>)]`
//! and `#[no_grad]` (no arguments). Every mistake is one [`syn::Error`] spanned on the
//! offending token.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitStr};

use crate::diagnostics::{alternatives, one_of, suggestion};
use crate::lint::LintArgs;

/// The arguments `#[gpu_scope]` takes.
pub(crate) const SCOPE_ARGS: &[&str] =
    &["name", "leaks", "sync", "device", "allow", "warn", "deny"];
/// The arguments `#[no_grad]` takes.
pub(crate) const NO_GRAD_ARGS: &[&str] = &["allow", "warn", "deny"];
/// The leak policies, as written in `leaks = "..."`.
pub(crate) const POLICIES: &[&str] = &["warn", "deny", "allow"];

/// A leak policy given in the attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leaks {
    Warn,
    Deny,
    Allow,
}

/// The checked arguments of `#[gpu_scope(...)]`.
#[derive(Default)]
pub(crate) struct ScopeArgs {
    /// `name = "..."`: the scope's name (default: the function's name).
    pub name: Option<LitStr>,
    /// `leaks = "..."`: the scope's leak policy (default: the process-wide one).
    pub leaks: Option<Leaks>,
    /// `sync` / `sync = true`: wait for the scope's GPU work at exit.
    pub sync: bool,
    /// `device = <expr>`: the device the scope runs on, and the span of `device`.
    pub device: Option<(Span, Expr)>,
    /// `allow(..)`, `warn(..)`, `deny(..)`: levels of the lint rules.
    pub lints: LintArgs,
}

impl ScopeArgs {
    /// Parses `#[gpu_scope(...)]`'s arguments.
    pub(crate) fn parse(args: TokenStream) -> syn::Result<ScopeArgs> {
        let mut out = ScopeArgs::default();
        // Where each argument was first given, to reject repeats.
        let mut seen: Vec<(String, Span)> = Vec::new();
        let parser = syn::meta::parser(|meta| {
            let key = path_name(&meta)?;
            if out.lints.parse_meta(&meta, &key)? {
                return Ok(());
            }
            if seen.iter().any(|(k, _)| *k == key) {
                return Err(meta.error(format!("`{key}` is given more than once; keep one")));
            }
            seen.push((key.clone(), meta.path.span()));
            match key.as_str() {
                "name" => {
                    let value = value_of(&meta, &key, "name = \"train_step\"")?;
                    let lit = string_literal(
                        &value,
                        "`name` takes a string literal: `name = \"train_step\"`",
                    )?;
                    if lit.value().trim().is_empty() {
                        return Err(syn::Error::new(
                            lit.span(),
                            "the scope's name cannot be empty",
                        ));
                    }
                    out.name = Some(lit);
                }
                "leaks" => {
                    let expected = format!("expected {}", alternatives(quoted(POLICIES)));
                    let value = value_of(&meta, &key, "leaks = \"deny\"")?;
                    let lit = match &value {
                        Expr::Path(p) if p.path.get_ident().is_some() => {
                            let word = p.path.segments[0].ident.to_string();
                            return Err(syn::Error::new(
                                value.span(),
                                format!("`leaks` takes a string: write `leaks = \"{word}\"`"),
                            ));
                        }
                        _ => string_literal(
                            &value,
                            &format!("`leaks` takes a string literal: {expected}"),
                        )?,
                    };
                    out.leaks = Some(match lit.value().as_str() {
                        "warn" => Leaks::Warn,
                        "deny" => Leaks::Deny,
                        "allow" => Leaks::Allow,
                        other => {
                            return Err(syn::Error::new(
                                lit.span(),
                                format!(
                                    "unknown leak policy `{other}`: {expected}{}",
                                    suggestion(other, POLICIES)
                                ),
                            ));
                        }
                    });
                }
                "sync" => {
                    out.sync = flag(&meta, &key)?;
                }
                "device" => {
                    let value = value_of(&meta, &key, "device = &self.device")?;
                    out.device = Some((meta.path.span(), value));
                }
                other => {
                    return Err(meta.error(format!(
                        "unknown argument `{other}` for #[gpu_scope]: expected {}{}",
                        one_of(SCOPE_ARGS),
                        suggestion(other, SCOPE_ARGS)
                    )));
                }
            }
            Ok(())
        });
        parser.parse2(args)?;
        Ok(out)
    }
}

/// Parses `#[no_grad]`'s arguments: lint levels only.
pub(crate) fn parse_no_grad(args: TokenStream) -> syn::Result<LintArgs> {
    let mut lints = LintArgs::default();
    let parser = syn::meta::parser(|meta| {
        let key = path_name(&meta)?;
        if lints.parse_meta(&meta, &key)? {
            return Ok(());
        }
        Err(meta.error(format!(
            "#[no_grad] takes no arguments but lint levels ({}); found `{key}`{}",
            one_of(&["allow(..)", "warn(..)", "deny(..)"]),
            suggestion(&key, NO_GRAD_ARGS)
        )))
    });
    parser.parse2(args)?;
    Ok(lints)
}

fn quoted(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| format!("\"{w}\"")).collect()
}

/// The argument's name: a single identifier.
fn path_name(meta: &ParseNestedMeta<'_>) -> syn::Result<String> {
    match meta.path.get_ident() {
        Some(ident) => Ok(ident.to_string()),
        None => Err(syn::Error::new(
            meta.path.span(),
            "expected an argument name such as `name`",
        )),
    }
}

/// The `= <expr>` of `key = <expr>`, or an error showing `example`.
fn value_of(meta: &ParseNestedMeta<'_>, key: &str, example: &str) -> syn::Result<Expr> {
    if meta.input.peek(syn::Token![=]) {
        let value: Expr = meta.value()?.parse()?;
        Ok(value)
    } else if meta.input.peek(syn::token::Paren) {
        let group: proc_macro2::Group = meta.input.parse()?;
        Err(syn::Error::new(
            group.span(),
            format!("`{key}` takes a value with `=`: `{example}`"),
        ))
    } else {
        Err(meta.error(format!("`{key}` needs a value: `{example}`")))
    }
}

/// A flag: `key`, `key = true` or `key = false`.
fn flag(meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<bool> {
    let message = format!("`{key}` is a flag: write `{key}`, `{key} = true` or `{key} = false`");
    if meta.input.peek(syn::Token![=]) {
        let value: Expr = meta.value()?.parse()?;
        match &value {
            Expr::Lit(ExprLit {
                lit: Lit::Bool(b), ..
            }) => Ok(b.value),
            _ => Err(syn::Error::new(value.span(), message)),
        }
    } else if meta.input.peek(syn::token::Paren) {
        let group: proc_macro2::Group = meta.input.parse()?;
        Err(syn::Error::new(group.span(), message))
    } else {
        Ok(true)
    }
}

/// The expression as a string literal, or `message`.
fn string_literal(value: &Expr, message: &str) -> syn::Result<LitStr> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        _ => Err(syn::Error::new(value.span(), message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn err(tokens: TokenStream) -> String {
        match ScopeArgs::parse(tokens) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn parses_everything() {
        let args = ScopeArgs::parse(quote!(
            name = "step",
            leaks = "deny",
            sync,
            device = &self.device
        ))
        .unwrap();
        assert_eq!(args.name.unwrap().value(), "step");
        assert_eq!(args.leaks, Some(Leaks::Deny));
        assert!(args.sync);
        assert!(args.device.is_some());
        let args = ScopeArgs::parse(quote!(sync = false,)).unwrap();
        assert!(!args.sync);
        let args = ScopeArgs::parse(TokenStream::new()).unwrap();
        assert!(args.name.is_none() && args.leaks.is_none() && !args.sync && args.device.is_none());
    }

    #[test]
    fn errors() {
        assert_eq!(
            err(quote!(leak = "warn")),
            "unknown argument `leak` for #[gpu_scope]: expected `name`, `leaks`, `sync`, `device`, `allow`, `warn` or `deny`; did you mean `leaks`?"
        );
        assert!(err(quote!(nme = "x")).ends_with("did you mean `name`?"));
        assert!(err(quote!(name = "a", name = "b")).contains("more than once"));
        assert!(err(quote!(name = 3)).contains("string literal"));
        assert!(err(quote!(name = "")).contains("empty"));
        assert_eq!(
            err(quote!(leaks = "maybe")),
            "unknown leak policy `maybe`: expected \"warn\", \"deny\" or \"allow\""
        );
        assert!(err(quote!(leaks = "Deny")).ends_with("did you mean `deny`?"));
        assert!(err(quote!(leaks = deny)).contains("leaks = \"deny\""));
        assert!(err(quote!(sync = 1)).contains("is a flag"));
        assert!(err(quote!(sync(true))).contains("is a flag"));
        assert!(err(quote!(device)).contains("needs a value"));
        assert!(err(quote!(name("x"))).contains("takes a value with `=`"));
        assert!(parse_no_grad(quote!(foo)).is_err());
        assert!(parse_no_grad(TokenStream::new()).is_ok());
        let lints = parse_no_grad(quote!(allow(forget_tensor), deny(graph_accumulation))).unwrap();
        assert_eq!(lints.overrides.len(), 2);
        assert!(
            parse_no_grad(quote!(allow(forget_tensr)))
                .unwrap_err()
                .to_string()
                .contains("did you mean `forget_tensor`?")
        );
        assert!(parse_no_grad(quote!(allow)).is_err());
        assert!(parse_no_grad(quote!(allow())).is_err());
        let args =
            ScopeArgs::parse(quote!(__gpuscope_linted, name = "x", warn(static_escape))).unwrap();
        assert!(args.lints.linted);
        assert_eq!(
            args.lints.overrides,
            vec![("static_escape".to_string(), gpuscope_lint::Level::Warn)]
        );
    }
}
