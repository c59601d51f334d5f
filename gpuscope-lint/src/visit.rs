//! The walk over function bodies and the context the rules see while it runs.
//!
//! [`Walker`] visits every function, method and closure body in source order, keeping a
//! [`State`]: whether the code is under `no_grad` (a `#[no_grad]` function, a closure passed
//! to `no_grad(..)`, or the rest of a block after `let _g = no_grad_guard();`), which loops
//! enclose it and which names each loop body binds, what each binding holds (loss or detached
//! number, see [`crate::loss`]), and which bindings alias a `static` (`X.with(|c| ..)`,
//! `let g = X.lock().unwrap()`). It calls [`rules::check_expr`] on every expression and
//! [`rules::check_loop`] on every loop; the rules report through a [`Sink`], which drops
//! findings of rules set to `allow`.
//!
//! [`FileInfo`] is gathered first: the `static`s (including `thread_local!` and
//! `lazy_static!` ones) and `const`s declared anywhere in the file, so that `CACHE.set(t)`
//! can be told apart from a constant or a local.

use std::collections::{HashMap, HashSet};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Block, Expr, FnArg, Pat, Stmt, Type};

use crate::loss::{Class, classify_binding, is_loss_name};
use crate::rules::{self, Loop, LoopBody};
use crate::syntax::{
    callee_name, callee_path, chain_root, has_attr, ident_of, is_plain_type, is_screaming_case,
    may_hold_tensor, pat_idents, path_ends_with, strip,
};
use crate::{Finding, FnContext, Level, Levels, Rule};

/// What a file declares that the rules need to know about names.
#[derive(Debug, Default)]
pub(crate) struct FileInfo {
    /// `static` names, each with whether its type could hold a tensor ([`may_hold_tensor`]).
    statics: HashMap<String, bool>,
    /// `const` names: SCREAMING_CASE like statics, but a fresh value at every use.
    consts: HashSet<String>,
    /// Whether the file has `use std::mem::forget` (or `core::mem::forget`), making a bare
    /// `forget(x)` mean `mem::forget`.
    pub(crate) forget_imported: bool,
}

impl FileInfo {
    /// What the whole file declares.
    pub(crate) fn of_file(file: &syn::File) -> Self {
        let mut info = FileInfo::default();
        info.visit_file(file);
        info
    }

    /// What a function body declares (statics and consts in nested items).
    pub(crate) fn of_block(block: &Block) -> Self {
        let mut info = FileInfo::default();
        info.visit_block(block);
        info
    }

    fn add_static(&mut self, name: String, ty: Option<&Type>) {
        self.statics.insert(name, ty.is_none_or(may_hold_tensor));
    }

    /// Reads `static [ref] [mut] NAME: Type = ..;` declarations out of a `thread_local!` or
    /// `lazy_static!` body.
    fn add_macro_statics(&mut self, tokens: TokenStream) {
        let mut tokens = tokens.into_iter().peekable();
        while let Some(token) = tokens.next() {
            let TokenTree::Ident(ident) = &token else {
                continue;
            };
            if ident != "static" {
                continue;
            }
            let mut name = None;
            for token in tokens.by_ref() {
                match token {
                    TokenTree::Ident(i) if i == "ref" || i == "mut" => {}
                    TokenTree::Ident(i) => {
                        name = Some(i.to_string());
                        break;
                    }
                    _ => break,
                }
            }
            let Some(name) = name else { continue };
            if !matches!(tokens.next(), Some(TokenTree::Punct(p)) if p.as_char() == ':') {
                continue;
            }
            let mut ty = TokenStream::new();
            while let Some(token) = tokens.peek() {
                if matches!(token, TokenTree::Punct(p) if p.as_char() == '=' || p.as_char() == ';')
                {
                    break;
                }
                ty.extend(tokens.next());
            }
            let ty = syn::parse2::<Type>(ty).ok();
            self.add_static(name, ty.as_ref());
        }
    }
}

impl<'ast> Visit<'ast> for FileInfo {
    fn visit_item_static(&mut self, item: &'ast syn::ItemStatic) {
        self.add_static(item.ident.to_string(), Some(&item.ty));
        visit::visit_item_static(self, item);
    }

