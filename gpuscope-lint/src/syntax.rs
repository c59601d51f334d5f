//! Small questions about syntax trees that several rules ask: what a path ends with, the
//! root of a method chain, whether two places are the same, short text for messages.

use syn::{Attribute, Expr, Ident, Pat, PathArguments, Type};

/// `e` without parentheses, invisible groups and `&` / `&mut`.
pub(crate) fn strip(mut e: &Expr) -> &Expr {
    loop {
        e = match e {
            Expr::Paren(p) => &p.expr,
            Expr::Group(g) => &g.expr,
            Expr::Reference(r) => &r.expr,
            _ => return e,
        };
    }
}

/// `e` without parentheses, `&`, `?`, `.unwrap()` and `.expect(..)`: the value they pass on.
pub(crate) fn unwrapped(mut e: &Expr) -> &Expr {
    loop {
        e = match strip(e) {
            Expr::Try(t) => &t.expr,
            Expr::MethodCall(m) if m.method == "unwrap" || m.method == "expect" => &m.receiver,
            other => return other,
        };
    }
}

/// The outer attributes of an expression, for the kinds of expressions that carry them in
/// statement position.
pub(crate) fn expr_attrs(e: &Expr) -> &[Attribute] {
    match e {
        Expr::Array(e) => &e.attrs,
        Expr::Assign(e) => &e.attrs,
        Expr::Async(e) => &e.attrs,
        Expr::Await(e) => &e.attrs,
        Expr::Binary(e) => &e.attrs,
        Expr::Block(e) => &e.attrs,
        Expr::Call(e) => &e.attrs,
        Expr::Closure(e) => &e.attrs,
        Expr::ForLoop(e) => &e.attrs,
        Expr::If(e) => &e.attrs,
        Expr::Loop(e) => &e.attrs,
        Expr::Macro(e) => &e.attrs,
        Expr::Match(e) => &e.attrs,
        Expr::MethodCall(e) => &e.attrs,
        Expr::Paren(e) => &e.attrs,
        Expr::Path(e) => &e.attrs,
        Expr::Return(e) => &e.attrs,
        Expr::Try(e) => &e.attrs,
        Expr::Unsafe(e) => &e.attrs,
        Expr::While(e) => &e.attrs,
        _ => &[],
    }
}

/// Whether `e` takes a lock or mutable borrow, maybe unwrapped: `X.lock().unwrap()`,
/// `X.borrow_mut()`, `X.write().await`.
pub(crate) fn is_guard(e: &Expr) -> bool {
    const GUARDS: [&str; 7] = [
        "lock",
        "write",
        "borrow_mut",
        "get_mut",
        "try_lock",
        "try_write",
        "try_borrow_mut",
    ];
    match strip(e) {
        Expr::MethodCall(m) if m.method == "unwrap" || m.method == "expect" => {
            is_guard(&m.receiver)
        }
        Expr::MethodCall(m) => GUARDS.iter().any(|g| m.method == g),
        Expr::Try(t) => is_guard(&t.expr),
        Expr::Await(a) => is_guard(&a.base),
        _ => false,
    }
}

