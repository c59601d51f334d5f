//! The entry points on syntax trees: [`lint_fn`] and [`lint_block`] (what the macros call on
//! the function they expand) and [`lint_file`] (a whole file, what
//! [`lint_source`](crate::lint_source) calls after parsing).

use syn::visit::Visit;

use crate::context::{Deferred, FileCallsOf};
use crate::infer::FileIndex;
use crate::walk::Walker;
use crate::{Finding, FnContext, Levels};

/// Lints one function: its body, its closures and the functions nested in it.
///
/// Findings at `allow` are left out; the rest are ordered by source position.
///
/// ```
/// use gpuscope_lint::{FnContext, Levels, lint_fn};
///
/// let item: syn::ItemFn = syn::parse_quote! {
///     fn evaluate(model: &Model, x: &Tensor) {
///         let loss = model.forward(x).mean();
///         loss.backward();
///     }
/// };
/// let ctx = FnContext { no_grad: true, scoped: false };
/// let findings = lint_fn(&item, ctx, &Levels::default());
/// assert_eq!(findings.len(), 1);
/// assert_eq!(findings[0].rule, "backward_in_no_grad");
/// assert!(lint_fn(&item, FnContext::default(), &Levels::default()).is_empty());
/// ```
pub fn lint_fn(item: &syn::ItemFn, ctx: FnContext, levels: &Levels) -> Vec<Finding> {
    let index = FileIndex::of_block(&item.block);
    let mut walker = Walker::new(&index, levels);
    walker.walk_fn(&item.attrs, &item.sig, &item.block, ctx);
    walker.finish()
}

/// Lints a function body given as a signature and a block: for methods (`syn::ImplItemFn`)
/// and trait default methods, which are not `syn::ItemFn`s.
///
/// ```
/// use gpuscope_lint::{FnContext, Levels, lint_block};
///
/// let method: syn::ImplItemFn = syn::parse_quote! {
///     fn remember(&self, t: Tensor) {
///         LAST.lock().unwrap().push(t);
///     }
/// };
/// let findings = lint_block(&method.sig, &method.block, FnContext::default(), &Levels::default());
/// assert_eq!(findings[0].rule, "static_escape");
/// ```
pub fn lint_block(
    sig: &syn::Signature,
    block: &syn::Block,
    ctx: FnContext,
    levels: &Levels,
) -> Vec<Finding> {
    let index = FileIndex::of_block(block);
    let mut walker = Walker::new(&index, levels);
    walker.walk_fn(&[], sig, block, ctx);
    walker.finish()
}

/// Lints every function, method and closure body in a file.
///
/// Functions whose attributes end in `no_grad` or `gpu_scope` get that context; closures
/// passed to `no_grad(..)` count as `no_grad`. Statics and consts declared anywhere in the
/// file are known to [`static_escape`](crate::RULES). Findings at `allow` are left out; the rest are
/// ordered by source position.
///
/// ```
/// use gpuscope_lint::{Level, Levels, lint_file};
///
/// let file = syn::parse_file(
///     "fn f(a: &Alloc) {\n    for _ in 0..10 {\n        a.empty_cache();\n    }\n}\n",
/// ).unwrap();
/// let found = lint_file(&file, &Levels::default());
/// assert_eq!(found[0].rule, "empty_cache_in_loop");
/// assert_eq!(found[0].span.start().line, 3);
///
/// let mut quiet = Levels::default();
/// quiet.set("empty_cache_in_loop", Level::Allow)?;
/// assert!(lint_file(&file, &quiet).is_empty());
/// # Ok::<(), gpuscope_lint::UnknownRule>(())
/// ```
pub fn lint_file(file: &syn::File, levels: &Levels) -> Vec<Finding> {
    let index = FileIndex::of_file(file);
    let mut walker = Walker::new(&index, levels);
    walker.in_file(file);
    walker.visit_file(file);
    walker.finish()
}

/// [`lint_file`] walking only the functions that span one of `lines` (1-based, ascending),
/// for a file whose functions can give findings only where a trigger word is
/// ([`lint_source`](crate::lint_source) decides). Debug builds walk the others too and panic
/// if one gives a finding.
pub(crate) fn lint_file_at_lines(
    file: &syn::File,
    levels: &Levels,
    lines: &[usize],
) -> Vec<Finding> {
    let index = FileIndex::of_file(file);
    let mut walker = Walker::new(&index, levels);
    walker.only_lines = Some(lines);
    walker.in_file(file);
    walker.visit_file(file);
    walker.finish()
}

/// [`lint_file`] (or [`lint_file_at_lines`] with `lines`) for a file linted as one of a
/// crate's: also the findings left for the callers in the crate's other files, and what
/// the file defines and calls. With `walk` false (no trigger word of the rules enabled),
/// only what the file defines and calls.
pub(crate) fn lint_file_in_package(
    file: &syn::File,
    levels: &Levels,
    lines: Option<&[usize]>,
    walk: bool,
) -> (Vec<Finding>, Vec<Deferred>, FileCallsOf) {
    let index = FileIndex::of_file(file);
    let mut walker = Walker::new(&index, levels);
    walker.only_lines = lines;
    walker.in_file(file);
    walker.in_package();
    if walk {
        walker.visit_file(file);
    }
    walker.finish_package()
}
