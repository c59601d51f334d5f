//! The exit summary: when the process exits with tracked tensors still alive, one
//! screen on stderr groups them by the line that created them.
//!
//! ```text
//! warning: 4 tracked tensors still alive at exit (1.36 MiB), from 3 sites:
//!       ×1    1.00 MiB  examples/leak_report.rs:30:22  f32[1024, 64], leaked from scope `fill_cache`
//!       ×2  272.00 KiB  examples/leak_report.rs:60:17  f32[128], leaked from scope `graph`
//!       ×1   64.00 KiB  examples/leak_report.rs:77:19  f32[4096], leaked from scope `forget_buffer`
//!   = note: at exit, what is still alive is held by a static, `mem::forget`, an `Rc` cycle or a thread still running
//!   = help: `gpuscope::report_live()` lists them; GPUSCOPE_LEAKS=off silences leak reports and this summary
//! ```
//!
//! How it runs at exit: Rust runs no destructor of a static, and `Device::host()` /
//! `Device::cuda()` keep one handle of each device in a process-wide table, so "when the
//! last device handle drops" never comes for them. gpuscope registers a C `atexit`
//! handler instead (once, when the first tensor is tracked). The C library calls it
//! when `main` returns and on `std::process::exit`, after the main thread's
//! thread-locals are destroyed (so `main`'s locals are gone) and while statics still
//! hold what they hold. It does not run on an abort, a signal, or `_exit`.
//!
//! It prints only where a leak report would go to stderr (no global `tracing`
//! subscriber; a debug build or a leak policy asked for; `GPUSCOPE_LEAKS` not `off`),
//! and only when some tracked tensor is alive. With a subscriber, call
//! [`log_live`](super::log_live) where you want the same list as events.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Once;

use crate::format_bytes;
use crate::record::TrackRecord;
use crate::record::site::location_string;

use super::policy::{LeakPolicy, leak_policy};

/// Most sites listed; the rest are summed on one line.
const MAX_SITES: usize = 10;

static ARMED: Once = Once::new();

/// Registers the exit summary (once per process). Called on the cold path of tracking.
pub(crate) fn arm() {
    ARMED.call_once(|| {
        #[cfg(any(unix, windows))]
        // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds.
        unsafe {
            libc::atexit(at_exit);
        }
    });
}

#[cfg(any(unix, windows))]
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if leak_policy() == LeakPolicy::Allow
            || tracing::dispatcher::has_been_set()
            || !super::report::stderr_enabled(false)
        {
            return;
        }
        if let Some(text) = live_summary() {
            super::stderr::write_stderr(&text);
        }
    });
}

/// The one-screen summary of the tracked tensors alive now, grouped by the line that
/// created them, largest first (`None` when none is alive): what gpuscope prints at
/// exit.
///
/// ```
/// use gpuscope_runtime::{Device, Tensor, scope::{live_summary, set_tracking}};
/// set_tracking(true);
/// let line = line!() + 1;
/// let t = Tensor::zeros(&[4096], &Device::host().unwrap()).unwrap();
/// let text = live_summary().unwrap();
/// assert!(text.contains("still alive") && text.contains(&format!(":{line}:9")), "{text}");
/// ```
pub fn live_summary() -> Option<String> {
    summarize(&super::live_records())
}

struct Group<'a> {
    site: String,
    count: usize,
    bytes: usize,
    first: &'a TrackRecord,
    leaked_from: Option<&'static str>,
}