/// The identifier of a one-segment path expression such as `loss` (or `self`).
pub(crate) fn ident_of(e: &Expr) -> Option<&Ident> {
    match strip(e) {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
}

/// The names of `path`'s segments (`std::mem::forget` is `["std", "mem", "forget"]`).
pub(crate) fn path_names(path: &syn::Path) -> Vec<String> {
    path.segments.iter().map(|s| s.ident.to_string()).collect()
}

/// Whether `path`'s last segments are `suffix` (`std::mem::forget` ends with `["mem", "forget"]`).
pub(crate) fn path_ends_with(path: &syn::Path, suffix: &[&str]) -> bool {
    let n = path.segments.len();
    n >= suffix.len()
        && path
            .segments
            .iter()
            .skip(n - suffix.len())
            .zip(suffix)
            .all(|(seg, name)| seg.ident == name)
}

/// The path of a call's callee, when the callee is a path (`no_grad(..)`, `Box::leak(..)`).
pub(crate) fn callee_path(call: &syn::ExprCall) -> Option<&syn::Path> {
    match &*call.func {
        Expr::Path(p) if p.qself.is_none() => Some(&p.path),
        _ => None,
    }
}

/// The name of a call's callee: the last path segment of `a::b::name(..)`.
pub(crate) fn callee_name(call: &syn::ExprCall) -> Option<&Ident> {
    callee_path(call)
        .and_then(|p| p.segments.last())
        .map(|s| &s.ident)
}

/// Walks down receivers, field bases, index bases, derefs, `?` and `.await` to the
/// expression a chain starts from: the root of `*CACHE.lock().unwrap().items[0]` is `CACHE`.
pub(crate) fn chain_root(e: &Expr) -> &Expr {
    chain_links(e).last().unwrap_or(e)
}

/// The links of the chain `e` ends, from `e` down to its [`chain_root`]: `self.pools.lock()`
/// is that call, `self.pools`, then `self`.
pub(crate) fn chain_links(e: &Expr) -> impl Iterator<Item = &Expr> {
    std::iter::successors(Some(e), |e| match e {
        Expr::MethodCall(m) => Some(&*m.receiver),
        Expr::Field(f) => Some(&*f.base),
        Expr::Index(i) => Some(&*i.expr),
        Expr::Try(t) => Some(&*t.expr),
        Expr::Await(a) => Some(&*a.base),
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Deref(_),
            expr,
            ..
        }) => Some(&**expr),
        Expr::Paren(p) => Some(&*p.expr),
        Expr::Group(g) => Some(&*g.expr),
        Expr::Reference(r) => Some(&*r.expr),
        _ => None,
    })
}

/// Whether `a` and `b` name the same place: the same one-segment path (`x`), or the same
/// field of the same place (`self.weight`). References and parentheses are looked through.
pub(crate) fn same_place(a: &Expr, b: &Expr) -> bool {
    match (strip(a), strip(b)) {
        (Expr::Path(a), Expr::Path(b)) => {
            a.qself.is_none()
                && b.qself.is_none()
                && a.path.segments.len() == b.path.segments.len()
                && a.path.segments.iter().zip(&b.path.segments).all(|(x, y)| {
                    x.ident == y.ident
                        && matches!(x.arguments, PathArguments::None)
                        && matches!(y.arguments, PathArguments::None)
                })
        }
        (Expr::Field(a), Expr::Field(b)) => a.member == b.member && same_place(&a.base, &b.base),
        _ => false,
    }
}

/// The argument of a call that takes what a `ManuallyDrop` holds back out, or drops it:
/// `ManuallyDrop::take(&mut x)`, `ManuallyDrop::drop(&mut x)`, `ManuallyDrop::into_inner(x)`.
pub(crate) fn manually_drop_release(call: &syn::ExprCall) -> Option<&Expr> {
    let path = callee_path(call)?;
    let released = ["take", "drop", "into_inner"]
        .iter()
        .any(|f| path_ends_with(path, &["ManuallyDrop", f]));
    if released { call.args.first() } else { None }
}

/// The argument of `ptr::read(..)` (or `read_unaligned`, `read_volatile`): a bitwise move
/// out of a place.
pub(crate) fn ptr_read(call: &syn::ExprCall) -> Option<&Expr> {
    let path = callee_path(call)?;
    let n = path.segments.len();
    let read = n >= 2
        && path.segments[n - 2].ident == "ptr"
        && ident_in(
            &path.segments[n - 1].ident,
            &["read", "read_unaligned", "read_volatile"],
        );
    if read { call.args.first() } else { None }
}

/// The binding a place starts from and the field of it the place names, if any: `x` and
/// `&mut x` are (`x`, `None`); `&x.slice`, `&*x.slice`, `x.slice.inner` are (`x`, `slice`),
/// `t.0` is (`t`, `0`). `ptr::read(p)`, `*` and `unsafe { .. }` are looked through.
pub(crate) fn place_and_field(e: &Expr) -> Option<(&Ident, Option<String>)> {
    let mut e = strip(e);
    let mut field = None;
    loop {
        e = match e {
            Expr::Unary(syn::ExprUnary {
                op: syn::UnOp::Deref(_),
                expr,
                ..
            }) => strip(expr),
            Expr::Unsafe(u) => match u.block.stmts.as_slice() {
                [syn::Stmt::Expr(inner, None)] => strip(inner),
                _ => return None,
            },
            Expr::Call(call) => strip(ptr_read(call)?),
            Expr::Field(f) => {
                field = Some(match &f.member {
                    syn::Member::Named(name) => name.to_string(),
                    syn::Member::Unnamed(index) => index.index.to_string(),
                });
                strip(&f.base)
            }
            Expr::Path(p) if p.qself.is_none() => return Some((p.path.get_ident()?, field)),
            _ => return None,
        };
    }
}

