//! `gpuscope.toml` on arbitrary text: a configuration or an error with a line and column
//! inside the text, never a panic.
#![no_main]

use std::path::Path;

use gpuscope_lint::Levels;
use gpuscope_lint::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match Config::parse(text, Path::new("gpuscope.toml")) {
        Ok(config) => {
            let levels = config.apply(Levels::default());
            let _ = config.levels_for(&levels, Path::new("src/main.rs"));
        }
        Err(e) => {
            let lines = text.lines().count().max(1);
            assert!(e.line <= lines + 1, "line {} of {lines}: {e}", e.line);
            assert!(!e.to_string().is_empty());
        }
    }
});
