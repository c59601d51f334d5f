//! Whether tensors are tracked, and what a scope does about a leak.

use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// What a scope does when a tensor made inside it is still alive at exit and was
/// neither returned nor kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeakPolicy {
    /// Say nothing.
    Allow,
    /// Report through `tracing` (target `gpuscope::leak`, level WARN).
    Warn,
    /// Report, then panic at scope exit (for tests), naming each leaked tensor's site.
    Deny,
}

/// A leak policy string that is none of `allow`, `warn`, `deny` (or `off`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown leak policy `{0}`: expected warn, deny or allow (off)")]
pub struct BadLeakPolicy(pub String);

impl FromStr for LeakPolicy {
    type Err = BadLeakPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "allow" | "off" | "none" => Ok(LeakPolicy::Allow),
            "warn" => Ok(LeakPolicy::Warn),
            "deny" => Ok(LeakPolicy::Deny),
            _ => Err(BadLeakPolicy(s.to_string())),
        }
    }
}

impl std::fmt::Display for LeakPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LeakPolicy::Allow => "allow",
            LeakPolicy::Warn => "warn",
            LeakPolicy::Deny => "deny",
        })
    }
}

/// The environment variable that sets the default leak policy.
pub const LEAKS_VAR: &str = "GPUSCOPE_LEAKS";
/// The environment variable that turns tracking on (`1`) or off (`0`).
pub const TRACK_VAR: &str = "GPUSCOPE_TRACK";

const UNSET: u8 = u8::MAX;
static POLICY: AtomicU8 = AtomicU8::new(UNSET);
static TRACKING: AtomicU8 = AtomicU8::new(UNSET);
static ENV_POLICY: OnceLock<LeakPolicy> = OnceLock::new();

fn env_policy() -> LeakPolicy {
    *ENV_POLICY.get_or_init(|| match std::env::var(LEAKS_VAR) {
        Ok(v) => v.parse().unwrap_or_else(|e: BadLeakPolicy| {
            tracing::error!(target: "gpuscope::leak", "{LEAKS_VAR}: {e}; using `warn`");
            LeakPolicy::Warn
        }),
        Err(_) => LeakPolicy::Warn,
    })
}

/// The default leak policy of scopes that set none: [`set_leak_policy`] if called,
/// else `GPUSCOPE_LEAKS` (`warn`, `deny`, `allow`/`off`), else `warn`.
pub fn leak_policy() -> LeakPolicy {
    match POLICY.load(Ordering::Relaxed) {
        0 => LeakPolicy::Allow,
        1 => LeakPolicy::Warn,
        2 => LeakPolicy::Deny,
        _ => env_policy(),
    }
}

/// Sets the default leak policy for the process (overrides `GPUSCOPE_LEAKS`).
pub fn set_leak_policy(policy: LeakPolicy) {
    let v = match policy {
        LeakPolicy::Allow => 0,
        LeakPolicy::Warn => 1,
        LeakPolicy::Deny => 2,
    };
    POLICY.store(v, Ordering::Relaxed);
}

/// Whether tensors record their creation site and scope. On by default in debug builds,
/// off in release builds; `GPUSCOPE_TRACK=1`/`0` or [`set_tracking`] decide otherwise.
/// With tracking off, creating a tensor costs one relaxed atomic load more and scopes
/// only keep their `sync` promise.
#[inline]
pub fn tracking() -> bool {
    match TRACKING.load(Ordering::Relaxed) {
        0 => false,
        1 => true,
        _ => init_tracking(),
    }
}

#[cold]
fn init_tracking() -> bool {
    let on = match std::env::var(TRACK_VAR).as_deref() {
        Ok("1") | Ok("true") | Ok("on") => true,
        Ok("0") | Ok("false") | Ok("off") => false,
        _ => cfg!(debug_assertions),
    };
    let _ = TRACKING.compare_exchange(UNSET, on as u8, Ordering::Relaxed, Ordering::Relaxed);
    TRACKING.load(Ordering::Relaxed) == 1
}

/// Turns tracking on or off for the process. Tensors made while it is off are never
/// tracked; turn it on before making the tensors you want reported.
pub fn set_tracking(on: bool) {
    TRACKING.store(on as u8, Ordering::Relaxed);
}
