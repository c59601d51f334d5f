//! Small questions about syntax trees that several rules ask: what a path ends with, the
//! root of a method chain, whether two places are the same, whether a value is obviously
//! not a tensor, whether a type is a plain scalar.

use syn::{Expr, GenericArgument, Ident, Pat, PathArguments, Type};

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

/// The identifier of a one-segment path expression such as `loss` (or `self`).
pub(crate) fn ident_of(e: &Expr) -> Option<&Ident> {
    match strip(e) {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
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
pub(crate) fn chain_root(mut e: &Expr) -> &Expr {
    loop {
        e = match e {
            Expr::MethodCall(m) => &m.receiver,
            Expr::Field(f) => &f.base,
            Expr::Index(i) => &i.expr,
            Expr::Try(t) => &t.expr,
            Expr::Await(a) => &a.base,
            Expr::Unary(syn::ExprUnary {
                op: syn::UnOp::Deref(_),
                expr,
                ..
            }) => expr,
            Expr::Paren(p) => &p.expr,
            Expr::Group(g) => &g.expr,
            Expr::Reference(r) => &r.expr,
            _ => return e,
        };
    }
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

/// Whether `name` is written in SCREAMING_CASE (`CACHE`, `LAST_LOSS`, `BUF2`): the naming of
/// statics and constants. One letter (`T`, `N`) is not enough.
pub(crate) fn is_screaming_case(name: &str) -> bool {
    name.len() >= 2
        && name.bytes().any(|b| b.is_ascii_uppercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether a value is obviously not a tensor, so that forgetting it or storing it in a static
/// holds no GPU memory: literals, `()`, strings being built (`format!`, `.to_string()`,
/// `String::from`, `.into_boxed_str()`), boxes, tuples and arrays of such, and closures
/// returning such.
pub(crate) fn obviously_not_tensor(e: &Expr) -> bool {
    match strip(e) {
        Expr::Lit(_) => true,
        Expr::Tuple(t) => t.elems.iter().all(obviously_not_tensor),
        Expr::Array(a) => a.elems.iter().all(obviously_not_tensor),
        Expr::Unary(u) => {
            matches!(u.op, syn::UnOp::Neg(_) | syn::UnOp::Not(_)) && obviously_not_tensor(&u.expr)
        }
        Expr::Closure(c) => obviously_not_tensor(&c.body),
        Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            syn::Stmt::Expr(e, None) => obviously_not_tensor(e),
            _ => false,
        },
        Expr::Macro(m) => {
            let name = m.mac.path.segments.last().map(|s| s.ident.to_string());
            matches!(
                name.as_deref(),
                Some("format" | "concat" | "stringify" | "include_str" | "env")
            )
        }
        Expr::MethodCall(m) => {
            matches!(
                m.method.to_string().as_str(),
                "to_string" | "into_boxed_str"
            ) || (m.method == "to_owned" && obviously_not_tensor(&m.receiver))
        }
        Expr::Path(p) => is_empty_container_ctor(&p.path),
        Expr::Call(call) => match callee_path(call) {
            Some(p) if path_ends_with(p, &["String", "from"]) => true,
            Some(p) if is_empty_container_ctor(p) || path_ends_with(p, &["with_capacity"]) => {
                call.args.iter().all(obviously_not_tensor)
            }
            Some(p) if path_ends_with(p, &["Box", "new"]) || path_ends_with(p, &["Some"]) => {
                call.args.iter().all(obviously_not_tensor)
            }
            _ => false,
        },
        _ => false,
    }
}

/// Whether `path` makes an empty container or a default value: `Default::default`,
/// `Vec::new`, `Mutex::default`, `HashMap::new` (as a function or called).
fn is_empty_container_ctor(path: &syn::Path) -> bool {
    let n = path.segments.len();
    let Some(last) = path.segments.last() else {
        return false;
    };
    if n == 1 {
        return false;
    }
    let owner = path.segments[n - 2].ident.to_string();
    (last.ident == "new" || last.ident == "default")
        && (owner == "Default" || CONTAINERS.contains(&owner.as_str()) || owner == "String")
}

/// Whether `ty` is plain data that cannot hold a tensor or its graph: numbers, `bool`,
/// `char`, strings, paths, durations, atomics, and the standard containers, locks, cells
/// and pointers (`Vec`, `HashMap`, `Mutex`, `RefCell`, `OnceLock`, `Arc`, ...), tuples,
/// arrays, slices and references whose contents are all plain (`Vec<f32>`,
/// `Mutex<HashMap<String, usize>>`). `Tensor`, `Vec<Tensor>` or any type parameter are not plain.
pub(crate) fn is_plain_type(ty: &Type) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() => {
            let Some(last) = p.path.segments.last() else {
                return false;
            };
            let name = last.ident.to_string();
            if PLAIN.contains(&name.as_str()) || (name.starts_with("Atomic") && name.len() > 6) {
                return matches!(last.arguments, PathArguments::None);
            }
            if !CONTAINERS.contains(&name.as_str()) {
                return false;
            }
            match &last.arguments {
                PathArguments::AngleBracketed(args) => {
                    let mut types = args.args.iter().filter_map(|arg| match arg {
                        GenericArgument::Type(t) => Some(t),
                        _ => None,
                    });
                    let mut any = false;
                    types.all(|t| {
                        any = true;
                        is_plain_type(t)
                    }) && any
                }
                _ => false,
            }
        }
        Type::Array(a) => is_plain_type(&a.elem),
        Type::Slice(s) => is_plain_type(&s.elem),
        Type::Reference(r) => is_plain_type(&r.elem),
        Type::Paren(p) => is_plain_type(&p.elem),
        Type::Group(g) => is_plain_type(&g.elem),
        Type::Tuple(t) => t.elems.iter().all(is_plain_type),
        _ => false,
    }
}

/// Whether a value of declared type `ty` may hold a tensor: the type names something
/// tensor-like (a path segment with a word such as `Tensor`, `Model`, `Module`, `Layer`,
/// `Param`, `Grad`, `Storage`, `Activation`, `Weight`, `Embedding`, `Variable` or `Var` in
/// its CamelCase name), directly or in its type arguments, or is a `dyn Any`. `OnceLock<Device>` or
/// `RefCell<(u64, Generator)>` do not; `Mutex<Vec<Tensor>>` and `OnceLock<Model>` do.
pub(crate) fn may_hold_tensor(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => {
            p.qself.as_ref().is_some_and(|q| may_hold_tensor(&q.ty))
                || p.path.segments.iter().any(|seg| {
                    is_tensor_like_name(&seg.ident.to_string())
                        || match &seg.arguments {
                            PathArguments::AngleBracketed(args) => args.args.iter().any(|arg| match arg {
                                GenericArgument::Type(t) => may_hold_tensor(t),
                                _ => false,
                            }),
                            _ => false,
                        }
                })
        }
        Type::Array(a) => may_hold_tensor(&a.elem),
        Type::Slice(s) => may_hold_tensor(&s.elem),
        Type::Reference(r) => may_hold_tensor(&r.elem),
        Type::Ptr(p) => may_hold_tensor(&p.elem),
        Type::Paren(p) => may_hold_tensor(&p.elem),
        Type::Group(g) => may_hold_tensor(&g.elem),
        Type::Tuple(t) => t.elems.iter().any(may_hold_tensor),
        Type::TraitObject(t) => t.bounds.iter().any(|b| {
            matches!(b, syn::TypeParamBound::Trait(t) if t.path.segments.last().is_some_and(|s| s.ident == "Any"))
        }),
        _ => false,
    }
}

/// Whether a type name has a tensor-like word in it: `Tensor`, `TensorList`, `ModelState`,
/// `GradBuffer` do, `Upgrade` or `Player` do not.
fn is_tensor_like_name(name: &str) -> bool {
    const WORDS: [&str; 20] = [
        "tensor",
        "tensors",
        "model",
        "models",
        "module",
        "modules",
        "layer",
        "layers",
        "param",
        "params",
        "parameter",
        "parameters",
        "grad",
        "grads",
        "gradient",
        "gradients",
        "storage",
        "activation",
        "weight",
        "weights",
    ];
    const MORE: [&str; 5] = ["activations", "embedding", "embeddings", "variable", "var"];
    camel_words(name).any(|word| WORDS.contains(&word.as_str()) || MORE.contains(&word.as_str()))
}

/// The lowercase words of a CamelCase (or snake_case) name: `GradBuffer` gives `grad`, `buffer`.
fn camel_words(name: &str) -> impl Iterator<Item = String> + '_ {
    let mut words = Vec::new();
    let mut current = String::new();
    for c in name.chars() {
        if c == '_' {
            words.push(std::mem::take(&mut current));
            continue;
        }
        if c.is_uppercase()
            && !current.is_empty()
            && !current.chars().last().is_some_and(char::is_uppercase)
        {
            words.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    words.push(current);
    words.into_iter().filter(|w| !w.is_empty())
}

/// Names of the primitive number types (`f32::from(x)` converts to one).
pub(crate) const SCALARS: &[&str] = &[
    "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32",
    "u64", "u128", "usize",
];

/// Names of types that hold no tensor: primitive scalars, strings and a few std value types.
const PLAIN: &[&str] = &[
    "f32",
    "f64",
    "f16",
    "bf16",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "bool",
    "char",
    "str",
    "String",
    "Path",
    "PathBuf",
    "OsString",
    "OsStr",
    "Duration",
    "Instant",
    "SystemTime",
];

/// Generic standard types that are plain when their type arguments are.
const CONTAINERS: &[&str] = &[
    "Vec",
    "VecDeque",
    "Option",
    "Box",
    "Rc",
    "Arc",
    "Cell",
    "RefCell",
    "Mutex",
    "RwLock",
    "OnceLock",
    "OnceCell",
    "LazyLock",
    "Lazy",
    "HashMap",
    "BTreeMap",
    "HashSet",
    "BTreeSet",
    "BinaryHeap",
    "Cow",
];

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
        _ => {}
    }
}

