//! The lint rules of `gpuscope-lint`, run on the body of the annotated function, and the
//! `#[gpuscope::lints::allow(..)]` attribute.
//!
//! - Levels: every rule's default, overridden by the `allow(rule, ..)`, `warn(..)` and
//!   `deny(..)` arguments of the gpuscope attributes on the function and by
//!   `#[gpuscope::lints::allow(..)]` on it; statement-level `#[gpuscope::lints::allow(..)]` in
//!   the body apply to their statement (the lint crate reads them, exactly as `gpuscope lint`
//!   does) and are then taken off, since rustc does not accept attribute macros on statements.
//! - `deny` findings become `compile_error!`s spanned on the whole offending expression
//!   (its first and last tokens, as `syn::Error::new_spanned` does); the function is still
//!   emitted, so nothing cascades.
//! - `warn` findings become real compiler warnings on stable Rust, through an unused value of
//!   a `#[must_use = "<message> help: <help>"]` struct named after the rule, made at the
//!   offending expression: `warning: unused `gpuscope_graph_accumulation` in tuple element 0
//!   that must be used`, the whole expression underlined (the call's path carries its first
//!   span, its parentheses its last: rustc joins them, where a deprecated item's use only
//!   points at one token), then the message and help as a note. `#[allow(unused_must_use)]`
//!   silences it like any warning.
//! - A function with both `#[gpu_scope]` and `#[no_grad]` is linted once, by the attribute
//!   that expands first: it knows both contexts, merges both attributes' levels, and marks
//!   the other attribute with a hidden `__gpuscope_linted` argument.
//! - `#[gpuscope::lints::allow(rule, ..)]` on an item passes its rules on to the gpuscope
//!   attributes inside it (prepended to their arguments, so that their own levels win) and
//!   takes statement-level allows off the other functions' bodies.

