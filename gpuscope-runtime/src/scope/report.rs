//! Leak reports: what got away from a scope, and where it was made.
//!
//! With a `tracing` subscriber set (globally or for the thread), each leaked tensor is
//! one event at WARN level with target `gpuscope::leak` and the fields `site`
//! (file:line:column that created it), `bytes`, `dtype`, `shape`, `device`, `scope`
//! (the scope's name) and `scope_site`; then one summary event per scope with `scope`,
//! `scope_site`, `leaked` (count) and `bytes`.
//!
//! Without one, the report goes to stderr (`stderr`: rustc-like, repeats folded) in
//! debug builds, and in release builds where the leak policy was asked for
//! (`GPUSCOPE_LEAKS`, `set_leak_policy`, the attribute's `leaks = ...`). A `deny`
//! scope's panic message carries the same sites, so it is not printed twice.

use crate::format_bytes;
use crate::record::leak::describe;

pub use crate::record::{LeakReport, LiveTensor, ScopeSite};

/// Whether a `tracing` subscriber would receive events on this thread (a global one, or
/// one set for the thread with `with_default`).
pub(crate) fn has_subscriber() -> bool {
    tracing::dispatcher::get_default(|d| !d.is::<tracing::subscriber::NoSubscriber>())
}

/// Whether reports go to stderr when there is no subscriber: in debug builds, or when
/// the policy was asked for (`asked`: by the scope's attribute; or by the environment or
/// `set_leak_policy`).
pub(crate) fn stderr_enabled(asked: bool) -> bool {
    cfg!(debug_assertions) || asked || super::policy::leak_policy_is_explicit()
}

/// Reports a scope's leaks: to the subscriber, else to stderr (unless `panics`: the
/// `deny` panic that follows carries the same sites).
pub(crate) fn report(report: &LeakReport, asked: bool, panics: bool) {
    if has_subscriber() {
        emit(report);
    } else if !panics && stderr_enabled(asked) {
        super::stderr::report(report);
    }
}

/// Sends a report through `tracing`.
pub(crate) fn emit(report: &LeakReport) {
    let scope = report.scope.name;
    let scope_site = format!(
        "{}:{}:{}",
        report.scope.file, report.scope.line, report.scope.column
    );
    for r in &report.leaked {
        let site = r.site();
        tracing::warn!(
            target: "gpuscope::leak",
            site = %format_args!("{}:{}:{}", site.file(), site.line(), site.column()),
            bytes = r.bytes() as u64,
            dtype = %r.dtype(),
            shape = ?r.shape(),
            device = r.device(),
            scope,
            scope_site = %scope_site,
            "tensor leaked from scope `{scope}`: {}",
            describe(r)
        );
    }
    tracing::warn!(
        target: "gpuscope::leak",
        scope,
        scope_site = %scope_site,
        leaked = report.leaked.len() as u64,
        bytes = report.bytes() as u64,
        "scope `{scope}` ({scope_site}) leaked {} tensor(s), {}",
        report.leaked.len(),
        format_bytes(report.bytes())
    );
}
