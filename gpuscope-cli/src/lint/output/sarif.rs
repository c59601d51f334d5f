//! `--format sarif`: SARIF 2.1.0, for code-scanning services.

use std::fmt::Write as _;
use std::io::Write;

use gpuscope_lint::{Level, Levels, RULES};

use super::Output;
use crate::lint::check::{FileReport, PSEUDO_RULES};

pub struct Sarif<W: Write> {
    out: W,
    levels: Levels,
    results: Vec<serde_json::Value>,
}

impl<W: Write> Sarif<W> {
    pub fn new(out: W, levels: Levels) -> Self {
        Sarif {
            out,
            levels,
            results: Vec::new(),
        }
    }
}

fn sarif_level(level: Level) -> &'static str {
    match level {
        Level::Deny => "error",
        Level::Warn => "warning",
        Level::Allow => "note",
    }
}

/// A relative path as a SARIF URI: `/` separators, unsafe characters percent-encoded.
fn sarif_uri(file: &str) -> String {
    let mut uri = String::new();
    for byte in file.replace('\\', "/").bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                uri.push(char::from(byte))
            }
            _ => {
                let _ = write!(uri, "%{byte:02X}");
            }
        }
    }
    uri
}

/// The index of `rule` in the driver's rule list: the rules, then the pseudo-rules.
fn rule_index(rule: &str) -> usize {
    RULES
        .iter()
        .position(|r| r.name == rule)
        .or_else(|| {
            PSEUDO_RULES
                .iter()
                .position(|(name, _)| *name == rule)
                .map(|i| RULES.len() + i)
        })
        .unwrap_or(0)
}

impl<W: Write> Output for Sarif<W> {
    fn report(&mut self, report: &FileReport) -> std::io::Result<()> {
        for d in &report.diags {
            let mut text = format!("{} (help: {})", d.message, d.help);
            if let Some(note) = &d.note {
                let _ = write!(text, " (note: {note})");
            }
            self.results.push(serde_json::json!({
                "ruleId": d.rule,
                "ruleIndex": rule_index(d.rule),
                "level": sarif_level(d.level),
                "message": { "text": text },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": sarif_uri(&report.file) },
                        "region": {
                            "startLine": d.line,
                            "startColumn": d.column,
                            "endLine": d.end_line,
                            "endColumn": d.end_column,
                        },
                    },
                }],
            }));
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        let mut rules: Vec<serde_json::Value> = self
            .levels
            .iter()
            .map(|(rule, level)| {
                serde_json::json!({
                    "id": rule.name,
                    "shortDescription": { "text": rule.summary },
                    "fullDescription": { "text": rule.docs },
                    "defaultConfiguration": { "level": sarif_level(level), "enabled": level != Level::Allow },
                })
            })
            .collect();
        for (name, what) in PSEUDO_RULES {
            rules.push(serde_json::json!({
                "id": name,
                "shortDescription": { "text": what },
                "defaultConfiguration": { "level": "error" },
            }));
        }
        let sarif = serde_json::json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [{
                "tool": {
                    "driver": {
                        "name": "gpuscope",
                        "version": env!("CARGO_PKG_VERSION"),
                        "informationUri": env!("CARGO_PKG_REPOSITORY"),
                        "rules": rules,
                    },
                },
                "columnKind": "unicodeCodePoints",
                "results": std::mem::take(&mut self.results),
            }],
        });
        serde_json::to_writer_pretty(&mut self.out, &sarif)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sarif_uris_are_escaped() {
        assert_eq!(sarif_uri("src/my file.rs"), "src/my%20file.rs");
        assert_eq!(sarif_uri("a\\b.rs"), "a/b.rs");
    }

    #[test]
    fn rule_indices_cover_rules_and_pseudo_rules() {
        assert_eq!(rule_index(RULES[2].name), 2);
        assert_eq!(rule_index("parse"), RULES.len());
        assert_eq!(rule_index("walk"), RULES.len() + 5);
    }
}