    fn visit_item_const(&mut self, item: &'ast syn::ItemConst) {
        self.consts.insert(item.ident.to_string());
        visit::visit_item_const(self, item);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let is = |name: &str| mac.path.segments.last().is_some_and(|s| s.ident == name);
        if is("thread_local") || is("lazy_static") {
            self.add_macro_statics(mac.tokens.clone());
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        fn imports_forget(tree: &syn::UseTree, after_mem: bool) -> bool {
            match tree {
                syn::UseTree::Path(p) => imports_forget(&p.tree, p.ident == "mem"),
                syn::UseTree::Name(n) => after_mem && n.ident == "forget",
                syn::UseTree::Group(g) => g.items.iter().any(|t| imports_forget(t, after_mem)),
                syn::UseTree::Glob(_) => after_mem,
                syn::UseTree::Rename(_) => false,
            }
        }
        self.forget_imported |= imports_forget(&item.tree, false);
    }
}

/// Where a function body's `no_grad` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoGrad {
    /// The function is `#[no_grad]`.
    Fn,
    /// The code is in a closure passed to `no_grad(..)`.
    Closure,
    /// The code follows `let _guard = no_grad_guard();` in its block.
    Guard,
}

/// The context of the function being walked.
#[derive(Debug, Default)]
pub(crate) struct FnState {
    /// The function is `#[gpu_scope]`.
    pub(crate) scoped: bool,
    /// Whether, and why, gradients are off here.
    pub(crate) no_grad: Option<NoGrad>,
    /// The enclosing loops, innermost last: the names bound in each loop's body so far.
    loops: Vec<HashSet<String>>,
    /// The latest class of each binding.
    bindings: HashMap<String, Class>,
    /// Names `.backward()` is called on somewhere in the function.
    backwarded: HashSet<String>,
    /// Bindings that refer to a static's contents, with the static's name.
    aliases: Vec<(String, String)>,
}

/// What the rules can ask about the code around the expression they check.
#[derive(Debug)]
pub(crate) struct State<'f> {
    pub(crate) file: &'f FileInfo,
    pub(crate) f: FnState,
}

impl State<'_> {
    /// How many loops enclose the code (`for`, `while`, `loop`, and `.for_each(|..| ..)` bodies).
    pub(crate) fn loop_depth(&self) -> usize {
        self.f.loops.len()
    }

    pub(crate) fn in_loop(&self) -> bool {
        !self.f.loops.is_empty()
    }

    /// Whether `name` is bound inside the innermost loop's body, so that it starts afresh at
    /// every iteration.
    pub(crate) fn is_loop_local(&self, name: &str) -> bool {
        self.f
            .loops
            .last()
            .is_some_and(|names| names.contains(name))
    }

    /// What the binding `name` holds (`Unknown` for names not bound in this function, unless
    /// the name says loss).
    pub(crate) fn binding_class(&self, name: &str) -> Class {
        match self.f.bindings.get(name) {
            Some(Class::Detached) => Class::Detached,
            Some(Class::Loss) => Class::Loss,
            Some(Class::Unknown) if self.f.backwarded.contains(name) => Class::Loss,
            Some(Class::Unknown) => Class::Unknown,
            None if self.f.backwarded.contains(name) || is_loss_name(name) => Class::Loss,
            None => Class::Unknown,
        }
    }

    /// When `root` (the root of a method chain or place) names a static that could hold a
    /// tensor, or a binding aliasing one, the static's name. A static is one declared in the
    /// file with a non-plain type, or an undeclared SCREAMING_CASE path that is not a `const`.
    pub(crate) fn static_name(&self, root: &Expr) -> Option<String> {
        let Expr::Path(p) = strip(root) else {
            return None;
        };
        if p.qself.is_some() {
            return None;
        }
        let name = p.path.segments.last()?.ident.to_string();
        if p.path.segments.len() == 1 {
            if let Some((_, target)) = self
                .f
                .aliases
                .iter()
                .rev()
                .find(|(alias, _)| *alias == name)
            {
                return Some(target.clone());
            }
            if self.f.bindings.contains_key(&name) {
                return None;
            }
        }
        match self.file.statics.get(&name) {
            Some(true) => Some(name),
            Some(false) => None,
            None if self.file.consts.contains(&name) => None,
            None => is_screaming_case(&name).then_some(name),
        }
    }
}

