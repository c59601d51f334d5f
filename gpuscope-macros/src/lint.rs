//! The lint rules of `gpuscope-lint`, run on the body of the annotated function.
//!
//! - Levels: every rule's default, overridden by `allow(rule, ..)`, `warn(..)` and
//!   `deny(..)` arguments of the attributes on the function.
//! - `deny` findings become `compile_error!`s spanned on the offending expression (the
//!   function is still emitted, so nothing cascades).
//! - `warn` findings become real compiler warnings on stable Rust, through a deprecated
//!   constant used at the offending expression (the technique of the
//!   `proc-macro-warning` crate): `warning: use of deprecated constant
//!   `f::gpuscope_graph_accumulation`: <message> ... help: <help>`. The statement is a
//!   no-op at the top of the body; `#[allow(deprecated)]` silences it like any warning.
//! - A function with both `#[gpu_scope]` and `#[no_grad]` is linted once, by the
//!   attribute that expands first: it knows both contexts, merges both attributes' levels,
//!   and marks the other attribute with a hidden `__gpuscope_linted` argument.

use gpuscope_lint::{FnContext, Level, Levels};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::meta::ParseNestedMeta;
use syn::{Attribute, Block, Meta};

use crate::item::FnItem;

/// The hidden argument marking an attribute whose function was already linted.
pub(crate) const LINTED: &str = "__gpuscope_linted";

/// `allow(..)`, `warn(..)`, `deny(..)` arguments, checked against the known rules.
#[derive(Default, Clone, Debug)]
pub(crate) struct LintArgs {
    /// Each rule named, with its level, in the order written.
    pub overrides: Vec<(String, Level)>,
    /// The hidden `__gpuscope_linted` argument was given.
    pub linted: bool,
}

impl LintArgs {
    /// Handles `meta` if it is a lint argument (`allow`, `warn`, `deny`, or the hidden
    /// marker); returns whether it was one.
    pub(crate) fn parse_meta(
        &mut self,
        meta: &ParseNestedMeta<'_>,
        key: &str,
    ) -> syn::Result<bool> {
        let level = match key {
            "allow" => Level::Allow,
            "warn" => Level::Warn,
            "deny" => Level::Deny,
            LINTED => {
                self.linted = true;
                return Ok(true);
            }
            _ => return Ok(false),
        };
        if !meta.input.peek(syn::token::Paren) {
            return Err(meta.error(format!(
                "`{key}` takes a list of gpuscope lint rules: `{key}(graph_accumulation)`"
            )));
        }
        let mut any = false;
        meta.parse_nested_meta(|rule| {
            any = true;
            let Some(ident) = rule.path.get_ident() else {
                return Err(rule.error(
                    "expected the name of a gpuscope lint rule, such as `graph_accumulation`",
                ));
            };
            let name = ident.to_string();
            if let Err(unknown) = Levels::default().set(&name, level) {
                return Err(rule.error(unknown.to_string()));
            }
            if !rule.input.is_empty() && !rule.input.peek(syn::Token![,]) {
                return Err(rule.error(format!("`{name}` is a rule name and takes no value")));
            }
            self.overrides.push((name, level));
            Ok(())
        })?;
        if !any {
            return Err(meta.error(format!("`{key}()` names no rule")));
        }
        Ok(true)
    }
}

/// Which gpuscope attribute this is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attr {
    GpuScope,
    NoGrad,
}

impl Attr {
    /// `gpu_scope` or `no_grad`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Attr::GpuScope => "gpu_scope",
            Attr::NoGrad => "no_grad",
        }
    }

    fn of(attr: &Attribute) -> Option<Attr> {
        match attr.path().segments.last()?.ident.to_string().as_str() {
            "gpu_scope" => Some(Attr::GpuScope),
            "no_grad" => Some(Attr::NoGrad),
            _ => None,
        }
    }

    fn parse_lints(self, tokens: TokenStream) -> Option<LintArgs> {
        match self {
            Attr::GpuScope => crate::args::ScopeArgs::parse(tokens).ok().map(|a| a.lints),
            Attr::NoGrad => crate::args::parse_no_grad(tokens).ok(),
        }
    }
}

