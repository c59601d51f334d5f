//! Best-effort inference of what an expression's value is ([`Value`]), over the bindings of
//! one function ([`Env`]).
//!
//! Evidence, strongest first: declared types (signatures, `let` annotations, struct
//! fields, statics, return types of the file's functions), constructors and methods of
//! known tensor types (`Tensor::zeros(..)`, `x.matmul(&w)`, `t.clone()`), host reads
//! (`item`, `to_vec1`, `as` casts, literals, `format!`), and last, names (`loss`,
//! `cross_entropy(..)`). Unknown stays unknown: the rules prefer silence.

use rustc_hash::{FxHashMap, FxHashSet};

use syn::{BinOp, Expr, Type};

use super::names::{is_loss_fn_name, is_loss_name};
use super::placement::{CPU_DEVICE, MadeOf, binary_on_cpu, method_on_cpu};
use super::types::{Kind, SCALARS, Types};
use super::value::{Graph, Value};
use crate::syntax::{callee_path, is_wrapper_path, path_names};

/// Methods whose result is a host value whatever the receiver: sizes, shapes, flags,
/// strings, numbers.
const HOST_METHODS: &[&str] = &[
    "len",
    "is_empty",
    "shape",
    "dims",
    "dim",
    "size",
    "stride",
    "strides",
    "rank",
    "ndim",
    "numel",
    "nbytes",
    "elem_count",
    "dtype",
    "kind",
    "device",
    "is_contiguous",
    "requires_grad",
    "to_string",
    "to_string_lossy",
    "into_string",
    "to_str",
    "as_str",
    "display",
    "count",
    "contains",
    "contains_key",
    "starts_with",
    "ends_with",
    "eq",
    "ne",
    "cmp",
    "partial_cmp",
    "is_some",
    "is_none",
    "is_ok",
    "is_err",
    "as_ptr",
    "as_mut_ptr",
    "join",
    "with_extension",
    "file_name",
    "extension",
    "parent",
];

/// Methods that pass their receiver's value on (unwrapping, converting, cloning).
const PASS_THROUGH: &[&str] = &[
    "clone",
    "shallow_clone",
    "unwrap",
    "expect",
    "unwrap_or_default",
    "as_ref",
    "as_mut",
    "borrow",
    "borrow_mut",
    "lock",
    "read",
    "write",
    "deref",
    "to_owned",
    "into",
    "ok",
];

/// What is bound in a function, and what inference needs to read types.
pub(crate) struct Env<'i> {
    pub(crate) types: Types<'i>,
    bindings: FxHashMap<String, Value>,
    /// Names `.backward()` is called on somewhere in the function: they hold losses.
    backwarded: FxHashSet<String>,
    /// Names bound to closures, with what a call of each returns (`let f = |t: &Tensor|
    /// t.add(t);` returns a fresh tensor).
    closures: Vec<(String, Value)>,
}

/// The bindings of the function around a nested one, kept while the nested one is walked.
pub(crate) struct SavedFn {
    bindings: FxHashMap<String, Value>,
    backwarded: FxHashSet<String>,
    closures: Vec<(String, Value)>,
}

impl<'i> Env<'i> {
    pub(crate) fn new(types: Types<'i>) -> Self {
        Env {
            types,
            bindings: FxHashMap::default(),
            backwarded: FxHashSet::default(),
            closures: Vec::new(),
        }
    }

    /// Starts a new function: no bindings, `backwarded` the names `.backward()` is called on.
    pub(crate) fn enter_fn(&mut self, backwarded: FxHashSet<String>) -> SavedFn {
        SavedFn {
            bindings: std::mem::take(&mut self.bindings),
            backwarded: std::mem::replace(&mut self.backwarded, backwarded),
            closures: std::mem::take(&mut self.closures),
        }
    }

    /// Ends a function started with [`enter_fn`](Env::enter_fn).
    pub(crate) fn leave_fn(&mut self, saved: SavedFn) {
        self.bindings = saved.bindings;
        self.backwarded = saved.backwarded;
        self.closures = saved.closures;
    }

    /// Notes that `name` (bound just before) is a closure whose calls return `returns`.
    pub(crate) fn bind_closure(&mut self, name: String, returns: Value) {
        self.closures.push((name, returns));
    }

