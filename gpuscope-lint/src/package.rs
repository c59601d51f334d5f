//! The lint of a crate's files together: [`FileFacts`], what
//! [`lint_source_in_package`](crate::lint_source_in_package) leaves of each file for the
//! others (its functions and calls, and its reads that only callers in other files may
//! repeat), and [`package_findings`], the findings those callers make (`item_in_hot_loop`'s
//! reads in a helper of one file that a loop of another calls).

use std::path::Path;

use crate::callgraph::{FileCalls, PackageFile as CallsFile, called_in_package};
use crate::context::{Deferred, FileCallsOf, Texts};
use crate::finding::{Diagnostic, Position};
use crate::{Level, Levels};

/// What linting one file of a crate leaves for its other files: what it defines and calls,
/// and the reads that only callers in other files may repeat.
pub struct FileFacts {
    calls: FileCalls,
    reads: Vec<Read>,
}

/// A read left for the callers in the crate's other files.
struct Read {
    rule: &'static str,
    level: Level,
    start: Position,
    end: Position,
    /// Its function's index in the file's `FileCalls`.
    function: usize,
    /// The loops of its own function that repeat it.
    own: usize,
    texts: Texts,
}

impl FileFacts {
    pub(crate) fn new(of: FileCallsOf, deferred: Vec<Deferred>) -> Self {
        let reads = deferred
            .into_iter()
            .filter_map(|d| {
                let function = of.bodies.iter().position(|&b| b == d.body && b != 0)?;
                Some(Read {
                    rule: d.rule,
                    level: d.level,
                    start: Position::from_line_column(d.span.0.start()),
                    end: Position::from_line_column(d.span.1.end()),
                    function,
                    own: d.own,
                    texts: d.texts,
                })
            })
            .collect();
        FileFacts {
            calls: of.calls,
            reads,
        }
    }

    /// Whether the file has no read that callers in other files may repeat: then
    /// [`package_findings`] reports nothing in it.
    pub fn is_settled(&self) -> bool {
        self.reads.is_empty()
    }

    /// The lines of the reads that callers in other files may repeat (where
    /// [`package_findings`] may report in this file).
    pub fn read_lines(&self) -> impl Iterator<Item = usize> + '_ {
        self.reads.iter().map(|r| r.start.line)
    }
}

impl std::fmt::Debug for FileFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileFacts")
            .field("functions", &self.calls.fns.len())
            .field("calls", &self.calls.sites.len())
            .field("reads", &self.reads.len())
            .finish()
    }
}

/// A file of a crate, as [`package_findings`] takes it.
#[derive(Clone, Copy, Debug)]
pub struct PackageFile<'a> {
    /// Its path relative to the package's root (the directory holding `src/`): `src/lib.rs`,
    /// `src/train/mod.rs`, `tests/smoke.rs`.
    pub path: &'a Path,
    /// Its path as the notes name it.
    pub shown: &'a str,
    /// What [`lint_source_in_package`](crate::lint_source_in_package) left of it.
    pub facts: &'a FileFacts,
}

/// The findings that calls in other files of a package make, by file (in `files`' order):
/// reads that a loop of another file repeats through calls, reported at the read (as the
/// file alone reports those its own loops repeat) with a note naming the call and where it
/// is. `lib_name` is the name the package's library is used by (`[lib] name`, else the
/// package's name with `-` as `_`), where known. Nothing is resolved when no file has a
/// read left for the others ([`FileFacts::is_settled`]).
///
/// The package's crates and modules come from the files' paths (`src/lib.rs`,
/// `src/main.rs`, `src/bin/*.rs`, `tests/*.rs`, ..) and their `mod` declarations; a file no
/// crate root reaches takes part only as a file of its own.
pub fn package_findings(files: &[PackageFile<'_>], lib_name: Option<&str>) -> Vec<Vec<Diagnostic>> {
    let mut out = vec![Vec::new(); files.len()];
    if files.iter().all(|f| f.facts.is_settled()) {
        return out;
    }
    let calls: Vec<CallsFile<'_>> = files
        .iter()
        .map(|f| CallsFile {
            path: f
                .path
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect(),
            shown: f.shown,
            calls: &f.facts.calls,
        })
        .collect();
    let wanted: Vec<(usize, usize)> = files
        .iter()
        .enumerate()
        .flat_map(|(file, f)| f.facts.reads.iter().map(move |r| (file, r.function)))
        .collect();
    let called = called_in_package(&calls, lib_name, &wanted);
    for ((file, found), called) in files.iter().zip(&mut out).zip(&called) {
        for read in &file.facts.reads {
            let Some(Some(via)) = called.get(read.function) else {
                continue;
            };
            if read.own + via.loops < 2 {
                continue;
            }
            let (message, help, note) = (read.texts)(via);
            found.push(Diagnostic {
                rule: read.rule,
                level: read.level,
                start: read.start,
                end: read.end,
                message,
                help,
                note,
            });
        }
    }
    out
}

/// Whether linting at `levels` may leave reads for a crate's other files (a rule whose
/// findings [`package_findings`] makes is on): where it may not,
/// [`lint_source`](crate::lint_source) does all there is to do.
pub fn follows_callers(levels: &Levels) -> bool {
    levels
        .get("item_in_hot_loop")
        .is_some_and(|l| l != Level::Allow)
}