/// Collects findings, dropping those of rules at `allow`.
#[derive(Debug)]
pub(crate) struct Sink<'l> {
    levels: &'l Levels,
    findings: Vec<Finding>,
}

impl<'l> Sink<'l> {
    pub(crate) fn new(levels: &'l Levels) -> Self {
        Sink {
            levels,
            findings: Vec::new(),
        }
    }

    /// Whether `rule` is on (not `allow`): rules with costly checks ask first.
    pub(crate) fn enabled(&self, rule: &Rule) -> bool {
        self.levels.of(rule) != Level::Allow
    }

    /// Reports `rule` at `span`, unless the rule is at `allow`.
    pub(crate) fn emit(&mut self, rule: &Rule, span: Span, message: String, help: String) {
        let level = self.levels.of(rule);
        if level != Level::Allow {
            self.findings.push(Finding {
                rule: rule.name,
                level,
                span,
                message,
                help,
            });
        }
    }

    /// The findings, ordered by source position (stable: equal positions keep visiting order).
    pub(crate) fn into_findings(self) -> Vec<Finding> {
        let mut findings = self.findings;
        findings.sort_by_key(|f| {
            let start = f.span.start();
            (start.line, start.column)
        });
        findings
    }
}

/// Walks syntax trees, keeping [`State`] and running the rules.
pub(crate) struct Walker<'f, 'l> {
    pub(crate) st: State<'f>,
    pub(crate) sink: Sink<'l>,
}

impl<'f, 'l> Walker<'f, 'l> {
    pub(crate) fn new(file: &'f FileInfo, levels: &'l Levels) -> Self {
        Walker {
            st: State {
                file,
                f: FnState::default(),
            },
            sink: Sink::new(levels),
        }
    }

    /// Walks one function body with a fresh context; `ctx` is or-ed with the function's own
    /// `#[no_grad]` / `#[gpu_scope]` attributes.
    pub(crate) fn walk_fn(
        &mut self,
        attrs: &[syn::Attribute],
        sig: &syn::Signature,
        block: &Block,
        ctx: FnContext,
    ) {
        let no_grad = ctx.no_grad || has_attr(attrs, "no_grad");
        let fresh = FnState {
            scoped: ctx.scoped || has_attr(attrs, "gpu_scope"),
            no_grad: no_grad.then_some(NoGrad::Fn),
            backwarded: backwarded_names(block),
            ..FnState::default()
        };
        let saved = std::mem::replace(&mut self.st.f, fresh);
        for input in &sig.inputs {
            if let FnArg::Typed(arg) = input {
                self.bind_pat(&arg.pat, Some(&arg.ty), None);
            }
        }
        self.visit_block(block);
        self.st.f = saved;
    }

    /// Binds the names of `pat`, classifying each; names bound inside a loop body are
    /// recorded as that loop's. Tuple patterns are matched element by element against tuple
    /// types and tuple initializers: `let (mut sum, mut n) = (0.0, 0);`.
    fn bind_pat(&mut self, pat: &Pat, ty: Option<&Type>, init: Option<&Expr>) {
        let (pat, ty) = match pat {
            Pat::Type(t) => (&*t.pat, Some(&*t.ty)),
            _ => (pat, ty),
        };
        match pat {
            Pat::Ident(p) if p.subpat.is_none() => {
                let class = classify_binding(&p.ident.to_string(), ty, init, &self.st);
                self.bind(p.ident.to_string(), class);
            }
            Pat::Tuple(tuple) => {
                let types = match ty {
                    Some(Type::Tuple(t)) if t.elems.len() == tuple.elems.len() => Some(&t.elems),
                    _ => None,
                };
                let inits = match init.map(strip) {
                    Some(Expr::Tuple(t)) if t.elems.len() == tuple.elems.len() => Some(&t.elems),
                    _ => None,
                };
                for (i, elem) in tuple.elems.iter().enumerate() {
                    self.bind_pat(elem, types.map(|t| &t[i]), inits.map(|e| &e[i]));
                }
            }
            _ => {
                let plain = ty.filter(|t| is_plain_type(t));
                let mut names = Vec::new();
                pat_idents(pat, &mut |ident| names.push(ident.to_string()));
                for name in names {
                    let class = classify_binding(&name, plain, None, &self.st);
                    self.bind(name, class);
                }
            }
        }
    }