    /// Binds `name` to `value` (shadowing any earlier binding).
    pub(crate) fn bind(&mut self, name: String, mut value: Value) {
        if value.kind != Kind::Host && self.backwarded.contains(&name) {
            // `.backward()` is called on it: a tensor carrying a graph.
            value.kind = Kind::Device;
            if value.graph == Graph::Unknown {
                value.graph = Graph::Loss;
            }
        }
        if value.graph == Graph::Unknown && value.kind != Kind::Host && is_loss_name(&name) {
            value.graph = Graph::Loss;
        }
        if !self.closures.is_empty() {
            self.closures.retain(|(closure, _)| *closure != name);
        }
        self.bindings.insert(name, value);
    }

    /// What `name` is bound to in this function.
    pub(crate) fn binding(&self, name: &str) -> Option<&Value> {
        self.bindings.get(name)
    }

    /// The value of a declared type.
    pub(crate) fn of_type(&self, ty: &Type) -> Value {
        Value::of_type(self.types.info(ty))
    }

    /// What `e`'s value is.
    pub(crate) fn infer(&self, e: &Expr) -> Value {
        match e {
            Expr::Lit(_) | Expr::Cast(_) | Expr::Range(_) => Value::HOST,
            Expr::Paren(p) => self.infer(&p.expr),
            Expr::Group(g) => self.infer(&g.expr),
            Expr::Reference(r) => Value {
                borrowed: true,
                mutable: r.mutability.is_some(),
                ..self.infer(&r.expr)
            },
            Expr::Path(p) => self.path(p),
            Expr::Field(f) => self.field(f),
            Expr::Call(call) => self.call(call),
            Expr::MethodCall(m) => self.method(m),
            Expr::Binary(b) => self.binary(b),
            Expr::Unary(u) => match u.op {
                syn::UnOp::Not(_) | syn::UnOp::Neg(_) => self.infer(&u.expr).owned(),
                _ => self.infer(&u.expr),
            },
            Expr::Try(t) => self.infer(&t.expr),
            Expr::Await(a) => self.infer(&a.base),
            Expr::Unsafe(u) => self.block(&u.block),
            Expr::Block(b) => self.block(&b.block),
            Expr::If(i) => match &i.else_branch {
                Some((_, other)) => self.block(&i.then_branch).join(&self.infer(other)),
                None => Value::HOST,
            },
            Expr::Match(m) => m
                .arms
                .iter()
                .map(|arm| self.infer(&arm.body))
                .reduce(|a, b| a.join(&b))
                .unwrap_or(Value::UNKNOWN),
            Expr::Tuple(t) => self.all(t.elems.iter()),
            Expr::Array(a) => self.all(a.elems.iter()),
            Expr::Repeat(r) => self.infer(&r.expr).owned(),
            Expr::Index(i) => {
                let base = self.infer(&i.expr);
                Value {
                    fresh: false,
                    name: None,
                    ..base
                }
            }
            Expr::Struct(s) => match s.path.segments.last() {
                Some(last) if s.path.segments.len() == 1 => {
                    let name = last.ident.to_string();
                    let kind = self.types.adt_kind(&name);
                    let fields = self.all(s.fields.iter().map(|f| &f.expr));
                    Value {
                        kind: kind.join(if fields.kind == Kind::Device {
                            Kind::Device
                        } else {
                            kind
                        }),
                        fresh: fields.fresh,
                        name: Some(name),
                        ..Value::UNKNOWN
                    }
                }
                _ => Value::UNKNOWN,
            },
            Expr::Macro(m) => self.macro_value(&m.mac),
            Expr::Closure(_) | Expr::Async(_) => Value::UNKNOWN,
            _ => Value::UNKNOWN,
        }
    }

    /// The value of a block: its tail expression.
    fn block(&self, block: &syn::Block) -> Value {
        match block.stmts.last() {
            Some(syn::Stmt::Expr(e, None)) => self.infer(e),
            Some(syn::Stmt::Macro(m)) if m.semi_token.is_none() => self.macro_value(&m.mac),
            _ => Value::HOST,
        }
    }

