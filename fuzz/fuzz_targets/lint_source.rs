//! The lint over arbitrary source text (what `gpuscope lint` does per file): findings or
//! an error, never a panic or a stack overflow; at the default levels and with every rule
//! at `warn` (which runs the passes that only `warn` rules ask for, such as the callers'
//! loops of `item_in_hot_loop`).
#![no_main]

use gpuscope_lint::{Level, Levels, RULES, lint_source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = lint_source(text, &Levels::default());
    let mut all = Levels::default();
    for rule in RULES {
        all.set(rule.name, Level::Warn).expect("a rule of RULES");
    }
    let _ = lint_source(text, &all);
});
