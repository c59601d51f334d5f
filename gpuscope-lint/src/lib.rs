//! gpuscope's lint rules: GPU-memory mistakes in training code, found in `syn` syntax trees
//! with a local, best-effort type inference and per-library knowledge.
//!
//! The same rules run in two places: the `#[gpu_scope]` / `#[no_grad]` attribute macros call
//! [`lint_fn`] / [`lint_block`] on the function they expand (deny findings become compile
//! errors), and the `gpuscope lint` command calls [`lint_source`] on every `.rs` file of a
//! crate and prints rustc-style diagnostics, JSON or SARIF; where a crate's files are linted
//! together it calls [`lint_source_in_package`] on each and [`package_findings`] once they
//! are all in, for the reads that loops of other files repeat through calls.
//!
//! ```
//! use gpuscope_lint::{Level, Levels, lint_file};
//!
//! let src = r#"
//! fn train(model: &Model, opt: &mut Sgd, data: &[Batch]) {
//!     let mut total_loss = Tensor::zeros(&[]);
//!     for batch in data {
//!         let loss = model.loss(batch);
//!         loss.backward();
//!         opt.step();
//!         total_loss += &loss;
//!     }
//! }
//! "#;
//! let file = syn::parse_file(src).unwrap();
//! let findings = lint_file(&file, &Levels::default());
//! let rules: Vec<&str> = findings.iter().map(|f| f.rule).collect();
//! assert_eq!(rules, ["missing_zero_grad", "graph_accumulation"]);
//! assert!(findings.iter().all(|f| f.level == Level::Warn));
//! ```
//!
//! # Where things live
//!
//! Arrows run one way: `walk` → `rules` → `check`, `context` → `infer`, `frameworks`, `syntax`;
//! `package` and `walk` → `context` → `callgraph`, which knows only plain data.
//!
//! | module | job |
//! |---|---|
//! | `lib.rs` | this map and the re-exports |
//! | `entry.rs` | the entry points on syntax trees: [`lint_fn`], [`lint_block`], [`lint_file`] |
//! | `source/` | [`lint_source`]: text to diagnostics on any input: the nesting bound ([`MAX_NESTING`]) read from the text and checked on the tokens, the rules' trigger words, Rust 2015's anonymous trait-method parameters; [`lint_source_in_package`] for a file of a crate linted with its other files |
//! | `package.rs` | [`FileFacts`] (what a file of a crate leaves for its other files) and [`package_findings`] (the findings that calls across the crate's files make) |
//! | `level.rs` | [`Level`] (allow / warn / deny), one rule's level, and its parsing |
//! | `rule_levels.rs` | [`Levels`], the table of every rule's level, and [`UnknownRule`] with its did-you-mean |
//! | `finding.rs` | [`Rule`], [`Finding`], [`Diagnostic`], [`Position`], [`FnContext`], [`UNKNOWN_RULE`] |
//! | `attrs.rs` | levels written in attributes: `#[gpuscope::lints::allow(..)]`, `#[gpu_scope(allow(..))]` |
//! | `config.rs` | `gpuscope.toml` (feature `config`): levels per crate and per path |
//! | `rules_page.rs` | [`rules_page()`]: every rule's docs as one Markdown page (`docs/lints.md`) |
//! | `rules/` | one module per rule (its docs, its check, its tests) and the registry: [`RULES`] |
//! | `check.rs` | `Check`, the trait rules register through (with each rule's trigger words), and the loop hook's `Loop` |
//! | `walk/` | the walk over function bodies, keeping the context and applying attribute levels; `walk/bind.rs` binds the names it meets, `walk/bounded.rs` finds guards that let a bounded number of a loop's iterations through, `walk/switches.rs` knows debug switches, `walk/macro_args.rs` reads the arguments of format and logging macros as expressions, `walk/levels.rs` applies the levels written in attributes, `walk/calls/` gathers what a file's functions call with the loops around each call, as plain data for `callgraph/` (when a rule first asks, `Cx::repeated`, or, for a crate's files, with every file) |
//! | `callgraph/` | on plain data, no syntax trees: the resolution of calls to functions in one file and across a crate's files (its crates and module tree from the files' paths and `mod` declarations), and the loops added up along chains of calls |
//! | `fn_facts.rs` | what a function body does, gathered before the walk (graph uses, `keep`, raw pointers) |
//! | `context.rs` | what a rule sees (`Cx`: bindings, loops, `no_grad`, statics) and where findings go (`Sink`) |
//! | `infer/` | local type inference: what each value is (device memory, host data, a loss) |
//! | `frameworks/` | one table per tensor library: device types, gradient semantics, host reads, no-grad guards |
//! | `syntax.rs` | small syntax questions shared by rules (path suffixes, chain roots, same place) |
//!
//! To add a rule: a new module in `rules/` with its `RULE` (name, level, summary, docs with
//! an example and its fix), a unit struct implementing `Check`, tests beside it that show it
//! firing (with line and column) and not firing; then one entry in `RULES` and `CHECKS`.
//!
//! # Rules
//!
//! | rule | default | catches |
//! |---|---|---|
//! | `forget_tensor` | deny | `mem::forget(x)`, `ManuallyDrop::new(x)`, `Box::leak(x)` of a value owning device memory |
//! | `static_escape` | deny | a tensor stored into a `static` / `thread_local!` inside a function |
//! | `backward_in_no_grad` | deny | `.backward()` in a `#[no_grad]` fn, a `no_grad(|| ..)` closure, or after a no-grad guard |
//! | `graph_accumulation` | warn | a loss added or pushed into an accumulator across training iterations |
//! | `missing_zero_grad` | warn | a training loop with `.backward()` and `.step()` but no `.zero_grad()`, where gradients accumulate |
//! | `scope_escape` | warn | a tensor made in a `#[gpu_scope]` stored into a `&mut` argument or a field of `self` |
//! | `empty_cache_in_loop` | warn | `empty_cache()` inside a loop |
//! | `retain_graph_in_loop` | warn | a backward call retaining the graph inside a loop |
//! | `out_of_place_update` | allow | `x = x + y` where `x.add_(&y)` would do |
//! | `item_in_hot_loop` | allow | `.item()` or another read to the host (`to_scalar`, `into_scalar`, `double_value`, ...) inside an inner loop, also through calls of the same file or of its crate's other files |
//!
//! Rules about leaking, forgetting or storing memory fire only for values known (from
//! declared types, constructors and ops of known tensor types) to hold device memory; where
//! a type is unknown they stay silent. `gpuscope lint --explain RULE` prints a rule's docs.