    fn bind(&mut self, name: String, class: Class) {
        self.st.f.aliases.retain(|(alias, _)| *alias != name);
        if let Some(names) = self.st.f.loops.last_mut() {
            names.insert(name.clone());
        }
        self.st.f.bindings.insert(name, class);
    }

    fn walk_loop(
        &mut self,
        span: Span,
        pat: Option<&Pat>,
        body: LoopBody<'_>,
        walk: impl FnOnce(&mut Self),
    ) {
        self.st.f.loops.push(HashSet::new());
        if let Some(pat) = pat {
            self.bind_pat(pat, None, None);
        }
        rules::check_loop(&Loop { span, body }, &self.st, &mut self.sink);
        walk(self);
        self.st.f.loops.pop();
    }

    fn with_no_grad(&mut self, no_grad: Option<NoGrad>, walk: impl FnOnce(&mut Self)) {
        let saved = std::mem::replace(&mut self.st.f.no_grad, no_grad);
        walk(self);
        self.st.f.no_grad = saved;
    }

    pub(crate) fn finish(self) -> Vec<Finding> {
        self.sink.into_findings()
    }
}

/// Whether `let` statement `local` takes a no-grad guard (`let _g = no_grad_guard();`,
/// `let _g = NoGradGuard::new();`).
fn is_no_grad_guard(local: &syn::Local) -> bool {
    let Some(init) = &local.init else {
        return false;
    };
    let Expr::Call(call) = strip(&init.expr) else {
        return false;
    };
    callee_name(call).is_some_and(|name| name == "no_grad_guard")
        || callee_path(call).is_some_and(|p| p.segments.iter().any(|s| s.ident == "NoGradGuard"))
}

