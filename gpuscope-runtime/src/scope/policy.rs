//! Whether tensors are tracked, and what a scope does about a leak.

use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// What a scope does when a tensor made inside it is still alive at exit and was
/// neither returned nor kept.
///
/// Where reports go: to the `tracing` subscriber when one is set (target
/// `gpuscope::leak`); without one, to stderr in a compact rustc-like form (repeats from
/// one site folded), in debug builds, or in any build where the policy was asked for
/// (`GPUSCOPE_LEAKS`, [`set_leak_policy`], an attribute's `leaks = ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeakPolicy {
    /// Say nothing.
    Allow,
    /// Report through `tracing` (target `gpuscope::leak`, level WARN), or to stderr when
    /// no subscriber is set.
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

/// Whether the default leak policy was asked for: by `GPUSCOPE_LEAKS` or
/// [`set_leak_policy`] (then leaks are reported to stderr even in release builds).
pub fn leak_policy_is_explicit() -> bool {
    POLICY.load(Ordering::Relaxed) != UNSET || std::env::var_os(LEAKS_VAR).is_some()
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
/// off in release builds; `GPUSCOPE_TRACK=1`/`0` or [`set_tracking`] decide otherwise,
/// and so does `GPUSCOPE_LEAKS=warn`/`deny` where `GPUSCOPE_TRACK` is not set (asking
/// for leak reports turns tracking on in a release build).
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
        _ => {
            cfg!(debug_assertions)
                || matches!(
                    std::env::var(LEAKS_VAR).map(|v| v.parse::<LeakPolicy>()),
                    Ok(Ok(LeakPolicy::Warn | LeakPolicy::Deny))
                )
        }
    };
    let _ = TRACKING.compare_exchange(UNSET, on as u8, Ordering::Relaxed, Ordering::Relaxed);
    TRACKING.load(Ordering::Relaxed) == 1
}

/// Turns tracking on or off for the process. Tensors made while it is off are never
/// tracked; turn it on before making the tensors you want reported.
pub fn set_tracking(on: bool) {
    TRACKING.store(on as u8, Ordering::Relaxed);
}
