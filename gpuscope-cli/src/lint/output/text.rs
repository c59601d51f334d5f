//! rustc-style text: `error[rule]: message`, ` --> file:line:col`, the line with the whole
//! span underlined (to the end of the line when the span goes on), `= note: ..`,
//! `= help: ..`; then `gpuscope lint: N errors, M warnings in K files`.

use std::io::Write;

use annotate_snippets::{Level as Annotation, Renderer, Snippet};
use gpuscope_lint::Level;

use super::Output;
use crate::lint::check::{Diag, FileReport};

pub struct Text<W: Write> {
    out: W,
    renderer: Renderer,
    errors: usize,
    warnings: usize,
    files: usize,
}

impl<W: Write> Text<W> {
    pub fn new(out: W, color: bool) -> Self {
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        };
        Text {
            out,
            renderer,
            errors: 0,
            warnings: 0,
            files: 0,
        }
    }
}

impl<W: Write> Output for Text<W> {
    fn report(&mut self, report: &FileReport) -> std::io::Result<()> {
        self.files += 1;
        for diag in &report.diags {
            match diag.level {
                Level::Deny => self.errors += 1,
                _ => self.warnings += 1,
            }
            writeln!(self.out, "{}\n", render(&self.renderer, &report.file, diag))?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        writeln!(
            self.out,
            "gpuscope lint: {}, {} in {}",
            plural(self.errors, "error"),
            plural(self.warnings, "warning"),
            plural(self.files, "file")
        )?;
        self.out.flush()
    }
}

/// `1 error`, `0 warnings`.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// One diagnostic, rendered.
fn render(renderer: &Renderer, file: &str, diag: &Diag) -> String {
    let level = if diag.level == Level::Deny {
        Annotation::Error
    } else {
        Annotation::Warning
    };
    let line = diag.source_line.as_str();
    let byte_at = |column: usize| {
        line.char_indices()
            .nth(column.max(1) - 1)
            .map_or(line.len(), |(i, _)| i)
    };
    let start = byte_at(diag.column);
    let mut end = if diag.end_line == diag.line {
        byte_at(diag.end_column)
    } else {
        line.trim_end().len()
    };
    if end <= start {
        end = line[start..]
            .chars()
            .next()
            .map_or(start, |c| start + c.len_utf8());
    }
    let mut snippet = Snippet::source(line).line_start(diag.line).origin(file);
    if end > start {
        snippet = snippet.annotation(level.span(start..end));
    }
    let mut message = level.title(&diag.message).id(diag.rule).snippet(snippet);
    if let Some(note) = &diag.note {
        message = message.footer(Annotation::Note.title(note));
    }
    let message = message.footer(Annotation::Help.title(&diag.help));
    renderer.render(message).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals() {
        assert_eq!(plural(1, "error"), "1 error");
        assert_eq!(plural(0, "warning"), "0 warnings");
    }
}
