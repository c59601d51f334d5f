//! Debug switches: conditions under which code runs only while someone is debugging, so
//! that loops around it do not make it hot (`item_in_hot_loop` counts only its own
//! function's loops there, and a call there does not pass its loops on to the callee).
//!
//! A switch is a constant or `SCREAMING_CASE` path (`if DEBUG_VAE`), a flag read from one
//! (`if VERBOSE.with(|v| *v)`, `if DEBUG.load(Ordering::Relaxed)`), `tracing::enabled!(..)`,
//! `log_enabled!(..)` or `cfg!(..)`, an environment variable read (`if
//! std::env::var_os("X_DEBUG").is_some()`), a call of a function named for it
//! (`is_enabled()`, `debug_enabled()`, `verbose()`), or a local bound to one of those
//! (`let debug = std::env::var_os("X").is_some(); .. if debug { .. }`); alone or in a
//! conjunction (`if DEBUG && ..`).

use rustc_hash::FxHashSet;

use syn::{BinOp, Expr, Pat};

use crate::syntax::{chain_root, is_screaming_case, path_ends_with, strip};

/// Names of functions and macros whose call is a switch, besides names with `debug` or
/// `verbose` in them.
const SWITCH_CALLS: &[&str] = &["enabled", "is_enabled", "log_enabled", "cfg"];

/// Whether `cond` is a debug switch, or has one in a conjunction; `consts` are the file's
/// constants, `locals` the function's locals bound to a switch.
pub(super) fn debug_switch(
    cond: &Expr,
    consts: &FxHashSet<String>,
    locals: &FxHashSet<String>,
) -> bool {
    match strip(cond) {
        Expr::Binary(b) if matches!(b.op, BinOp::And(_)) => {
            debug_switch(&b.left, consts, locals) || debug_switch(&b.right, consts, locals)
        }
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().is_some_and(|name| {
            let name = name.to_string();
            consts.contains(&name) || is_screaming_case(&name) || locals.contains(&name)
        }),
        Expr::Macro(m) => m
            .mac
            .path
            .segments
            .last()
            .is_some_and(|s| switch_name(&s.ident.to_string())),
        Expr::MethodCall(_) => match chain_root(strip(cond)) {
            // A flag kept in a static: `VERBOSE.with(|v| *v)`, `DEBUG.load(..)`.
            Expr::Path(p) if p.qself.is_none() => p
                .path
                .get_ident()
                .is_some_and(|name| is_screaming_case(&name.to_string())),
            Expr::Call(call) => env_read(call) || switch_call(call),
            _ => false,
        },
        Expr::Call(call) => env_read(call) || switch_call(call),
        _ => false,
    }
}

/// How many debug switches an `if` with condition `cond` adds: around its branch (the
/// whole condition a switch), and around its condition (a switch first in a conjunction,
/// `if DEBUG && let Ok(v) = x.to_vec1::<f32>() { .. }`, whose rest runs only while debugging
/// too).
pub(super) fn of_if(
    cond: &Expr,
    consts: &FxHashSet<String>,
    locals: &FxHashSet<String>,
) -> (usize, usize) {
    let debug = debug_switch(cond, consts, locals);
    let gated = matches!(cond, Expr::Binary(b)
        if matches!(b.op, BinOp::And(_)) && debug_switch(&b.left, consts, locals));
    (usize::from(debug), usize::from(gated))
}

/// Adds to `locals` the local that `let pat = init;` binds to a debug switch
/// (`let debug = std::env::var_os("X").is_some();`), if it does.
pub(super) fn bind(
    locals: &mut FxHashSet<String>,
    pat: &Pat,
    init: Option<&Expr>,
    consts: &FxHashSet<String>,
) {
    let pat = match pat {
        Pat::Type(t) => &*t.pat,
        pat => pat,
    };
    if let (Pat::Ident(p), Some(init)) = (pat, init) {
        if p.subpat.is_none() && debug_switch(init, consts, locals) {
            locals.insert(p.ident.to_string());
        }
    }
}

/// `std::env::var(..)` or `env::var_os(..)`.
fn env_read(call: &syn::ExprCall) -> bool {
    matches!(strip(&call.func), Expr::Path(p)
        if path_ends_with(&p.path, &["env", "var"]) || path_ends_with(&p.path, &["env", "var_os"]))
}

/// A call of a function named as a switch: `debug_finite::is_enabled()`, `debug_enabled()`.
fn switch_call(call: &syn::ExprCall) -> bool {
    matches!(strip(&call.func), Expr::Path(p)
        if p.path.segments.last().is_some_and(|s| switch_name(&s.ident.to_string())))
}

fn switch_name(name: &str) -> bool {
    SWITCH_CALLS.contains(&name) || name.contains("debug") || name.contains("verbose")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(src: &str, locals: &[&str]) -> bool {
        let consts = ["TRACE".to_owned()].into_iter().collect();
        let locals = locals.iter().map(|l| (*l).to_owned()).collect();
        debug_switch(&syn::parse_str(src).unwrap(), &consts, &locals)
    }

    #[test]
    fn switches_are_debug_flags_environment_reads_and_locals_bound_to_them() {
        for src in [
            "DEBUG_VAE",
            "TRACE && x.len() > 3",
            "tracing::enabled!(Level::DEBUG)",
            "VERBOSE.with(|v| *v)",
            "DEBUG.load(Ordering::Relaxed)",
            "std::env::var_os(\"CRANE_DEBUG\").is_some()",
            "env::var(\"X\").map(|v| v == \"1\").unwrap_or(false)",
            "crate::debug_finite::is_enabled()",
            "debug_enabled()",
            "debug",
        ] {
            assert!(switch(src, &["debug"]), "{src}");
        }
        for src in [
            "step % 100 == 0",
            "self.verbose",
            "x.is_some()",
            "cuda_is_available()",
            "debug",
            "!DEBUG",
        ] {
            assert!(!switch(src, &[]), "{src}");
        }
    }
}