pub mod attrs;
mod callgraph;
mod check;
#[cfg(feature = "config")]
pub mod config;
mod context;
mod entry;
mod finding;
mod fn_facts;
mod frameworks;
mod infer;
mod level;
mod package;
mod rule_levels;
mod rules;
mod rules_page;
mod source;
mod syntax;
mod walk;

pub use entry::{lint_block, lint_file, lint_fn};
pub use finding::{Diagnostic, Finding, FnContext, Position, Rule, UNKNOWN_RULE};
pub use level::{Level, ParseLevelError};
pub use package::{FileFacts, PackageFile, follows_callers, package_findings};
pub use rule_levels::{Levels, UnknownRule};
pub use rules::{RULES, rule};
pub use rules_page::rules_page;
pub use source::{
    MAX_NESTING, STACK_SIZE, SourceError, lint_source, lint_source_in_package, nesting_depth,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_and_lines(findings: &[Finding]) -> Vec<(&'static str, usize)> {
        findings
            .iter()
            .map(|f| (f.rule, f.span.start().line))
            .collect()
    }

    #[test]
    fn lint_file_reaches_methods_trait_defaults_modules_and_nested_fns() {
        let src = r#"
mod inner {
    impl Trainer {
        fn step(&self, t: Tensor) { std::mem::forget(t); }
    }
    trait Hook {
        fn keep(&self, t: Tensor) { Box::leak(Box::new(t)); }
        fn required(&self);
    }
}
fn outer() {
    fn nested(t: Tensor) { std::mem::forget(t); }
    let f = |t: Tensor| std::mem::forget(t);
}
static HOOK: Lazy<Box<dyn Fn(Tensor)>> = Lazy::new(|| Box::new(|t: Tensor| std::mem::forget(t)));
"#;
        let found = lint_file(&syn::parse_file(src).unwrap(), &Levels::default());
        assert_eq!(
            rules_and_lines(&found),
            [
                ("forget_tensor", 4),
                ("forget_tensor", 7),
                ("forget_tensor", 12),
                ("forget_tensor", 13),
                ("forget_tensor", 15)
            ]
        );
    }

    #[test]
    fn findings_are_ordered_by_position_across_rules() {
        let src = r#"
fn a(opt: &mut Sgd, data: &[Batch], t: Tensor) {
    for b in data {
        b.loss().backward();
        opt.step();
        CACHE.set(t.clone());
        empty_cache();
    }
    std::mem::forget(t);
}
"#;
        let found = lint_file(&syn::parse_file(src).unwrap(), &Levels::default());
        assert_eq!(
            rules_and_lines(&found),
            [
                ("missing_zero_grad", 3),
                ("static_escape", 6),
                ("empty_cache_in_loop", 7),
                ("forget_tensor", 9)
            ]
        );
        let positions: Vec<_> = found
            .iter()
            .map(|f| (f.span.start().line, f.span.start().column))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn levels_decide_what_is_reported_and_at_which_level() {
        let file = syn::parse_file("fn f(alloc: &A) { loop { alloc.empty_cache(); } }").unwrap();
        let mut levels = Levels::default();
        assert_eq!(lint_file(&file, &levels)[0].level, Level::Warn);
        levels.set("empty_cache_in_loop", Level::Deny).unwrap();
        assert_eq!(lint_file(&file, &levels)[0].level, Level::Deny);
        levels.set("empty_cache_in_loop", Level::Allow).unwrap();
        assert!(lint_file(&file, &levels).is_empty());
        assert!(lint_file(&file, &Levels::all(Level::Allow)).is_empty());
    }

    #[test]
    fn attributes_under_any_path_set_the_context() {
        let src = "#[my::gpu_scope]\n#[gpuscope::no_grad]\nfn f(t: Tensor) { t.backward(); std::mem::forget(t); }";
        let found = lint_file(&syn::parse_file(src).unwrap(), &Levels::default());
        assert_eq!(
            rules_and_lines(&found),
            [("backward_in_no_grad", 3), ("forget_tensor", 3)]
        );
        assert!(found[1].message.contains("#[gpu_scope]"));
        let item: syn::ItemFn = syn::parse_str("fn f(t: Tensor) { std::mem::forget(t); }").unwrap();
        let scoped = lint_fn(
            &item,
            FnContext {
                no_grad: false,
                scoped: true,
            },
            &Levels::default(),
        );
        assert!(scoped[0].message.contains("#[gpu_scope]"));
    }

    #[test]
    fn lint_block_lints_method_bodies() {
        let method: syn::ImplItemFn =
            syn::parse_str("fn eval(&self, l: Tensor) { let _g = no_grad_guard(); l.backward(); }")
                .unwrap();
        let found = lint_block(
            &method.sig,
            &method.block,
            FnContext::default(),
            &Levels::default(),
        );
        assert_eq!(rules_and_lines(&found), [("backward_in_no_grad", 1)]);
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers for the rules' tests.

    use crate::{Finding, Level, Levels, lint_file};

    /// The findings of `rule` in `src`, with `rule` switched on (at least `warn`).
    pub(crate) fn findings(rule: &str, src: &str) -> Vec<Finding> {
        let file = syn::parse_file(src).expect("test source parses");
        let mut levels = Levels::default();
        if levels.get(rule) == Some(Level::Allow) {
            levels.set(rule, Level::Warn).expect("known rule");
        }
        lint_file(&file, &levels)
            .into_iter()
            .filter(|f| f.rule == rule)
            .collect()
    }

    /// The findings of `rule` (switched on, at least `warn`) in a package of `files` (path
    /// relative to the package's root, source), linted together as `gpuscope lint` lints a
    /// crate's files: (path, finding), by path and position.
    pub(crate) fn package_findings(
        rule: &str,
        files: &[(&str, &str)],
    ) -> Vec<(String, crate::Diagnostic)> {
        let mut levels = Levels::default();
        if levels.get(rule) == Some(Level::Allow) {
            levels.set(rule, Level::Warn).expect("known rule");
        }
        let mut out = Vec::new();
        let mut facts = Vec::new();
        for (path, src) in files {
            let (found, left) =
                crate::lint_source_in_package(src, &levels).expect("test source parses");
            out.extend(found.into_iter().map(|d| (path.to_string(), d)));
            facts.push(left);
        }
        let package: Vec<crate::PackageFile<'_>> = files
            .iter()
            .zip(&facts)
            .map(|((path, _), facts)| crate::PackageFile {
                path: std::path::Path::new(path),
                shown: path,
                facts,
            })
            .collect();
        for ((path, _), found) in files.iter().zip(crate::package_findings(&package, None)) {
            out.extend(found.into_iter().map(|d| (path.to_string(), d)));
        }
        out.retain(|(_, d)| d.rule == rule);
        out.sort_by_key(|(path, d)| (path.clone(), d.start));
        out
    }

    /// Where `rule` fires in a package of `files`: (path, line) of each finding.
    pub(crate) fn package_hits(rule: &str, files: &[(&str, &str)]) -> Vec<(String, usize)> {
        package_findings(rule, files)
            .into_iter()
            .map(|(path, d)| (path, d.start.line))
            .collect()
    }

    /// Where `rule` fires in `src`: (line, column), both 1-based, of each finding's start.
    pub(crate) fn hits(rule: &str, src: &str) -> Vec<(usize, usize)> {
        findings(rule, src)
            .iter()
            .map(|f| {
                let start = f.span.start();
                (start.line, start.column + 1)
            })
            .collect()
    }
}
