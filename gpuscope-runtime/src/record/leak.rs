//! Leak reports as data: what got away from a scope, and where it was made. (Sending
//! them through `tracing` or to stderr is the scopes' job: `scope::report`.)

use std::fmt::{self, Write as _};

use crate::format_bytes;

use super::site::ScopeSite;
use super::track::TrackRecord;

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

    /// The message of a `deny` scope's panic: the scope, then each leaked tensor.
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

/// `f32[64, 128] (32.00 KiB) on host:0 (host)`
pub(crate) fn what(r: &TrackRecord) -> String {
    format!(
        "{}{:?} ({}) on {}",
        r.dtype(),
        r.shape(),
        format_bytes(r.bytes()),
        r.device()
    )
}

/// `f32[64, 128] (32.00 KiB) on host:0 (host), created at src/main.rs:10:13`
pub(crate) fn describe(r: &TrackRecord) -> String {
    let site = r.site();
    format!(
        "{}, created at {}:{}:{}",
        what(r),
        site.file(),
        site.line(),
        site.column()
    )
}

/// A live tracked tensor, as [`report_live`](crate::scope::report_live) lists it.
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
