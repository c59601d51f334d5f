//! `lint_source` walks only the files and functions that hold a trigger word of the rules
//! enabled: the same findings as walking everything, on files put together from every
//! rule's documented examples (those that fire and their fixes), functions without any
//! trigger word, statics, and level attributes.

use gpuscope_lint::{Level, Levels, RULES, lint_file, lint_source};
use proptest::prelude::*;

/// Every fenced Rust block of every rule's docs.
fn doc_examples() -> Vec<String> {
    let mut examples = Vec::new();
    for rule in RULES {
        let mut rest = rule.docs;
        while let Some(start) = rest.find("```rust\n") {
            let body = &rest[start + 8..];
            let end = body.find("```").expect("closed fence");
            examples.push(body[..end].to_owned());
            rest = &body[end..][3..];
        }
    }
    examples
}

/// Code with no trigger word, and the things that change what a function reports from
/// outside it.
const OTHERS: &[&str] = &[
    "fn forward(x: &Tensor, w: &Tensor) -> Tensor { x.matmul(w).relu() }\n",
    "impl Model {\n    fn step(&mut self, x: Tensor) {\n        self.cache.push(x);\n        for _ in 0..3 { self.n += 1; }\n    }\n}\n",
    "static cache: Mutex<Vec<Tensor>> = Mutex::new(Vec::new());\n",
    "fn keep(t: Tensor) { cache.lock().unwrap().push(t); }\n",
    "fn keep_too(t: Tensor) { CACHE.lock().unwrap().push(t); }\n",
    "#[gpuscope::lints::allow(forget_tensor)]\nfn quiet(t: Tensor) { std::mem::forget(t); }\n",
    "#[gpuscope::lints::warn(item_in_hot_loop)]\nmod inner {\n    fn f(xs: &[Tensor]) { for a in xs { for b in xs { let _ = b.item(); } } }\n}\n",
    "#[gpuscope::lints::allow(no_such_rule)]\nfn typo() {}\n",
    "const LIMIT: usize = 4;\nfn limit() -> usize { LIMIT + 1 }\n",
];

/// What `lint_file` says of `src` (which parses), as rule, line and message.
fn everything(src: &str, levels: &Levels) -> Vec<(String, usize, String)> {
    let file = syn::parse_file(src).expect("parses");
    let found = lint_file(&file, levels)
        .into_iter()
        .map(|f| (f.rule.to_owned(), f.span.start().line, f.message))
        .collect();
    proc_macro2::extra::invalidate_current_thread_spans();
    found
}

fn skipping(src: &str, levels: &Levels) -> Vec<(String, usize, String)> {
    lint_source(src, levels)
        .expect("parses")
        .into_iter()
        .map(|d| (d.rule.to_owned(), d.start.line, d.message))
        .collect()
}

/// The levels to compare under: the defaults, every rule that declares trigger words at
/// `warn`, and every rule off (only attribute errors).
fn levels() -> Vec<Levels> {
    let mut warn = Levels::all(Level::Warn);
    warn.set("out_of_place_update", Level::Allow)
        .expect("known rule");
    vec![Levels::default(), warn, Levels::all(Level::Allow)]
}

#[test]
fn every_example_alone_gives_the_same_findings() {
    for example in doc_examples().iter().chain(
        OTHERS
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<_>>()
            .iter(),
    ) {
        if syn::parse_file(example).is_err() {
            continue;
        }
        for levels in levels() {
            assert_eq!(
                skipping(example, &levels),
                everything(example, &levels),
                "{example}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn files_put_together_give_the_same_findings(picks in prop::collection::vec(any::<prop::sample::Index>(), 1..8)) {
        let mut parts = doc_examples();
        parts.extend(OTHERS.iter().map(|s| (*s).to_owned()));
        let src: String = picks.iter().map(|i| i.get(&parts).as_str()).collect::<Vec<_>>().join("\n");
        if syn::parse_file(&src).is_ok() {
            for levels in levels() {
                prop_assert_eq!(skipping(&src, &levels), everything(&src, &levels), "{}", src);
            }
        }
    }
}
