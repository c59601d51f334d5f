//! Linting many files on several threads, each with a stack of
//! [`gpuscope_lint::STACK_SIZE`], handing the reports over in path order soon after each is
//! ready (so memory holds a few files at a time, not the whole crate). A thread hands its
//! reports over in batches (up to [`BATCH`] files or [`BATCH_WAIT`]), not one by one: waking
//! the receiving thread for every file cost about 3% of a run over many small files.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::check::{FileReport, display_path, file_error, lint_path};
use super::files::Input;
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
        let (send, receive) = mpsc::channel::<Vec<(usize, FileReport)>>();
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
                        batch.push((i, one(input, settings, max_bytes)));
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
        let mut due = 0;
        for batch in receive {
            for (i, report) in batch {
                pending.insert(i, report);
            }
            while let Some(report) = pending.remove(&due) {
                each(report);
                due += 1;
            }
        }
        Ok(())
    })
}

/// The report for one input; a panic while linting it (a bug) becomes an `internal` error
/// for that file, and the others go on.
fn one(input: &Input, settings: &Settings, max_bytes: u64) -> FileReport {
    match input {
        Input::Problem { path, message } => FileReport {
            file: display_path(path),
            diags: vec![file_error(
                "walk",
                None,
                message.clone(),
                "fix or remove the link (or leave the path out with `.ignore`); the rest was linted",
                String::new(),
            )],
        },
        Input::File(path) => {
            let levels = settings.levels_for(path);
            match catch_unwind(AssertUnwindSafe(|| lint_path(path, &levels, max_bytes))) {
                Ok(report) => report,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    // Spans of the failed file are of no use any more.
                    let _ = catch_unwind(proc_macro2::extra::invalidate_current_thread_spans);
                    FileReport {
                        file: display_path(path),
                        diags: vec![file_error(
                            "internal",
                            None,
                            format!("gpuscope lint failed on this file: {what}"),
                            "this is a bug in gpuscope lint: please report it with the file; the other files were linted",
                            String::new(),
                        )],
                    }
                }
            }
        }
    }
}
