//! Leak reports: what got away from a scope, and where it was made.
//!
//! Each leaked tensor is one `tracing` event at WARN level with target
//! `gpuscope::leak` and the fields `site` (file:line:column that created it), `bytes`,
//! `dtype`, `shape`, `device`, `scope` (the scope's name) and `scope_site`; then one
//! summary event per scope with `scope`, `scope_site`, `leaked` (count) and `bytes`.

use std::fmt::{self, Write as _};

use crate::format_bytes;

use super::record::TrackRecord;

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

impl fmt::Display for ScopeSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` at {}:{}:{}",
            self.name, self.file, self.line, self.column
        )
    }
}

/// The tensors one scope leaked.
#[derive(Debug, Clone)]
pub struct LeakReport {
    /// The scope.
    pub scope: ScopeSite,
    /// The leaked tensors' records, in creation order.
    pub leaked: Vec<TrackRecord>,
}

impl LeakReport {
    pub(crate) fn new(scope: ScopeSite, leaked: Vec<TrackRecord>) -> LeakReport {
        LeakReport { scope, leaked }
    }

    /// Whether nothing leaked.
    pub fn is_empty(&self) -> bool {
        self.leaked.is_empty()
    }

    /// Bytes of all leaked tensors.
    pub fn bytes(&self) -> usize {
        self.leaked.iter().map(|r| r.bytes()).sum()
    }

    pub(crate) fn panic_message(&self) -> String {
        let mut s = format!(
            "gpuscope: scope {} leaked {} tensor(s), {} (leak policy `deny`):",
            self.scope,
            self.leaked.len(),
            format_bytes(self.bytes())
        );
        for r in &self.leaked {
            let _ = write!(s, "\n  - {}", describe(r));
        }
        s.push_str("\n  help: return the tensor, drop it before the scope ends, or adopt it on purpose with `gpuscope::keep(&t)`");
        s
    }
}

/// `f32[64, 128] (32.00 KiB) on host:0 (host), created at src/main.rs:10:13`
pub(crate) fn describe(r: &TrackRecord) -> String {
    let site = r.site();
    format!(
        "{}{:?} ({}) on {}, created at {}:{}:{}",
        r.dtype(),
        r.shape(),
        format_bytes(r.bytes()),
        r.device(),
        site.file(),
        site.line(),
        site.column()
    )
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

/// A live tracked tensor, as [`report_live`](super::report_live) lists it.
#[derive(Debug, Clone)]
pub struct LiveTensor {
    /// Its record.
    pub record: TrackRecord,
    /// The scope that owns it now (`None`: outside every scope).
    pub scope: Option<String>,
}

impl fmt::Display for LiveTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", describe(&self.record))?;
        if let Some(s) = &self.scope {
            write!(f, ", in scope {s}")?;
        }
        if let Some(s) = self.record.leaked_from() {
            write!(f, ", leaked from scope {s}")?;
        }
        Ok(())
    }
}
