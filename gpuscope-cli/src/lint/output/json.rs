//! `--format json`: one array of findings.

use std::io::Write;

use serde::Serialize;

use super::Output;
use crate::lint::check::FileReport;

/// A finding in `--format json`.
#[derive(Serialize)]
struct JsonFinding {
    rule: &'static str,
    level: &'static str,
    file: String,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    message: String,
    help: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

pub struct Json<W: Write> {
    out: W,
    findings: Vec<JsonFinding>,
}

impl<W: Write> Json<W> {
    pub fn new(out: W) -> Self {
        Json {
            out,
            findings: Vec::new(),
        }
    }
}

impl<W: Write> Output for Json<W> {
    fn report(&mut self, report: &FileReport) -> std::io::Result<()> {
        self.findings
            .extend(report.diags.iter().map(|d| JsonFinding {
                rule: d.rule,
                level: d.level.as_str(),
                file: report.file.clone(),
                line: d.line,
                column: d.column,
                end_line: d.end_line,
                end_column: d.end_column,
                message: d.message.clone(),
                help: d.help.clone(),
                note: d.note.clone(),
            }));
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut self.out, &self.findings)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}