/// Whether an attribute's path ends with `name` (`#[no_grad]`, `#[gpuscope::no_grad]`).
pub(crate) fn has_attr(attrs: &[syn::Attribute], name: &str) -> bool {
    attrs
        .iter()
        .any(|a| a.path().segments.last().is_some_and(|s| s.ident == name))
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
                    let names: Vec<String> = p
                        .path
                        .segments
                        .iter()
                        .map(|s| s.ident.to_string())
                        .collect();
                    out.push_str(&names.join("::"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(src: &str) -> Expr {
        syn::parse_str(src).unwrap()
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
    fn tensor_holding_types() {
        for yes in [
            "Tensor",
            "Mutex<Vec<Tensor>>",
            "OnceLock<Model>",
            "RefCell<Option<(u64, Var)>>",
            "Box<dyn Any>",
            "[Parameter; 2]",
            "GradBuffer",
            "HTTPTensor",
        ] {
            assert!(may_hold_tensor(&syn::parse_str(yes).unwrap()), "{yes}");
        }
        for no in [
            "OnceLock<Device>",
            "RefCell<(u64, Generator)>",
            "Mutex<Vec<String>>",
            "AtomicU64",
            "Box<dyn Fn()>",
            "Variance",
            "Upgrade",
            "Player",
        ] {
            assert!(!may_hold_tensor(&syn::parse_str(no).unwrap()), "{no}");
        }
    }

    #[test]
    fn shows_short_text() {
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

    #[test]
    fn non_tensors() {
        for yes in [
            "1",
            "\"s\"",
            "()",
            "Box::new(5)",
            "format!(\"{x}\")",
            "name.to_string()",
            "String::from(n)",
            "|| 3",
        ] {
            assert!(obviously_not_tensor(&expr(yes)), "{yes}");
        }
        for no in [
            "t",
            "t.clone()",
            "Box::new(t)",
            "vec![t]",
            "Some(t)",
            "|| t",
        ] {
            assert!(!obviously_not_tensor(&expr(no)), "{no}");
        }
    }

    #[test]
    fn plain_types() {
        for yes in [
            "f32",
            "Vec<f64>",
            "&[f32]",
            "Option<usize>",
            "[f32; 4]",
            "Mutex<HashMap<String, usize>>",
            "(u8, bool)",
            "AtomicU64",
        ] {
            assert!(is_plain_type(&syn::parse_str(yes).unwrap()), "{yes}");
        }
        for no in [
            "Tensor",
            "Vec<Tensor>",
            "Option<T>",
            "Vec",
            "Mutex<Vec<Entry>>",
            "Atomic",
        ] {
            assert!(!is_plain_type(&syn::parse_str(no).unwrap()), "{no}");
        }
    }
}
