//! Property tests: the loop rules against a model of what they should say, on generated
//! training loops, and positions that follow the code when it moves.

use gpuscope_lint::{Level, Levels, lint_file};
use proptest::prelude::*;

fn rules_in(src: &str, levels: &Levels) -> Vec<(&'static str, usize, usize)> {
    let file = syn::parse_file(src).unwrap_or_else(|e| panic!("generated code parses: {e}\n{src}"));
    lint_file(&file, levels)
        .into_iter()
        .map(|f| (f.rule, f.span.start().line, f.span.start().column + 1))
        .collect()
}

/// A statement in a generated loop body.
#[derive(Clone, Debug)]
enum Stmt {
    Backward,
    Step,
    ZeroGrad,
    ModelZeroGrad,
    Other,
    /// The statement inside an `if`.
    Nested(Box<Stmt>),
}

impl Stmt {
    fn code(&self) -> String {
        match self {
            Stmt::Backward => "model.loss(batch).backward();".into(),
            Stmt::Step => "opt.step();".into(),
            Stmt::ZeroGrad => "opt.zero_grad();".into(),
            Stmt::ModelZeroGrad => "model.zero_grad();".into(),
            Stmt::Other => "let _ = model.forward(batch);".into(),
            Stmt::Nested(inner) => format!("if batch.len() > 1 {{ {} }}", inner.code()),
        }
    }

    fn flat(&self) -> &Stmt {
        match self {
            Stmt::Nested(inner) => inner.flat(),
            other => other,
        }
    }
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let leaf = prop_oneof![
        Just(Stmt::Backward),
        Just(Stmt::Step),
        Just(Stmt::ZeroGrad),
        Just(Stmt::ModelZeroGrad),
        Just(Stmt::Other),
    ];
    leaf.prop_recursive(2, 4, 1, |inner| {
        inner.prop_map(|s| Stmt::Nested(Box::new(s)))
    })
}

/// How the loss is wrapped before it is accumulated.
const WRAPPERS: [(&str, bool); 8] = [
    ("{}", true),
    ("&{}", true),
    ("{}.clone()", true),
    ("{}.item()", false),
    ("{}.detach()", false),
    ("{}.to_vec()", false),
    ("{}.double_value(&[]) as f32", false),
    ("f32::from(&{})", false),
];

/// How it is accumulated.
const FORMS: [&str; 4] = [
    "acc += {v};",
    "acc = acc + {v};",
    "acc = {v} + acc;",
    "acc.push({v});",
];

proptest! {
    #[test]
    fn missing_zero_grad_matches_its_model(body in prop::collection::vec(stmt(), 0..8)) {
        let code: Vec<String> = body.iter().map(Stmt::code).collect();
        let src = format!(
            "fn train(model: &Model, opt: &mut Sgd, data: &[Batch]) {{\n    for batch in data {{\n        {}\n    }}\n}}\n",
            code.join("\n        ")
        );
        let has = |f: fn(&Stmt) -> bool| body.iter().any(|s| f(s.flat()));
        let expected = has(|s| matches!(s, Stmt::Backward))
            && has(|s| matches!(s, Stmt::Step))
            && !has(|s| matches!(s, Stmt::ZeroGrad | Stmt::ModelZeroGrad));
        let found = rules_in(&src, &Levels::default());
        let fired: Vec<_> = found.iter().filter(|f| f.0 == "missing_zero_grad").collect();
        prop_assert_eq!(fired.len(), usize::from(expected), "{}", src);
        if expected {
            prop_assert_eq!((fired[0].1, fired[0].2), (2, 5));
        }
    }

    #[test]
    fn graph_accumulation_matches_its_model(
        wrapper in 0..WRAPPERS.len(),
        form in 0..FORMS.len(),
        declared_outside in any::<bool>(),
        scalar_acc in any::<bool>(),
        in_loop in any::<bool>(),
        indent in 0usize..6,
        blank_lines in 0usize..4,
    ) {
        let (wrap, keeps_graph) = WRAPPERS[wrapper];
        let value = wrap.replace("{}", "loss");
        let stmt = FORMS[form].replace("{v}", &value);
        let init = match (FORMS[form].starts_with("acc.push"), scalar_acc) {
            (true, true) => "let mut acc: Vec<f32> = Vec::new();",
            (true, false) => "let mut acc = Vec::new();",
            (false, true) => "let mut acc = 0.0;",
            (false, false) => "let mut acc = Tensor::zeros(&[]);",
        };
        let pad = " ".repeat(indent);
        let blanks = "\n".repeat(blank_lines);
        let (outer, inner) = if declared_outside { (init, "") } else { ("", init) };
        let src = if in_loop {
            format!(
                "fn f(model: &Model, data: &[Batch]) {{\n    {outer}\n    for batch in data {{\n        {inner}\n        let loss = model.loss(batch);\n{blanks}{pad}{stmt}\n    }}\n}}\n"
            )
        } else {
            format!(
                "fn f(model: &Model, batch: &Batch) {{\n    {outer}\n    {inner}\n    let loss = model.loss(batch);\n{blanks}{pad}{stmt}\n}}\n"
            )
        };
        let expected = in_loop && declared_outside && !scalar_acc && keeps_graph;
        let found = rules_in(&src, &Levels::default());
        let fired: Vec<_> = found.iter().filter(|f| f.0 == "graph_accumulation").collect();
        prop_assert_eq!(fired.len(), usize::from(expected), "{}", src);
        if expected {
            // The span starts at the statement, wherever it was moved to.
            let line = 6 + blank_lines;
            prop_assert_eq!((fired[0].1, fired[0].2), (line, indent + 1), "{}", src);
        }
    }

    #[test]
    fn findings_are_sorted_and_linting_never_panics(
        pieces in prop::collection::vec(0usize..8, 0..12),
    ) {
        const PIECES: [&str; 8] = [
            "std::mem::forget(t.clone());",
            "for b in data { b.loss().backward(); opt.step(); }",
            "CACHE.lock().unwrap().push(t.clone());",
            "let total = no_grad(|| { t.backward(); 1 });",
            "loop { alloc.empty_cache(); break; }",
            "let mut acc = Tensor::zeros(&[]); for b in data { acc += b.loss(); }",
            "x = x + t.clone();",
            "for o in data { for i in data { let v = i.loss().item(); } }",
        ];
        let body: Vec<&str> = pieces.iter().map(|&i| PIECES[i]).collect();
        let src = format!("fn f(t: Tensor, data: &[Batch], opt: &mut Sgd, alloc: &A, mut x: Tensor) {{\n{}\n}}\n", body.join("\n"));
        let found = rules_in(&src, &Levels::all(Level::Warn));
        let positions: Vec<(usize, usize)> = found.iter().map(|f| (f.1, f.2)).collect();
        let mut sorted = positions.clone();
        sorted.sort();
        prop_assert_eq!(&positions, &sorted);
        // Every piece that is a mistake is reported on its own line.
        for (i, &piece) in pieces.iter().enumerate() {
            let line = i + 2;
            prop_assert!(found.iter().any(|f| f.1 == line), "piece {} on line {} not reported\n{}", piece, line, src);
        }
    }
}
