//! The lint over arbitrary source text (what `gpuscope lint` does per file): findings or
//! an error, never a panic or a stack overflow.
#![no_main]

use gpuscope_lint::{Levels, lint_source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = lint_source(text, &Levels::default());
});