pub(crate) fn summarize(live: &[TrackRecord]) -> Option<String> {
    if live.is_empty() {
        return None;
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for r in live {
        let site = location_string(r.site());
        let i = *index.entry(site.clone()).or_insert_with(|| {
            groups.push(Group {
                site,
                count: 0,
                bytes: 0,
                first: r,
                leaked_from: None,
            });
            groups.len() - 1
        });
        let g = &mut groups[i];
        g.count += 1;
        g.bytes += r.bytes();
        if g.leaked_from.is_none() {
            g.leaked_from = r.leaked_scope().map(|s| s.name);
        }
    }
    groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
    let total: usize = groups.iter().map(|g| g.bytes).sum();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "warning: {} tracked tensor{} still alive at exit ({}), from {} site{}:",
        live.len(),
        if live.len() == 1 { "" } else { "s" },
        format_bytes(total),
        groups.len(),
        if groups.len() == 1 { "" } else { "s" },
    );
    let shown = &groups[..groups.len().min(MAX_SITES)];
    let count_w = shown
        .iter()
        .map(|g| g.count.to_string().len())
        .max()
        .unwrap_or(1)
        + 1;
    let bytes_w = shown
        .iter()
        .map(|g| format_bytes(g.bytes).len())
        .max()
        .unwrap_or(1);
    let site_w = shown.iter().map(|g| g.site.len()).max().unwrap_or(1);
    for g in shown {
        let r = g.first;
        let _ = write!(
            out,
            "    {:>count_w$}  {:>bytes_w$}  {:<site_w$}  {}{:?}",
            format!("×{}", g.count),
            format_bytes(g.bytes),
            g.site,
            r.dtype(),
            r.shape()
        );
        if let Some(scope) = g.leaked_from {
            let _ = write!(out, ", leaked from scope `{scope}`");
        }
        out.push('\n');
    }
    if groups.len() > shown.len() {
        let rest = &groups[shown.len()..];
        let _ = writeln!(
            out,
            "    … and {} more site{} ({} tensors, {})",
            rest.len(),
            if rest.len() == 1 { "" } else { "s" },
            rest.iter().map(|g| g.count).sum::<usize>(),
            format_bytes(rest.iter().map(|g| g.bytes).sum())
        );
    }
    out.push_str("  = note: at exit, what is still alive is held by a static, `mem::forget`, an `Rc` cycle or a thread still running\n");
    out.push_str("  = help: `gpuscope::report_live()` lists them; GPUSCOPE_LEAKS=off silences leak reports and this summary\n");
    out.push('\n');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::Location;

    fn record(site: &'static Location<'static>, bytes: usize) -> TrackRecord {
        TrackRecord::for_test(site, bytes)
    }

    #[test]
    fn nothing_alive_prints_nothing() {
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn tensors_are_grouped_by_site_largest_first_within_one_screen() {
        let sites: Vec<&'static Location<'static>> =
            (0..14).map(|_| Location::caller()).collect::<Vec<_>>();
        // Every element above is the same site; make distinct ones.
        let a = Location::caller();
        let b = Location::caller();
        let mut live = vec![record(a, 400), record(b, 4000), record(a, 400)];
        live.extend(sites.iter().map(|s| record(s, 4)));
        let text = summarize(&live).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("warning: 17 tracked tensors still alive at exit"),
            "{text}"
        );
        assert!(lines[0].ends_with("from 3 sites:"), "{text}");
        assert!(
            lines[1].contains("×1") && lines[1].contains(&location_string(b)),
            "{text}"
        );
        assert!(
            lines[2].contains("×2") && lines[2].contains("800 B"),
            "{text}"
        );
        assert!(lines[3].contains("×14"), "{text}");
        assert!(lines.len() <= MAX_SITES + 5, "{text}");
    }

    #[test]
    fn more_sites_than_a_screen_are_summed_on_one_line() {
        let live: Vec<TrackRecord> = many_sites().into_iter().map(|s| record(s, 8)).collect();
        let text = summarize(&live).unwrap();
        assert_eq!(text.lines().count(), 1 + MAX_SITES + 1 + 2 + 1, "{text}");
        assert!(
            text.contains("… and 2 more sites (2 tensors, 16 B)"),
            "{text}"
        );
    }

    // One call per line, so that each is a site of its own.
    #[rustfmt::skip]
    fn many_sites() -> Vec<&'static Location<'static>> {
        vec![
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
            Location::caller(),
        ]
    }
}
