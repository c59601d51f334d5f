//! The three output formats. [`Output`] takes the reports one file at a time, in path
//! order: text prints each as it comes, JSON and SARIF keep the findings (small) and print
//! one document at the end.

mod json;
mod sarif;
mod text;

use gpuscope_lint::Levels;

use super::args::{Color, Format};
use super::check::FileReport;

/// Where reports go.
pub trait Output {
    /// Writes (or keeps) one file's report.
    fn report(&mut self, report: &FileReport) -> std::io::Result<()>;
    /// Writes what is left: the summary, or the whole document.
    fn finish(self: Box<Self>) -> std::io::Result<()>;
}

/// The output for `format`, writing to standard output.
pub fn for_format(format: Format, color: Color, levels: &Levels) -> Box<dyn Output> {
    let out = std::io::stdout();
    match format {
        Format::Text => Box::new(text::Text::new(out, use_color(color))),
        Format::Json => Box::new(json::Json::new(out)),
        Format::Sarif => Box::new(sarif::Sarif::new(out, levels.clone())),
    }
}

fn use_color(choice: Color) -> bool {
    use std::io::IsTerminal;
    match choice {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    }
}