/// Whether `name` is written in SCREAMING_CASE (`CACHE`, `LAST_LOSS`, `BUF2`): the naming of
/// statics and constants. One letter (`T`, `N`) is not enough.
pub(crate) fn is_screaming_case(name: &str) -> bool {
    name.len() >= 2
        && name.bytes().any(|b| b.is_ascii_uppercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Methods and functions that take a value's raw pointer or handle: forgetting the value
/// afterwards hands its memory to whoever holds the pointer.
const RAW_HANDLES: &[&str] = &[
    "as_ptr",
    "as_mut_ptr",
    "as_raw",
    "as_raw_ptr",
    "into_raw",
    "into_raw_parts",
    "device_ptr",
    "device_ptr_mut",
    "as_device_ptr",
    "leak",
];

/// The binding whose raw pointer or handle `e` takes: `x.as_ptr()`, `x.device_ptr()`,
/// `Box::into_raw(x)`, `x.ptr`, `x.handle`.
pub(crate) fn takes_raw_handle(e: &Expr) -> Option<&Ident> {
    match e {
        Expr::MethodCall(m) if RAW_HANDLES.iter().any(|r| m.method == r) => ident_of(&m.receiver),
        Expr::Call(call) => {
            if ident_in(&callee_path(call)?.segments.last()?.ident, RAW_HANDLES) {
                call.args.first().and_then(ident_of)
            } else {
                None
            }
        }
        Expr::Field(f) => match &f.member {
            syn::Member::Named(n)
                if ["ptr", "raw", "handle", "cu_device_ptr", "inner"]
                    .iter()
                    .any(|r| n == r) =>
            {
                ident_of(&f.base)
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether `e` is a value rebuilt from a raw pointer (`Arc::from_raw(p)`, `ptr::read(p)`,
/// cudarc's `dev.upgrade_device_ptr(p, n)`, maybe in an `unsafe` block): wrapping it in
/// `ManuallyDrop` or forgetting it is how unsafe code borrows a value it does not own, not
/// a leak.
pub(crate) fn rebuilt_from_raw(e: &Expr) -> bool {
    match strip(e) {
        Expr::Unsafe(u) => match u.block.stmts.as_slice() {
            [syn::Stmt::Expr(e, None)] => rebuilt_from_raw(e),
            _ => false,
        },
        Expr::MethodCall(m) => m.method == "upgrade_device_ptr",
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

/// Calls `f` with the text of `ident` (what `to_string` gives), written into a buffer that
/// is reused: no allocation, and one formatting call however many names it is compared with.
pub(crate) fn with_text<R>(ident: &Ident, f: impl FnOnce(&str) -> R) -> R {
    use std::cell::RefCell;
    use std::fmt::Write;
    thread_local!(static TEXT: RefCell<String> = const { RefCell::new(String::new()) });
    TEXT.with(|text| match text.try_borrow_mut() {
        Ok(mut text) => {
            text.clear();
            let _ = write!(text, "{ident}");
            f(&text)
        }
        // Called from inside `f`: a fresh string.
        Err(_) => f(&ident.to_string()),
    })
}

/// Whether `ident` is one of `names`.
pub(crate) fn ident_in(ident: &Ident, names: &[&str]) -> bool {
    with_text(ident, |text| names.contains(&text))
}

/// Adds the name `ident` to `set`, allocating only when it is new: the walks record every
/// path they meet, and most are met again.
pub(crate) fn insert_ident(set: &mut rustc_hash::FxHashSet<String>, ident: &Ident) {
    with_text(ident, |text| {
        if !set.contains(text) {
            set.insert(text.to_owned());
        }
    });
}

/// Calls `f` with every identifier a pattern binds.
pub(crate) fn pat_idents<'a>(pat: &'a Pat, f: &mut impl FnMut(&'a Ident)) {
    match pat {
        Pat::Ident(p) => {
            f(&p.ident);
            if let Some((_, sub)) = &p.subpat {
                pat_idents(sub, f);
            }
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|p| pat_idents(p, f)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pat_idents(p, f)),
        Pat::Struct(s) => s.fields.iter().for_each(|field| pat_idents(&field.pat, f)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| pat_idents(p, f)),
        Pat::Reference(r) => pat_idents(&r.pat, f),
        Pat::Type(t) => pat_idents(&t.pat, f),
        Pat::Or(o) => o.cases.iter().for_each(|p| pat_idents(p, f)),
        Pat::Paren(p) => pat_idents(&p.pat, f),
        Pat::Guard(g) => pat_idents(&g.pat, f),
        _ => {}
    }
}

/// Whether an attribute's path ends with `name` (`#[no_grad]`, `#[gpuscope::no_grad]`).
pub(crate) fn has_attr(attrs: &[syn::Attribute], name: &str) -> bool {
    attrs
        .iter()
        .any(|a| a.path().segments.last().is_some_and(|s| s.ident == name))
}

/// Whether a call's path (its segments' names, in order) wraps its argument, so that the
/// value is what it wraps: `Some(t)`, `Ok(t)`, `Err(t)`, `Box::new(t)` and the other
/// owning or sharing cells' `new`.
pub(crate) fn is_wrapper_path(segments: &[String]) -> bool {
    match segments {
        [.., w] if matches!(w.as_str(), "Some" | "Ok" | "Err") => true,
        [.., ty, f] => {
            f == "new"
                && matches!(
                    ty.as_str(),
                    "Box" | "Rc" | "Arc" | "Mutex" | "RwLock" | "RefCell" | "Cell" | "ManuallyDrop"
                )
        }
        _ => false,
    }
}

/// Short source-like text of `e` for messages: `self.total`, `loss.clone()`, `&x`,
/// `criterion(..)`.
pub(crate) fn show(e: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, e);
    out
}

fn write_expr(out: &mut String, e: &Expr) {
    match e {
        Expr::Path(p) if p.qself.is_none() => {
            for (i, seg) in p.path.segments.iter().enumerate() {
                if i > 0 || p.path.leading_colon.is_some() {
                    out.push_str("::");
                }
                out.push_str(&seg.ident.to_string());
            }
        }
        Expr::Field(f) => {
            write_expr(out, &f.base);
            out.push('.');
            match &f.member {
                syn::Member::Named(name) => out.push_str(&name.to_string()),
                syn::Member::Unnamed(index) => out.push_str(&index.index.to_string()),
            }
        }
        Expr::Reference(r) => {
            out.push_str(if r.mutability.is_some() { "&mut " } else { "&" });
            write_expr(out, &r.expr);
        }
        Expr::Paren(p) => {
            out.push('(');
            write_expr(out, &p.expr);
            out.push(')');
        }
        Expr::Group(g) => write_expr(out, &g.expr),
        Expr::MethodCall(m) => {
            write_expr(out, &m.receiver);
            out.push('.');
            out.push_str(&m.method.to_string());
            out.push_str(if m.args.is_empty() { "()" } else { "(..)" });
        }
        Expr::Call(c) => {
            write_expr(out, &c.func);
            out.push_str(if c.args.is_empty() { "()" } else { "(..)" });
        }
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Deref(_),
            expr,
            ..
        }) => {
            out.push('*');
            write_expr(out, expr);
        }
        Expr::Closure(c) => {
            out.push_str(if c.inputs.is_empty() { "|| " } else { "|..| " });
            write_expr(out, &c.body);
        }
        Expr::Try(t) => {
            write_expr(out, &t.expr);
            out.push('?');
        }
        Expr::Struct(st) => {
            out.push_str(&path_names(&st.path).join("::"));
            out.push_str(" { .. }");
        }
        Expr::Await(a) => {
            write_expr(out, &a.base);
            out.push_str(".await");
        }
        Expr::Index(i) => {
            write_expr(out, &i.expr);
            out.push('[');
            write_expr(out, &i.index);
            out.push(']');
        }
        Expr::Macro(m) => {
            for (i, seg) in m.mac.path.segments.iter().enumerate() {
                if i > 0 {
                    out.push_str("::");
                }
                out.push_str(&seg.ident.to_string());
            }
            out.push_str(match m.mac.delimiter {
                syn::MacroDelimiter::Paren(_) => "!(..)",
                syn::MacroDelimiter::Brace(_) => "! { .. }",
                syn::MacroDelimiter::Bracket(_) => "![..]",
            });
        }
        Expr::Block(b) => match b.block.stmts.as_slice() {
            [syn::Stmt::Expr(e, None)] => write_expr(out, e),
            _ => out.push_str("{ .. }"),
        },
        Expr::Binary(b) => {
            write_expr(out, &b.left);
            out.push(' ');
            out.push_str(&quote::ToTokens::to_token_stream(&b.op).to_string());
            out.push(' ');
            write_expr(out, &b.right);
        }
        Expr::Cast(c) => {
            write_expr(out, &c.expr);
            out.push_str(" as ");
            match &*c.ty {
                Type::Path(p) if p.qself.is_none() => {
                    out.push_str(&path_names(&p.path).join("::"));
                }
                ty => out.push_str(&quote::ToTokens::to_token_stream(ty).to_string()),
            }
        }
        _ => {
            let text = quote::ToTokens::to_token_stream(e).to_string();
            if text.chars().count() > 40 {
                out.extend(text.chars().take(39));
                out.push('…');
            } else {
                out.push_str(&text);
            }
        }
    }
}

/// Whether `op` is a compound assignment (`+=`, `-=`, ..., `>>=`): it writes its left side.
pub(crate) fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitOrAssign(_)
            | BitAndAssign(_)
            | BitXorAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(src: &str) -> Expr {
        syn::parse_str(src).unwrap()
    }

    #[test]
    fn unwrapping_and_guards() {
        let sum = expr("a.add(&b)");
        assert_eq!(unwrapped(&expr("(&a.add(&b)?).unwrap()")), &sum);
        assert_eq!(unwrapped(&expr("a.add(&b).expect(\"x\")")), &sum);
        assert!(
            matches!(unwrapped(&expr("a.add(&b).item()")), Expr::MethodCall(m) if m.method == "item")
        );
        assert!(is_guard(&expr("CACHE.lock().unwrap()")));
        assert!(is_guard(&expr("cell.borrow_mut()")));
        assert!(is_guard(&expr("STATE.write().await")));
        assert!(!is_guard(&expr("CACHE.len()")));
        let with_attr: syn::Stmt = syn::parse_str("#[allow(x)] f();").unwrap();
        let syn::Stmt::Expr(e, _) = with_attr else {
            panic!()
        };
        assert_eq!(expr_attrs(&e).len(), 1);
        assert!(expr_attrs(&expr("f()")).is_empty());
    }

    #[test]
    fn roots_and_chains() {
        let e = expr("*CACHE.lock().unwrap().items[0]");
        assert_eq!(
            ident_of(chain_root(&e)).map(|i| i.to_string()).as_deref(),
            Some("CACHE")
        );
    }

    #[test]
    fn places() {
        assert!(same_place(&expr("x"), &expr("&x")));
        assert!(same_place(&expr("self.w"), &expr("(self.w)")));
        assert!(!same_place(&expr("self.w"), &expr("self.b")));
        assert!(!same_place(&expr("x"), &expr("y")));
        assert!(!same_place(&expr("f::<u8>"), &expr("f::<u8>")));
    }

    #[test]
    fn shows_short_text() {
        assert_eq!(show(&expr("slots[i + 1]")), "slots[i + 1]");
        assert_eq!(show(&expr("vec![x.add(x)?]")), "vec![..]");
        assert_eq!(show(&expr("std::format!(\"{}\", x)")), "std::format!(..)");
        assert_eq!(show(&expr("self.total")), "self.total");
        assert_eq!(show(&expr("&mut x.0")), "&mut x.0");
        assert_eq!(show(&expr("loss.clone()")), "loss.clone()");
        assert_eq!(show(&expr("nn::mse(a, b)")), "nn::mse(..)");
        assert_eq!(show(&expr("*g")), "*g");
        assert_eq!(show(&expr("1 + 2")), "1 + 2");
        assert_eq!(
            show(&expr("loss * chunk.len() as f64")),
            "loss * chunk.len() as f64"
        );
        assert_eq!(show(&expr("|| 1")), "|| 1");
        assert_eq!(show(&expr("x.mean()?.backward()")), "x.mean()?.backward()");
        assert_eq!(show(&expr("Entry { w, n: 1 }")), "Entry { .. }");
        assert_eq!(show(&expr("|x| { x }")), "|..| x");
        assert_eq!(show(&expr("|| { let a = 1; a }")), "|| { .. }");
    }

    #[test]
    fn screaming_case() {
        assert!(is_screaming_case("CACHE"));
        assert!(is_screaming_case("LAST_LOSS_2"));
        assert!(!is_screaming_case("T"));
        assert!(!is_screaming_case("Cache"));
        assert!(!is_screaming_case("__"));
    }
}