    fn all<'e>(&self, exprs: impl Iterator<Item = &'e Expr>) -> Value {
        let mut out = Value::HOST;
        let mut made_of = MadeOf::NOTHING;
        for e in exprs {
            let part = self.infer(e).owned();
            made_of.add(&part);
            out = out.join(&part);
        }
        out.borrowed = false;
        out.on_cpu = made_of.on_cpu();
        out
    }

    fn path(&self, p: &syn::ExprPath) -> Value {
        if p.qself.is_some() {
            return Value::UNKNOWN;
        }
        if self.types.index().used.names_cpu_device(&p.path) {
            return CPU_DEVICE;
        }
        if is_empty_constructor(&p.path) {
            // `get_or_init(Default::default)`, `unwrap_or_else(Vec::new)`.
            return Value {
                empty: true,
                ..Value::UNKNOWN
            };
        }
        if let Some(ident) = p.path.get_ident() {
            let name = ident.to_string();
            if let Some(value) = self.bindings.get(&name) {
                return Value {
                    fresh: value.fresh,
                    ..value.clone()
                };
            }
            if name == "None" {
                return Value {
                    empty: true,
                    ..Value::HOST
                };
            }
            if let Some(Some(ty)) = self.types.index().statics.get(&name) {
                return self.of_type(ty);
            }
            if is_loss_name(&name) || self.backwarded.contains(&name) {
                return Value {
                    graph: Graph::Loss,
                    ..Value::UNKNOWN
                };
            }
        }
        Value::UNKNOWN
    }

    fn field(&self, f: &syn::ExprField) -> Value {
        let base = self.infer(&f.base);
        let field = match &f.member {
            syn::Member::Named(name) => name.to_string(),
            syn::Member::Unnamed(index) => index.index.to_string(),
        };
        let typed = base
            .name
            .as_deref()
            .and_then(|adt| self.types.field(adt, &field))
            .map(|ty| self.of_type(ty));
        let mut value = typed.unwrap_or(Value::UNKNOWN);
        if value.graph == Graph::Unknown && value.kind != Kind::Host && is_loss_name(&field) {
            value.graph = Graph::Loss;
        }
        value
    }

    fn call(&self, call: &syn::ExprCall) -> Value {
        let Some(path) = callee_path(call) else {
            return Value::UNKNOWN;
        };
        let segments = path_names(path);
        // A call of a closure bound in this function: what its body returns.
        if let [name] = segments.as_slice() {
            if let Some((_, value)) = self.closures.iter().rev().find(|(c, _)| c == name) {
                return Value {
                    fresh: value.kind == Kind::Device && !value.borrowed,
                    ..value.clone()
                };
            }
        }
        let args = || self.all(call.args.iter());
        let first = || {
            call.args
                .first()
                .map_or(Value::UNKNOWN, |a| self.infer(a).owned())
        };
        match segments.as_slice() {
            // Wrappers hold what they wrap.
            s if is_wrapper_path(s) => first(),
            // Conversions to numbers and strings.
            [.., ty, _] if SCALARS.contains(&ty.as_str()) => Value::HOST,
            [.., ty, _] if matches!(ty.as_str(), "String" | "PathBuf" | "CString" | "Path") => {
                Value::HOST
            }
            // Empty containers: what they will hold is not known yet.
            _ if is_empty_constructor(path) && !args().owns_device_memory() => Value {
                empty: call
                    .args
                    .iter()
                    .all(|a| self.infer(a).empty || matches!(a, Expr::Lit(_))),
                ..Value::UNKNOWN
            },
            // `Tensor::zeros(..)`: an associated function of a device type.
            [.., ty, _] if self.is_device_type(path, ty) => {
                let graph = args().graph;
                Value {
                    graph: if graph == Graph::Loss {
                        Graph::Loss
                    } else {
                        Graph::Unknown
                    },
                    on_cpu: args().on_cpu,
                    ..Value::FRESH_TENSOR
                }
            }
            [.., name] if is_loss_fn_name(name) => Value::loss(),
            [name] if self.types.index().cpu_device_fns.contains(name) => CPU_DEVICE,
            [name] => match self.types.index().returns.get(name) {
                Some(Some(ty)) => {
                    let value = self.of_type(ty);
                    Value {
                        fresh: value.kind == Kind::Device && !value.borrowed,
                        on_cpu: args().on_cpu,
                        ..value
                    }
                }
                Some(None) => Value::HOST,
                None => Value {
                    on_cpu: args().on_cpu,
                    ..Value::UNKNOWN
                },
            },
            // A call given the CPU device or tensors there makes its result there.
            _ => Value {
                on_cpu: args().on_cpu,
                ..Value::UNKNOWN
            },
        }
    }

    /// Whether `ty` (a path segment before an associated function) is a device type.
    fn is_device_type(&self, path: &syn::Path, ty: &str) -> bool {
        let n = path.segments.len();
        let type_path = syn::Path {
            leading_colon: None,
            segments: path.segments.iter().take(n - 1).cloned().collect(),
        };
        let ty_expr = Type::Path(syn::TypePath {
            attrs: Vec::new(),
            qself: None,
            path: type_path,
        });
        let _ = ty;
        self.types.kind(&ty_expr) == Kind::Device
    }

    fn method(&self, m: &syn::ExprMethodCall) -> Value {
        let name = m.method.to_string();
        let used = &self.types.index().used;
        if name == "backward" || name == "grad" || name == "backward_step" {
            // Gradients (or nothing): no loss graph.
            return Value {
                graph: Graph::Detached,
                ..Value::UNKNOWN
            };
        }
        if used.is_to_host(&name) || HOST_METHODS.contains(&name.as_str()) {
            return Value::HOST;
        }
        let receiver = self.infer(&m.receiver);
        if used.is_detach(&name) {
            return Value {
                graph: Graph::Detached,
                borrowed: false,
                ..receiver
            };
        }
        if PASS_THROUGH.contains(&name.as_str()) {
            return if matches!(name.as_str(), "clone" | "shallow_clone" | "to_owned") {
                receiver.owned()
            } else {
                receiver
            };
        }
        if is_loss_fn_name(&name) {
            return Value::loss();
        }
        let args = self.all(m.args.iter());
        let on_cpu = method_on_cpu(&name, &receiver, &args);
        match receiver.kind {
            // An op on a tensor makes a tensor.
            Kind::Device => Value {
                kind: Kind::Device,
                graph: match receiver.graph.join(args.graph) {
                    Graph::Loss => Graph::Loss,
                    _ => Graph::Unknown,
                },
                fresh: true,
                on_cpu,
                ..Value::UNKNOWN
            },
            Kind::Host if args.kind == Kind::Host => Value::HOST,
            _ => Value {
                graph: if receiver.graph == Graph::Loss || args.graph == Graph::Loss {
                    Graph::Loss
                } else {
                    Graph::Unknown
                },
                on_cpu,
                ..Value::UNKNOWN
            },
        }
    }

    fn binary(&self, b: &syn::ExprBinary) -> Value {
        match b.op {
            BinOp::Add(_)
            | BinOp::Sub(_)
            | BinOp::Mul(_)
            | BinOp::Div(_)
            | BinOp::Rem(_)
            | BinOp::BitAnd(_)
            | BinOp::BitOr(_)
            | BinOp::BitXor(_)
            | BinOp::Shl(_)
            | BinOp::Shr(_) => {
                let (l, r) = (self.infer(&b.left), self.infer(&b.right));
                let kind = l.kind.join(r.kind);
                Value {
                    kind,
                    graph: l.graph.join(r.graph),
                    fresh: kind == Kind::Device,
                    on_cpu: binary_on_cpu(&l, &r),
                    ..Value::UNKNOWN
                }
            }
            // Comparisons and `&&`/`||` give a host `bool`; compound assignments `()`.
            _ => Value::HOST,
        }
    }

    fn macro_value(&self, mac: &syn::Macro) -> Value {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        match name.as_str() {
            "format" | "concat" | "stringify" | "include_str" | "env" | "line" | "file"
            | "column" | "module_path" | "cfg" | "matches" | "format_args" => Value::HOST,
            "vec" => {
                // `vec![x; n]` or `vec![a, b]`.
                let tokens = &mac.tokens;
                if let Ok(repeat) = syn::parse2::<syn::ExprRepeat>(quote::quote!([#tokens])) {
                    return self.infer(&repeat.expr).owned();
                }
                match mac.parse_body_with(
                    syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                ) {
                    Ok(elems) if !elems.is_empty() => self.all(elems.iter()),
                    _ => Value::UNKNOWN,
                }
            }
            _ => Value::UNKNOWN,
        }
    }
}

/// Whether `path` names a constructor of an empty container or a default value:
/// `Vec::new`, `HashMap::with_capacity`, `Mutex::default`, `Default::default`.
fn is_empty_constructor(path: &syn::Path) -> bool {
    let n = path.segments.len();
    if n < 2 {
        return false;
    }
    let owner = &path.segments[n - 2].ident;
    let f = &path.segments[n - 1].ident;
    crate::syntax::ident_in(f, &["new", "default", "with_capacity"])
        && (owner == "Default"
            || owner == "String"
            || crate::syntax::ident_in(owner, super::types::CONTAINERS))
}
