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
//! conjunction (`if DEBUG && ..`). A statement that leaves unless a switch is on (`if
//! !tracing::enabled!(Level::DEBUG) { return; }`, [`leaves_unless`]) makes the rest of its
//! block debug-only.

use rustc_hash::FxHashSet;

use syn::{BinOp, Expr, Pat, Stmt, UnOp};

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
            // A flag kept in a static: `VERBOSE.with(|v| *v)`, `DEBUG.load(..)`; not a
            // question asked of a table (`FOLDABLE_OPERATORS.contains(..)`).
            Expr::Path(p) if p.qself.is_none() => {
                p.path
                    .get_ident()
                    .is_some_and(|name| is_screaming_case(&name.to_string()))
                    && flag_read(strip(cond))
            }
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

/// Whether `stmt` leaves the code after it unless a debug switch is on: `if !switch { .. }`
/// with no `else`, its branch only a `return`, `continue` or `break` of no value or a plain
/// one (`if !tracing::enabled!(tracing::Level::DEBUG) { return; }` first in a helper that
/// logs tensor statistics, `return Ok(None)`). The rest of its block runs only while
/// debugging. A branch that does work on its way out (`if !enabled() { return f(); }` in a
/// profiler's wrapper, which runs `f` either way) is not such an exit.
pub(super) fn leaves_unless(
    stmt: &Stmt,
    consts: &FxHashSet<String>,
    locals: &FxHashSet<String>,
) -> bool {
    let Stmt::Expr(Expr::If(e), _) = stmt else {
        return false;
    };
    if e.else_branch.is_some() {
        return false;
    }
    let Expr::Unary(u) = strip(&e.cond) else {
        return false;
    };
    if !matches!(u.op, UnOp::Not(_)) || !debug_switch(&u.expr, consts, locals) {
        return false;
    }
    match &e.then_branch.stmts[..] {
        [Stmt::Expr(Expr::Return(r), _)] => r.expr.as_deref().is_none_or(plain),
        [Stmt::Expr(Expr::Break(b), _)] => b.expr.as_deref().is_none_or(plain),
        [Stmt::Expr(Expr::Continue(_), _)] => true,
        _ => false,
    }
}

/// A value that does no work: a literal, a path, or a tuple or constructor of them (`()`,
/// `None`, `Ok(())`, `Ok(x)`).
fn plain(e: &Expr) -> bool {
    match strip(e) {
        Expr::Lit(_) | Expr::Path(_) => true,
        Expr::Tuple(t) => t.elems.iter().all(plain),
        Expr::Call(c) => {
            matches!(strip(&c.func), Expr::Path(p) if p.path.segments.last().is_some_and(|s| {
                s.ident.to_string().starts_with(|c: char| c.is_ascii_uppercase())
            })) && c.args.iter().all(plain)
        }
        _ => false,
    }
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

/// Methods that read a flag kept in a static (`with`, `load`, `get`, ..), the first
/// called on it.
const FLAG_READS: &[&str] = &["with", "load", "get", "borrow", "read", "lock", "copied"];

/// Whether the chain `e` reads a static's flag: the first method called on its root is one
/// of [`FLAG_READS`].
fn flag_read(e: &Expr) -> bool {
    let mut first = None;
    let mut e = e;
    while let Expr::MethodCall(m) = e {
        first = Some(&m.method);
        e = strip(&m.receiver);
    }
    first.is_some_and(|m| FLAG_READS.iter().any(|f| m == f))
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
    fn a_plain_exit_unless_a_switch_is_on_leaves_the_rest_debug_only() {
        let leaves = |src: &str, locals: &[&str]| {
            let consts = FxHashSet::default();
            let locals = locals.iter().map(|l| (*l).to_owned()).collect();
            let stmt: Stmt = syn::parse_str(src).unwrap();
            leaves_unless(&stmt, &consts, &locals)
        };
        for src in [
            "if !tracing::enabled!(tracing::Level::DEBUG) { return; }",
            "if !DEBUG { return Ok(None); }",
            "if !debug { continue; }",
            "if !(VERBOSE.load(Ordering::Relaxed)) { break; }",
        ] {
            assert!(leaves(src, &["debug"]), "{src}");
        }
        for src in [
            // The rest runs while the switch is off.
            "if DEBUG { return; }",
            // A branch that does work on its way out, or has an `else`.
            "if !enabled() { return f(); }",
            "if !can_fold { remaining.push(node); continue; }",
            "if !DEBUG { return; } else { log(); }",
            // Not a switch.
            "if !FOLDABLE.contains(&op) { continue; }",
            "if !ready { return; }",
        ] {
            assert!(!leaves(src, &["can_fold"]), "{src}");
        }
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
            "FOLDABLE_OPERATORS.contains(&op)",
        ] {
            assert!(!switch(src, &[]), "{src}");
        }
    }
}
