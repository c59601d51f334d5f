//! Parsing and checking the attributes' arguments:
//! `#[gpu_scope(name = "...", leaks = "warn" | "deny" | "allow", sync, device = <expr>)]`
//! and `#[no_grad]`, both also taking lint levels (`allow(..)`, `warn(..)`, `deny(..)`).
//! Every mistake is one [`syn::Error`] spanned on the offending token.
//!
//! Self-contained on purpose: this module and its children use `syn`, `proc-macro2` and
//! `strsim` only (not `proc_macro`, not the rest of this crate), so that a fuzz target
//! can compile it with `#[path = "../gpuscope-macros/src/args/mod.rs"] mod args;`. The
//! lint-level arguments are parsed by the caller's [`LevelArgs`] (the crate's
//! `lint::LintArgs`).

#[cfg(test)]
mod tests;
mod words;

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitStr};

pub(crate) use words::suggestion;
use words::{alternatives, one_of};

/// Lint-level arguments, parsed by their owner.
pub(crate) trait LevelArgs: Default {
    /// Handles `meta` (named `key`) if it is a lint-level argument (`allow(..)`,
    /// `warn(..)`, `deny(..)`, or a hidden marker); returns whether it was one.
    fn parse_meta(&mut self, meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<bool>;
}

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

/// The checked arguments of `#[gpu_scope(...)]`, with lint levels of type `L`.
pub(crate) struct ScopeArgs<L> {
    /// `name = "..."`: the scope's name (default: the function's name).
    pub name: Option<LitStr>,
    /// `leaks = "..."`: the scope's leak policy (default: the process-wide one).
    pub leaks: Option<Leaks>,
    /// `sync` / `sync = true`: wait for the scope's GPU work at exit.
    pub sync: bool,
    /// `device = <expr>`: the device the scope runs on, and the span of `device`.
    pub device: Option<(Span, Expr)>,
    /// `allow(..)`, `warn(..)`, `deny(..)`: levels of the lint rules.
    pub lints: L,
}

impl<L: LevelArgs> ScopeArgs<L> {
    /// Parses `#[gpu_scope(...)]`'s arguments.
    pub(crate) fn parse(args: TokenStream) -> syn::Result<ScopeArgs<L>> {
        let mut out = ScopeArgs {
            name: None,
            leaks: None,
            sync: false,
            device: None,
            lints: L::default(),
        };
        // Where each argument was first given, to reject repeats.
        let mut seen: Vec<(String, Span)> = Vec::new();
        let expected = format!("an argument of #[gpu_scope] ({})", one_of(SCOPE_ARGS));
        parse_list(args, &expected, |meta| {
            let key = path_name(meta)?;
            if out.lints.parse_meta(meta, &key)? {
                return Ok(());
            }
            if seen.iter().any(|(k, _)| *k == key) {
                return Err(meta.error(format!("`{key}` is given more than once; keep one")));
            }
            seen.push((key.clone(), meta.path.span()));
            match key.as_str() {
                "name" => {
                    let value = value_of(meta, &key, "name = \"train_step\"")?;
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
                    let value = value_of(meta, &key, "leaks = \"deny\"")?;
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
                    out.sync = flag(meta, &key)?;
                }
                "device" => {
                    let value = value_of(meta, &key, "device = &self.device")?;
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
        })?;
        Ok(out)
    }
}

/// Parses `#[no_grad]`'s arguments: lint levels only.
pub(crate) fn parse_no_grad<L: LevelArgs>(args: TokenStream) -> syn::Result<L> {
    let mut lints = L::default();
    let levels = one_of(&["allow(..)", "warn(..)", "deny(..)"]);
    let expected = format!("a lint level of #[no_grad] ({levels})");
    parse_list(args, &expected, |meta| {
        let key = path_name(meta)?;
        if lints.parse_meta(meta, &key)? {
            return Ok(());
        }
        Err(meta.error(format!(
            "#[no_grad] takes no arguments but lint levels ({levels}); found `{key}`{}",
            suggestion(&key, NO_GRAD_ARGS)
        )))
    })?;
    Ok(lints)
}

fn quoted(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| format!("\"{w}\"")).collect()
}

/// Parses `args`, a comma-separated list of `key`, `key = <expr>` and `key(..)`, calling
/// `each` on every argument: `syn`'s meta parser, with errors that say what was
/// `expected` where something else is found (a literal, a stray token, a missing `,`).
fn parse_list(
    args: TokenStream,
    expected: &str,
    mut each: impl FnMut(&ParseNestedMeta<'_>) -> syn::Result<()>,
) -> syn::Result<()> {
    if let Some(first) = args.clone().into_iter().next() {
        starts_argument(&first, expected)?;
    }
    let parser = syn::meta::parser(|meta| {
        each(&meta)?;
        next_argument(&meta, expected)
    });
    parser.parse2(args)
}

/// After an argument: the end, or `,` and the start of another argument (or the end).
fn next_argument(meta: &ParseNestedMeta<'_>, expected: &str) -> syn::Result<()> {
    let input = meta.input;
    if input.is_empty() {
        return Ok(());
    }
    let fork = input.fork();
    let separator: TokenTree = fork.parse()?;
    if !matches!(&separator, TokenTree::Punct(p) if p.as_char() == ',') {
        return Err(syn::Error::new(
            separator.span(),
            format!("expected `,` between arguments, found `{separator}`"),
        ));
    }
    match fork.parse::<TokenTree>() {
        Ok(next) => starts_argument(&next, expected),
        Err(_) => Ok(()),
    }
}

/// An argument starts with its name (a path, reported by [`path_name`] if not a name).
fn starts_argument(token: &TokenTree, expected: &str) -> syn::Result<()> {
    match token {
        TokenTree::Ident(_) => Ok(()),
        TokenTree::Punct(p) if p.as_char() == ':' => Ok(()),
        other => Err(syn::Error::new(
            other.span(),
            format!("expected {expected}, found `{other}`"),
        )),
    }
}

/// The argument's name: a single identifier.
fn path_name(meta: &ParseNestedMeta<'_>) -> syn::Result<String> {
    match meta.path.get_ident() {
        Some(ident) => Ok(ident.to_string()),
        None => Err(syn::Error::new_spanned(
            &meta.path,
            "expected an argument name such as `name`",
        )),
    }
}

/// The `= <expr>` of `key = <expr>`, or an error showing `example`.
fn value_of(meta: &ParseNestedMeta<'_>, key: &str, example: &str) -> syn::Result<Expr> {
    if meta.input.peek(syn::Token![=]) {
        let eq: syn::Token![=] = meta.input.parse()?;
        if meta.input.is_empty() || meta.input.peek(syn::Token![,]) {
            return Err(syn::Error::new(
                eq.span,
                format!("`{key}` needs a value after `=`: `{example}`"),
            ));
        }
        let value: Expr = meta.input.parse()?;
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
        let eq: syn::Token![=] = meta.input.parse()?;
        if meta.input.is_empty() || meta.input.peek(syn::Token![,]) {
            return Err(syn::Error::new(eq.span, message));
        }
        let value: Expr = meta.input.parse()?;
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
