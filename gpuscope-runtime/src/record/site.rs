//! Where things are in the source: a scope's site (its name and the annotated
//! function's location).

use std::fmt;

/// Where a scope is: its name and the function's site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScopeSite {
    /// The scope's name.
    pub name: &'static str,
    /// Source file.
    pub file: &'static str,
    /// Line.
    pub line: u32,
    /// Column.
    pub column: u32,
}

impl ScopeSite {
    /// `file:line:column`.
    pub fn location(&self) -> String {
        format!("{}:{}:{}", self.file, self.line, self.column)
    }
}

impl fmt::Display for ScopeSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` at {}:{}:{}",
            self.name, self.file, self.line, self.column
        )
    }
}

/// `file:line:column` of a `#[track_caller]` location.
pub fn location_string(at: &std::panic::Location<'_>) -> String {
    format!("{}:{}:{}", at.file(), at.line(), at.column())
}
