//! `forget_tensor` (deny): `mem::forget(x)`, `ManuallyDrop::new(x)`, `Box::leak(x)` or
//! `Vec::leak(x)` of a value that may be a tensor: its destructor never runs, so its GPU
//! memory never goes back to the allocator. Arguments that are obviously not tensors
//! (literals, strings being built, boxes of those) do not fire.

use syn::Expr;
use syn::spanned::Spanned;

use crate::syntax::{callee_path, obviously_not_tensor, path_ends_with, show, strip};
use crate::visit::{Sink, State, is_forget_path};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "forget_tensor",
    default: Level::Deny,
    summary: "`mem::forget`, `ManuallyDrop::new` or `Box::leak` of a value that may own GPU memory",
};

pub(crate) fn check(e: &Expr, st: &State<'_>, sink: &mut Sink<'_>) {
    let Expr::Call(call) = e else { return };
    let Some(path) = callee_path(call) else {
        return;
    };
    let what = if is_forget_path(path, st.file) {
        "mem::forget"
    } else if path_ends_with(path, &["ManuallyDrop", "new"]) {
        "ManuallyDrop::new"
    } else if path_ends_with(path, &["Box", "leak"]) {
        "Box::leak"
    } else if path_ends_with(path, &["Vec", "leak"]) {
        "Vec::leak"
    } else {
        return;
    };
    let Some(arg) = call.args.first() else { return };
    if obviously_not_tensor(arg) || rebuilt_from_raw(arg) {
        return;
    }
    let value = show(arg);
    let scope = if st.f.scoped {
        "; the enclosing `#[gpu_scope]` cannot free it either"
    } else {
        ""
    };
    let (message, help) = match what {
        "mem::forget" => (
            format!("`{what}({value})` leaks `{value}`: its destructor never runs, so its GPU memory is never freed{scope}"),
            format!("let `{value}` drop (or call `drop({value})`); to hand it on, return it or move it into its owner"),
        ),
        "ManuallyDrop::new" => (
            format!("`{what}({value})` never drops `{value}` unless `ManuallyDrop::drop` is called: its GPU memory leaks{scope}"),
            format!("keep `{value}` as a plain value and let it drop; if it must outlive this function, return it"),
        ),
        _ => (
            format!("`{what}({value})` leaks `{value}` for the rest of the program: its GPU memory is never freed{scope}"),
            "return the value, or store it in an owner that drops it (a struct field, a bounded cache)".to_owned(),
        ),
    };
    sink.emit(&RULE, e.span(), message, help);
}

/// Whether `arg` is a value rebuilt from a raw pointer (`Arc::from_raw(p)`, `ptr::read(p)`,
/// maybe in an `unsafe` block): wrapping it in `ManuallyDrop` or forgetting it is how unsafe
/// code borrows a value it does not own, not a leak.
fn rebuilt_from_raw(arg: &Expr) -> bool {
    match strip(arg) {
        Expr::Unsafe(u) => match u.block.stmts.as_slice() {
            [syn::Stmt::Expr(e, None)] => rebuilt_from_raw(e),
            _ => false,
        },
        Expr::Call(call) => callee_path(call).is_some_and(|p| {
            let last = p
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            last.starts_with("from_raw")
                || (p.segments.len() >= 2
                    && p.segments[p.segments.len() - 2].ident == "ptr"
                    && last.starts_with("read"))
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{findings, hits};

    const RULE: &str = "forget_tensor";

    #[test]
    fn fires_on_forget_manually_drop_and_leak() {
        let src = r#"
use std::mem::ManuallyDrop;
fn f(t: Tensor, u: Tensor, v: Tensor) {
    std::mem::forget(t);
    let kept = ManuallyDrop::new(u);
    let r: &'static mut Tensor = Box::leak(Box::new(v));
    core::mem::forget(make_tensor());
}
"#;
        assert_eq!(hits(RULE, src), [(4, 5), (5, 16), (6, 34), (7, 5)]);
        let f = &findings(RULE, src)[0];
        assert_eq!(
            f.message,
            "`mem::forget(t)` leaks `t`: its destructor never runs, so its GPU memory is never freed"
        );
        assert!(f.help.contains("drop(t)"), "{}", f.help);
    }

    #[test]
    fn bare_forget_fires_only_when_imported_from_mem() {
        let imported = "use std::mem::{self, forget};\nfn f(t: Tensor) { forget(t); }";
        assert_eq!(hits(RULE, imported), [(2, 19)]);
        let other = "fn forget<T>(_: T) {}\nfn f(t: Tensor) { forget(t); }";
        assert_eq!(hits(RULE, other), []);
    }

    #[test]
    fn mentions_gpu_scope_when_scoped() {
        let src = "#[gpu_scope]\nfn f(t: Tensor) { mem::forget(t); }";
        assert!(
            findings(RULE, src)[0]
                .message
                .ends_with("the enclosing `#[gpu_scope]` cannot free it either")
        );
    }

    #[test]
    fn ignores_non_tensors_and_other_calls() {
        let src = r#"
fn f(t: Tensor, name: String) -> Tensor {
    std::mem::forget(5);
    let s: &'static str = Box::leak(name.into_boxed_str());
    let msg: &'static str = Box::leak(format!("run {}", 1).into_boxed_str());
    let unit = ManuallyDrop::new(());
    let b = Box::leak(Box::new(0u8));
    drop(t.clone());
    std::mem::take(&mut vec![1]);
    t
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn no_forget_no_finding() {
        let src = "fn f(t: Tensor) -> Tensor { let u = t.relu(); drop(t); u }";
        assert_eq!(hits(RULE, src), []);
    }
}