/// What linting adds to the expansion.
#[derive(Default)]
pub(crate) struct Lints {
    /// `compile_error!`s for `deny` findings, to emit beside the function.
    pub errors: TokenStream,
    /// Statements raising the `warn` findings, to put first in the body.
    pub warnings: TokenStream,
}

impl Lints {
    /// The errors, then `f` expanded by `expand` with the warnings first in its body.
    pub(crate) fn around(
        self,
        mut f: FnItem,
        expand: impl FnOnce(&FnItem) -> TokenStream,
    ) -> TokenStream {
        f.prelude = self.warnings;
        let mut out = self.errors;
        out.extend(expand(&f));
        out
    }
}

/// Lints `f`'s body for the attribute `this` with its arguments `own`, unless another
/// gpuscope attribute did already; marks the other gpuscope attributes left on `f`.
pub(crate) fn lint(f: &mut FnItem, this: Attr, own: &LintArgs) -> Lints {
    if own.linted {
        return Lints::default();
    }
    let mut ctx = FnContext {
        scoped: this == Attr::GpuScope,
        no_grad: this == Attr::NoGrad,
    };
    let mut levels = Levels::default();
    apply(&mut levels, own);
    for attr in &mut f.attrs {
        let Some(kind) = Attr::of(attr) else { continue };
        match kind {
            Attr::GpuScope => ctx.scoped = true,
            Attr::NoGrad => ctx.no_grad = true,
        }
        let tokens = match &attr.meta {
            Meta::List(list) => list.tokens.clone(),
            _ => TokenStream::new(),
        };
        // Its mistakes are its own to report, when it expands.
        if let Some(other) = kind.parse_lints(tokens.clone()) {
            apply(&mut levels, &other);
        }
        mark(attr, tokens);
    }
    let block = Block {
        brace_token: f.brace,
        stmts: f.stmts.clone(),
    };
    let findings = gpuscope_lint::lint_block(&f.sig, &block, ctx, &levels);
    let mut out = Lints::default();
    for finding in &findings {
        let text = format!("{}\nhelp: {}", finding.message, finding.help);
        match finding.level {
            Level::Deny => {
                let text = format!("gpuscope::{}: {text}", finding.rule);
                out.errors
                    .extend(syn::Error::new(finding.span, text).to_compile_error());
            }
            // The constant's name, `gpuscope_<rule>`, says which rule.
            Level::Warn => out
                .warnings
                .extend(warning(finding.rule, &text, finding.span)),
            Level::Allow => {}
        }
    }
    out
}

fn apply(levels: &mut Levels, args: &LintArgs) {
    for (rule, level) in &args.overrides {
        // Checked while parsing.
        let _ = levels.set(rule, *level);
    }
}

/// Adds the hidden `__gpuscope_linted` argument to a gpuscope attribute.
fn mark(attr: &mut Attribute, tokens: TokenStream) {
    let path = attr.path().clone();
    let marker = proc_macro2::Ident::new(LINTED, Span::call_site());
    let tokens = if tokens.is_empty() {
        quote!(#marker)
    } else {
        quote!(#marker, #tokens)
    };
    attr.meta = Meta::List(syn::MetaList {
        path,
        delimiter: syn::MacroDelimiter::Paren(Default::default()),
        tokens,
    });
}

/// A statement that makes rustc warn `text` at `span`: the use of a deprecated constant.
fn warning(rule: &str, text: &str, span: Span) -> TokenStream {
    let name = format_ident!("gpuscope_{}", rule);
    let used = proc_macro2::Ident::new(&name.to_string(), span);
    let use_it = quote_spanned!(span=> let _ = #used;);
    quote! {
        {
            #[deprecated(note = #text)]
            #[allow(non_upper_case_globals)]
            const #name: () = ();
            #use_it
        }
    }
}