use gpuscope_lint::attrs::{is_allow_attr, parse_allow_list, parse_level_list};
use gpuscope_lint::{FnContext, Level, Levels};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};
use syn::meta::ParseNestedMeta;
use syn::visit_mut::{self, VisitMut};
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
    /// marker); returns whether it was one. The level lists are read by
    /// `gpuscope_lint::attrs::parse_level_list`, as `gpuscope lint` reads them.
    pub(crate) fn parse_meta(
        &mut self,
        meta: &ParseNestedMeta<'_>,
        key: &str,
    ) -> syn::Result<bool> {
        if key == LINTED {
            self.linted = true;
            return Ok(true);
        }
        match parse_level_list(meta, key)? {
            Some(list) => {
                self.overrides
                    .extend(list.iter().map(|arg| (arg.rule.name.to_owned(), arg.level)));
                Ok(true)
            }
            None => Ok(false),
        }
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
/// gpuscope attribute did already; marks the other gpuscope attributes left on `f`, and
/// takes statement-level `#[gpuscope::lints::allow(..)]` off the body.
pub(crate) fn lint(f: &mut FnItem, this: Attr, own: &LintArgs) -> Lints {
    if own.linted {
        strip_allows(&mut f.stmts);
        return Lints::default();
    }
    let mut ctx = FnContext {
        scoped: this == Attr::GpuScope,
        no_grad: this == Attr::NoGrad,
    };
    let mut levels = Levels::default();
    // `#[gpuscope::lints::allow]` on the function (expanding after this attribute): its
    // mistakes are its own to report.
    for attr in f.attrs.iter().filter(|a| is_allow_attr(a)) {
        if let Meta::List(list) = &attr.meta {
            for arg in parse_allow_list(list.tokens.clone()).unwrap_or_default() {
                let _ = levels.set(arg.rule.name, Level::Allow);
            }
        }
    }
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
    apply(&mut levels, own);
    let block = Block {
        brace_token: f.brace,
        stmts: f.stmts.clone(),
    };
    let findings = gpuscope_lint::lint_block(&f.sig, &block, ctx, &levels);
    strip_allows(&mut f.stmts);
    let mut out = Lints::default();
    for finding in &findings {
        let text = match &finding.note {
            Some(note) => format!("{}\nnote: {note}\nhelp: {}", finding.message, finding.help),
            None => format!("{}\nhelp: {}", finding.message, finding.help),
        };
        match finding.level {
            Level::Deny => {
                let text = format!("gpuscope::{}: {text}", finding.rule);
                let spanned = spanned_pair(finding.span, finding.end);
                out.errors
                    .extend(syn::Error::new_spanned(spanned, text).to_compile_error());
            }
            // The constant's name, `gpuscope_<rule>`, says which rule.
            Level::Warn => {
                out.warnings
                    .extend(warning(finding.rule, &text, finding.span, finding.end))
            }
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
    let marker = Ident::new(LINTED, Span::call_site());
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

/// Two tokens spanned `start` and `end`, for `syn::Error::new_spanned`: the error then
/// covers everything from the first to the last.
fn spanned_pair(start: Span, end: Span) -> TokenStream {
    let first = Ident::new("start", start);
    let last = Ident::new("end", end);
    quote!(#first #last)
}

/// A statement that makes rustc warn `text` from `start` to `end`: an unused value of a
/// `#[must_use = text]` struct, made by a call whose path carries `start` and whose
/// parentheses carry `end` (so rustc underlines from the first to the last token of the
/// offending expression), inside a tuple (so rustc offers no `let _ = ..` fix: the value is
/// ours, not the user's).
fn warning(rule: &str, text: &str, start: Span, end: Span) -> TokenStream {
    let name = format_ident!("gpuscope_{}", rule);
    let call_name = Ident::new(&name.to_string(), start);
    let mut args = proc_macro2::Group::new(proc_macro2::Delimiter::Parenthesis, TokenStream::new());
    args.set_span(end);
    quote! {
        {
            #[must_use = #text]
            #[allow(non_camel_case_types)]
            struct #name();
            (#call_name #args,);
        }
    }
}

/// Takes `#[gpuscope::lints::allow(..)]` off the statements and expressions of a body (the
/// lint has read them; rustc would reject them there).
fn strip_allows(stmts: &mut [syn::Stmt]) {
    let mut strip = StripAllows;
    for stmt in stmts {
        strip.visit_stmt_mut(stmt);
    }
}

struct StripAllows;

impl VisitMut for StripAllows {
    fn visit_local_mut(&mut self, local: &mut syn::Local) {
        local.attrs.retain(|attr| !is_allow_attr(attr));
        visit_mut::visit_local_mut(self, local);
    }

    fn visit_stmt_macro_mut(&mut self, mac: &mut syn::StmtMacro) {
        mac.attrs.retain(|attr| !is_allow_attr(attr));
        visit_mut::visit_stmt_macro_mut(self, mac);
    }

    fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
        if let Some(attrs) = expr_attrs_mut(e) {
            attrs.retain(|attr| !is_allow_attr(attr));
        }
        visit_mut::visit_expr_mut(self, e);
    }

    // Nested functions with their own gpuscope attribute strip their own body.
    fn visit_item_fn_mut(&mut self, item: &mut syn::ItemFn) {
        if !item.attrs.iter().any(|a| Attr::of(a).is_some()) {
            visit_mut::visit_item_fn_mut(self, item);
        }
    }
}

/// The outer attributes of the expressions that carry them in statement position.
fn expr_attrs_mut(e: &mut syn::Expr) -> Option<&mut Vec<Attribute>> {
    use syn::Expr::*;
    Some(match e {
        Array(e) => &mut e.attrs,
        Assign(e) => &mut e.attrs,
        Async(e) => &mut e.attrs,
        Await(e) => &mut e.attrs,
        Binary(e) => &mut e.attrs,
        Block(e) => &mut e.attrs,
        Call(e) => &mut e.attrs,
        Closure(e) => &mut e.attrs,
        ForLoop(e) => &mut e.attrs,
        If(e) => &mut e.attrs,
        Loop(e) => &mut e.attrs,
        Macro(e) => &mut e.attrs,
        Match(e) => &mut e.attrs,
        MethodCall(e) => &mut e.attrs,
        Paren(e) => &mut e.attrs,
        Path(e) => &mut e.attrs,
        Return(e) => &mut e.attrs,
        Try(e) => &mut e.attrs,
        Unsafe(e) => &mut e.attrs,
        While(e) => &mut e.attrs,
        _ => return None,
    })
}

/// `#[gpuscope::lints::allow(rule, ..)]`: checks the rule names, passes them on to the
/// gpuscope attributes inside the item, and takes statement-level allows off the bodies of
/// functions that no gpuscope attribute will expand.
pub(crate) fn allow(args: TokenStream, item: TokenStream) -> TokenStream {
    let rules = match parse_allow_list(args) {
        Ok(rules) => rules,
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(item);
            return out;
        }
    };
    let Ok(mut parsed) = syn::parse2::<syn::Item>(item.clone()) else {
        // Not an item rustc accepts either: rustc reports it.
        return item;
    };
    let names: Vec<Ident> = rules
        .iter()
        .map(|arg| Ident::new(arg.rule.name, arg.span))
        .collect();
    PassOn { names: &names }.visit_item_mut(&mut parsed);
    quote!(#parsed)
}

/// Prepends `allow(rules)` to the gpuscope attributes of the functions inside an item, and
/// strips statement-level allows from the other functions' bodies.
struct PassOn<'a> {
    names: &'a [Ident],
}

impl PassOn<'_> {
    /// Whether `attrs` carry a gpuscope attribute (which then gets the rules); otherwise
    /// the body is for `strip`.
    fn pass_on(&self, attrs: &mut [Attribute]) -> bool {
        let mut found = false;
        for attr in attrs.iter_mut() {
            if Attr::of(attr).is_none() {
                continue;
            }
            found = true;
            let names = self.names;
            let tokens = match &attr.meta {
                Meta::List(list) if !list.tokens.is_empty() => {
                    let rest = &list.tokens;
                    quote!(allow(#(#names),*), #rest)
                }
                _ => quote!(allow(#(#names),*)),
            };
            attr.meta = Meta::List(syn::MetaList {
                path: attr.path().clone(),
                delimiter: syn::MacroDelimiter::Paren(Default::default()),
                tokens,
            });
        }
        found
    }
}

impl VisitMut for PassOn<'_> {
    fn visit_item_fn_mut(&mut self, item: &mut syn::ItemFn) {
        if !self.pass_on(&mut item.attrs) {
            strip_allows(&mut item.block.stmts);
        }
    }

    fn visit_impl_item_fn_mut(&mut self, item: &mut syn::ImplItemFn) {
        if !self.pass_on(&mut item.attrs) {
            strip_allows(&mut item.block.stmts);
        }
    }

    fn visit_trait_item_fn_mut(&mut self, item: &mut syn::TraitItemFn) {
        if !self.pass_on(&mut item.attrs) {
            if let Some(block) = &mut item.default {
                strip_allows(&mut block.stmts);
            }
        }
    }
}