/// Whether `e` takes a lock or mutable borrow, maybe unwrapped: `X.lock().unwrap()`,
/// `X.borrow_mut()`, `X.write().await`.
fn is_guard(e: &Expr) -> bool {
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

/// Span from the start of `a` to the end of `b`, or `a` where spans cannot be joined.
fn join(a: Span, b: Span) -> Span {
    a.join(b).unwrap_or(a)
}

impl<'ast> Visit<'ast> for Walker<'_, '_> {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.walk_fn(&item.attrs, &item.sig, &item.block, FnContext::default());
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.walk_fn(&item.attrs, &item.sig, &item.block, FnContext::default());
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(block) = &item.default {
            self.walk_fn(&item.attrs, &item.sig, block, FnContext::default());
        }
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        rules::check_expr(e, &self.st, &mut self.sink);
        visit::visit_expr(self, e);
    }

    fn visit_block(&mut self, block: &'ast Block) {
        let saved = self.st.f.no_grad;
        for stmt in &block.stmts {
            self.visit_stmt(stmt);
            if let Stmt::Local(local) = stmt {
                if self.st.f.no_grad.is_none() && is_no_grad_guard(local) {
                    self.st.f.no_grad = Some(NoGrad::Guard);
                }
            }
        }
        self.st.f.no_grad = saved;
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        let init = local.init.as_ref();
        if let Some(init) = init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        self.bind_pat(&local.pat, None, init.map(|i| &*i.expr));
        // `let mut guard = CACHE.lock().unwrap();`: `guard` now refers into the static.
        if let (Some(init), Pat::Ident(p)) = (init, &local.pat) {
            if is_guard(&init.expr) {
                if let Some(target) = self.st.static_name(chain_root(&init.expr)) {
                    self.st.f.aliases.push((p.ident.to_string(), target));
                }
            }
        }
    }

    fn visit_expr_let(&mut self, e: &'ast syn::ExprLet) {
        self.visit_expr(&e.expr);
        self.bind_pat(&e.pat, None, None);
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        self.bind_pat(&arm.pat, None, None);
        if let Some((_, guard)) = &arm.guard {
            self.visit_expr(guard);
        }
        self.visit_expr(&arm.body);
    }

    fn visit_expr_closure(&mut self, closure: &'ast syn::ExprClosure) {
        for input in &closure.inputs {
            self.bind_pat(input, None, None);
        }
        self.visit_expr(&closure.body);
    }

    fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
        // The iterator is evaluated once, before the loop.
        self.visit_expr(&e.expr);
        let span = join(e.for_token.span, e.expr.span());
        self.walk_loop(span, Some(&e.pat), LoopBody::Block(&e.body), |w| {
            w.visit_block(&e.body)
        });
    }

    fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
        let span = join(e.while_token.span, e.cond.span());
        self.walk_loop(span, None, LoopBody::Block(&e.body), |w| {
            w.visit_expr(&e.cond);
            w.visit_block(&e.body);
        });
    }

    fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
        self.walk_loop(e.loop_token.span, None, LoopBody::Block(&e.body), |w| {
            w.visit_block(&e.body)
        });
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        self.visit_expr(&call.func);
        // `no_grad(|| ..)` turns gradients off in the closure; `enable_grad(|| ..)` back on.
        let mode = match callee_name(call) {
            Some(name) if name == "no_grad" => Some(Some(NoGrad::Closure)),
            Some(name) if name == "enable_grad" || name == "with_grad" => Some(None),
            _ => None,
        };
        for arg in &call.args {
            match mode {
                Some(no_grad) if matches!(strip(arg), Expr::Closure(_)) => {
                    self.with_no_grad(no_grad, |w| w.visit_expr(arg));
                }
                _ => self.visit_expr(arg),
            }
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        self.visit_expr(&call.receiver);
        let method = call.method.to_string();
        let static_target = match method.as_str() {
            "with" | "with_borrow_mut" | "with_borrow" => {
                self.st.static_name(chain_root(&call.receiver))
            }
            _ => None,
        };
        for arg in &call.args {
            let Expr::Closure(closure) = strip(arg) else {
                self.visit_expr(arg);
                continue;
            };
            if method == "for_each" || method == "try_for_each" {
                // The closure is the body of a loop.
                rules::check_expr(arg, &self.st, &mut self.sink);
                self.walk_loop(
                    call.method.span(),
                    None,
                    LoopBody::Expr(&closure.body),
                    |w| {
                        w.visit_expr_closure(closure);
                    },
                );
            } else if let Some(target) = &static_target {
                // `X.with(|cell| ..)`: `cell` is the static's contents.
                let before = self.st.f.aliases.len();
                rules::check_expr(arg, &self.st, &mut self.sink);
                for input in &closure.inputs {
                    self.bind_pat(input, None, None);
                    pat_idents(input, &mut |ident| {
                        self.st.f.aliases.push((ident.to_string(), target.clone()))
                    });
                }
                self.visit_expr(&closure.body);
                self.st.f.aliases.truncate(before);
            } else {
                self.visit_expr(arg);
            }
        }
    }
}

/// The names `.backward()` is called on in `block` (not counting nested functions).
fn backwarded_names(block: &Block) -> HashSet<String> {
    struct Backwarded(HashSet<String>);
    impl<'ast> Visit<'ast> for Backwarded {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            if call.method == "backward" {
                if let Some(ident) = ident_of(&call.receiver) {
                    self.0.insert(ident.to_string());
                }
            }
            visit::visit_expr_method_call(self, call);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut names = Backwarded(HashSet::new());
    names.visit_block(block);
    names.0
}

/// Whether `path` is `mem::forget`-like for this file.
pub(crate) fn is_forget_path(path: &syn::Path, file: &FileInfo) -> bool {
    path_ends_with(path, &["mem", "forget"]) || (file.forget_imported && path.is_ident("forget"))
}
