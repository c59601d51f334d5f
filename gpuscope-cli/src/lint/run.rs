//! Linting many files on several threads, each with a stack of
//! [`gpuscope_lint::STACK_SIZE`], handing the reports over in path order soon after each is
//! ready (so memory holds a few files at a time, not the whole crate). A thread hands its
//! reports over in batches (up to [`BATCH`] files or [`BATCH_WAIT`]), not one by one: waking
//! the receiving thread for every file cost about 3% of a run over many small files.
//!
//! The files of a package linted together (`packages.rs`) leave what the package's other
//! files need ([`Left`]); once all of a package's files are in, the receiving thread adds
//! the findings its calls across files make (`gpuscope_lint::package_findings`) to the
//! reports of the files that left reads for them, which wait for that (the others go on).

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::check::{FileReport, Left, diag, display_path, file_error, lint_path};
use super::files::Input;
use super::packages::Packages;
use super::settings::Settings;

/// The most reports a lint thread keeps before handing them over.
const BATCH: usize = 64;

/// The longest a lint thread keeps a report before handing it over.
const BATCH_WAIT: Duration = Duration::from_millis(50);

/// Lints `inputs` on `jobs` threads (default: one per core) and calls `each` with every
/// report, in the order of `inputs`.
///
/// # Errors
/// A thread could not be started (the message says why); reports already handed over stay.
pub fn lint_all(
    inputs: &[Input],
    settings: &Settings,
    packages: &Packages,
    jobs: Option<usize>,
    max_bytes: u64,
    mut each: impl FnMut(FileReport),
) -> Result<(), String> {
    let threads = jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(inputs.len())
        .max(1);
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let (send, receive) = mpsc::channel::<Vec<(usize, FileReport, Option<Left>)>>();
        for _ in 0..threads {
            let send = send.clone();
            let next = &next;
            std::thread::Builder::new()
                .name("gpuscope-lint".to_owned())
                .stack_size(gpuscope_lint::STACK_SIZE)
                .spawn_scoped(scope, move || {
                    let mut batch = Vec::new();
                    let mut since = Instant::now();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(input) = inputs.get(i) else { break };
                        if batch.is_empty() {
                            since = Instant::now();
                        }
                        let in_package = packages.of[i].is_some();
                        let (report, left) = one(input, settings, max_bytes, in_package);
                        batch.push((i, report, left));
                        if (batch.len() >= BATCH || since.elapsed() >= BATCH_WAIT)
                            && send.send(std::mem::take(&mut batch)).is_err()
                        {
                            return;
                        }
                    }
                    if !batch.is_empty() {
                        let _ = send.send(batch);
                    }
                })
                .map_err(|e| format!("cannot start a lint thread: {e}"))?;
        }
        drop(send);
        let mut pending = BTreeMap::new();
        let mut gathered: Vec<Gathered> = packages
            .list
            .iter()
            .map(|p| Gathered {
                left: p.files.iter().map(|_| None).collect(),
                arrived: 0,
            })
            .collect();
        let mut due = 0;
        for batch in receive {
            for (i, report, left) in batch {
                // Reports with reads left for their package wait for it.
                let waits = left.as_ref().is_some_and(|l| !l.facts.is_settled());
                pending.insert(i, (report, waits));
                let Some(p) = packages.of[i] else { continue };
                let package = &packages.list[p];
                let slot = package.files.iter().position(|&f| f == i).unwrap_or(0);
                let gathered = &mut gathered[p];
                gathered.left[slot] = left;
                gathered.arrived += 1;
                if gathered.arrived == package.files.len() {
                    settle(inputs, package, gathered, &mut pending);
                }
            }
            while pending.get(&due).is_some_and(|(_, waits)| !waits) {
                if let Some((report, _)) = pending.remove(&due) {
                    each(report);
                }
                due += 1;
            }
        }
        Ok(())
    })
}

/// What a package's files left, as they come in.
struct Gathered {
    left: Vec<Option<Left>>,
    arrived: usize,
}

/// Adds the findings of a package's calls across files (all its files in) to its files'
/// reports in `pending`, which then wait no more.
fn settle(
    inputs: &[Input],
    package: &super::packages::Package,
    gathered: &mut Gathered,
    pending: &mut BTreeMap<usize, (FileReport, bool)>,
) {
    let left = std::mem::take(&mut gathered.left);
    let members: Vec<(usize, PathBuf, String, &Left)> = package
        .files
        .iter()
        .zip(&left)
        .filter_map(|(&i, left)| {
            let (Input::File(path), Some(left)) = (&inputs[i], left) else {
                return None;
            };
            let relative = path.strip_prefix(&package.root).unwrap_or(path);
            Some((i, relative.to_owned(), display_path(path), left))
        })
        .collect();
    let files: Vec<gpuscope_lint::PackageFile<'_>> = members
        .iter()
        .map(|(_, relative, shown, left)| gpuscope_lint::PackageFile {
            path: relative,
            shown,
            facts: &left.facts,
        })
        .collect();
    let found = gpuscope_lint::package_findings(&files, package.lib_name.as_deref());
    for ((i, _, _, left), found) in members.iter().zip(found) {
        let Some((report, waits)) = pending.get_mut(i) else {
            continue;
        };
        *waits = false;
        if found.is_empty() {
            continue;
        }
        for d in found {
            let line = left.lines.get(&d.start.line).cloned().unwrap_or_default();
            report.diags.push(diag(d, line));
        }
        report.diags.sort_by_key(|d| (d.line, d.column));
    }
}

/// The report for one input; a panic while linting it (a bug) becomes an `internal` error
/// for that file, and the others go on.
fn one(
    input: &Input,
    settings: &Settings,
    max_bytes: u64,
    in_package: bool,
) -> (FileReport, Option<Left>) {
    match input {
        Input::Problem { path, message } => (
            FileReport {
                file: display_path(path),
                diags: vec![file_error(
                    "walk",
                    None,
                    message.clone(),
                    "fix or remove the link (or leave the path out with `.ignore`); the rest was linted",
                    String::new(),
                )],
            },
            None,
        ),
        Input::File(path) => {
            let levels = settings.levels_for(path);
            let lint = || lint_path(path, &levels, max_bytes, in_package);
            match catch_unwind(AssertUnwindSafe(lint)) {
                Ok(done) => done,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    // Spans of the failed file are of no use any more.
                    let _ = catch_unwind(proc_macro2::extra::invalidate_current_thread_spans);
                    let report = FileReport {
                        file: display_path(path),
                        diags: vec![file_error(
                            "internal",
                            None,
                            format!("gpuscope lint failed on this file: {what}"),
                            "this is a bug in gpuscope lint: please report it with the file; the other files were linted",
                            String::new(),
                        )],
                    };
                    (report, None)
                }
            }
        }
    }
}
