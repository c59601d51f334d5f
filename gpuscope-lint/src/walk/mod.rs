//! The walk over function bodies: [`Walker`] visits every function, method and closure body
//! in source order, keeps the [`Cx`] up to date (bindings and what they hold, enclosing
//! loops (`loops.rs`), `no_grad`, statics and their aliases, the impl's `Self`), applies the levels of
//! `#[gpuscope::lints::allow(..)]` / `#[gpu_scope(allow(..))]` attributes to the code under them,
//! and calls every registered [`Check`](crate::check::Check) on every expression and loop.
//!
//! Nesting deeper than [`MAX_DEPTH`] expressions is not walked (no finding comes from
//! there), so that the walk itself cannot overflow a thread's stack. `bind.rs` binds the
//! names the walk meets (patterns, and the places inside `&mut` parameters they reach).

use rustc_hash::FxHashSet;

use syn::visit::{self, Visit};
use syn::{Attribute, Block, Expr, FnArg, Pat, ReceiverKind, Stmt};

use crate::check::LoopBody;
use crate::context::{Callers, Cx, Deferred, FileCallsOf, FnState, NoGrad, Sink, span_range};
use crate::fn_facts::FnFacts;
use crate::infer::{Env, FileIndex, Types, Value};
use crate::rules::CHECKS;
use crate::syntax::{
    callee_name, callee_path, chain_root, expr_attrs, has_attr, ident_in, is_guard, pat_idents,
    path_names, strip,
};
use crate::{Finding, FnContext, Levels};

mod bind;
mod bounded;
mod calls;
mod levels;
mod loops;
mod macro_args;
mod switches;

use loops::element_of;

/// Expressions nested deeper than this are not walked.
pub(crate) const MAX_DEPTH: usize = 2_000;

/// Walks syntax trees, keeping a [`Cx`] and running the rules.
pub(crate) struct Walker<'i> {
    pub(crate) cx: Cx<'i>,
    pub(crate) sink: Sink,
    /// How deep the current expression is nested.
    depth: usize,
    /// How many impls or traits with type parameters enclose the code.
    generic_items: usize,
    /// The innermost impl around the code is an `impl Drop for ..`.
    drop_impl: bool,
    /// Walk only the functions that span one of these lines (1-based, ascending).
    pub(crate) only_lines: Option<&'i [usize]>,
}

impl<'i> Walker<'i> {
    pub(crate) fn new(index: &'i FileIndex, levels: &Levels) -> Self {
        Walker {
            cx: Cx {
                env: Env::new(Types::new(index, None)),
                f: FnState::default(),
                callers: Callers::new(calls::file_calls),
            },
            sink: Sink::new(levels),
            depth: 0,
            generic_items: 0,
            drop_impl: false,
            only_lines: None,
        }
    }

    /// Lets the rules follow the calls of `file`, the file walked (`walk/calls/`).
    pub(crate) fn in_file(&mut self, file: &'i syn::File) {
        self.cx.callers.file = Some(file);
    }

    pub(crate) fn finish(self) -> Vec<Finding> {
        self.sink.into_findings()
    }

    /// Lets the rules leave reads for the callers in the crate's other files to decide.
    pub(crate) fn in_package(&mut self) {
        self.cx.callers.package = true;
    }

    /// The findings, the findings left for the crate's other files, and what the file
    /// defines and calls.
    pub(crate) fn finish_package(self) -> (Vec<Finding>, Vec<Deferred>, FileCallsOf) {
        let index = self.cx.index();
        let calls = self.cx.callers.take_calls(index);
        let (findings, deferred) = self.sink.into_parts();
        (findings, deferred, calls)
    }

    /// Walks one function body with a fresh context; `ctx` is or-ed with the function's own
    /// `#[no_grad]` / `#[gpu_scope]` attributes, whose levels apply to the body. With
    /// [`only_lines`](Walker::only_lines), a function spanning none of them is skipped.
    pub(crate) fn walk_fn(
        &mut self,
        attrs: &[Attribute],
        sig: &syn::Signature,
        block: &Block,
        ctx: FnContext,
    ) {
        let Some(lines) = self.only_lines else {
            return self.walk_fn_body(attrs, sig, block, ctx);
        };
        let first = sig.fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        let spanned = lines.get(lines.partition_point(|&line| line < first));
        // Line 0: positions are unknown (a fuzzing build of proc-macro2).
        if first == 0 || spanned.is_some_and(|&line| line <= last) {
            self.walk_fn_body(attrs, sig, block, ctx);
        } else if cfg!(debug_assertions) {
            let before = self.sink.count();
            self.walk_fn_body(attrs, sig, block, ctx);
            assert_eq!(
                self.sink.count(),
                before,
                "a finding in `fn {}`, which holds no trigger word of the rules enabled: add the word it needs to its rule's `Check::triggers`",
                sig.ident
            );
        }
    }

    fn walk_fn_body(
        &mut self,
        attrs: &[Attribute],
        sig: &syn::Signature,
        block: &Block,
        ctx: FnContext,
    ) {
        self.with_levels(attrs, |w| {
            let no_grad = ctx.no_grad || has_attr(attrs, "no_grad");
            let facts = FnFacts::of(block);
            let fresh = FnState {
                body: block as *const Block as usize,
                scoped: ctx.scoped || has_attr(attrs, "gpu_scope"),
                no_grad: no_grad.then_some(NoGrad::Fn),
                kept: facts.kept,
                graph_used: facts.graph_used,
                raw_taken: facts.raw_taken,
                raw_casts: facts.raw_casts,
                returned: facts.returned,
                manually_drop_fields: facts.manually_drop_fields,
                manually_drop_lets: facts.manually_drop_lets,
                moved_out: facts.moved_out,
                main: sig.ident == "main" && sig.inputs.is_empty(),
                destructor: w.drop_impl && sig.ident == "drop",
                cpu_backend: w
                    .cx
                    .index()
                    .runs_on_a_cpu_backend(sig, block, w.generic_items > 0),
                ..FnState::default()
            };
            let saved_state = std::mem::replace(&mut w.cx.f, fresh);
            let saved_env = w.cx.env.enter_fn(facts.backwarded);
            for input in &sig.inputs {
                match input {
                    FnArg::Typed(arg) => {
                        pat_idents(&arg.pat, &mut |ident| {
                            w.cx.f.params.insert(ident.to_string());
                        });
                        w.bind_pat(&arg.pat, Some(&arg.ty), None);
                    }
                    FnArg::Receiver(r) => {
                        let mut value = match w.cx.env.types.self_ty().cloned() {
                            Some(ty) => w.cx.env.of_type(&ty),
                            None => Value::UNKNOWN,
                        };
                        value.borrowed = matches!(r.kind, ReceiverKind::Reference(..));
                        value.mutable = matches!(r.kind, ReceiverKind::Reference(_, _, Some(_)));
                        w.cx.f.params.insert("self".to_owned());
                        w.cx.env.bind("self".to_owned(), value);
                    }
                }
            }
            w.visit_block(block);
            w.cx.env.leave_fn(saved_env);
            w.cx.f = saved_state;
        });
    }

    /// Walks a loop: its pattern bound to `element` (`inputs`: the patterns of a
    /// `for_each` closure, bound by `walk`; `counters`: the names counting its iterations),
    /// the loop rules, then `walk`.
    fn with_no_grad(&mut self, no_grad: Option<NoGrad>, walk: impl FnOnce(&mut Self)) {
        let saved = std::mem::replace(&mut self.cx.f.no_grad, no_grad);
        walk(self);
        self.cx.f.no_grad = saved;
    }

    fn check_expr(&mut self, e: &Expr) {
        if self.sink.all_allowed() {
            return;
        }
        for (index, check) in CHECKS.iter().enumerate() {
            debug_assert_eq!(check.rule().name, crate::RULES[index].name);
            if self.sink.enabled_at(index) {
                check.expr(e, &self.cx, &mut self.sink);
            }
        }
    }

    /// Whether `local` takes a no-grad guard (`let _g = no_grad_guard();`,
    /// `let _g = GradModeGuard::no_grad();`).
    fn is_no_grad_guard(&self, local: &syn::Local) -> bool {
        let Some(init) = &local.init else {
            return false;
        };
        let mut e = strip(&init.expr);
        while let Expr::MethodCall(m) = e {
            if m.method == "unwrap" || m.method == "expect" {
                e = strip(&m.receiver);
            } else {
                break;
            }
        }
        let Expr::Call(call) = e else {
            return false;
        };
        callee_path(call).is_some_and(|p| self.cx.used().is_no_grad_guard(&path_names(p)))
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
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

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let saved = self.cx.env.types.set_self_ty(Some((*item.self_ty).clone()));
        let generic = usize::from(item.generics.type_params().next().is_some());
        let is_drop = item
            .trait_
            .as_ref()
            .and_then(|(path, _)| path.segments.last())
            .is_some_and(|s| s.ident == "Drop");
        let saved_drop = std::mem::replace(&mut self.drop_impl, is_drop);
        self.generic_items += generic;
        self.with_levels(&item.attrs, |w| visit::visit_item_impl(w, item));
        self.generic_items -= generic;
        self.drop_impl = saved_drop;
        self.cx.env.types.set_self_ty(saved);
    }

    fn visit_expr_if(&mut self, e: &'ast syn::ExprIf) {
        let (debug, gated) = switches::of_if(&e.cond, &self.cx.index().consts, &self.cx.f.switches);
        // A guard that never holds (`if index == -1 { .. }`) holds code that never runs.
        let debug = debug
            + usize::from(bounded::never_holds(
                &self.cx.f.loops,
                &self.cx.f.from_zero,
                &e.cond,
            ));
        self.cx.f.debugging += gated;
        self.visit_expr(&e.cond);
        self.cx.f.debugging -= gated;
        let bounded = bounded::bounded_loops(&self.cx, &e.cond);
        for &i in &bounded {
            self.cx.f.loops[i].bounded += 1;
        }
        self.cx.f.debugging += debug;
        self.visit_block(&e.then_branch);
        self.cx.f.debugging -= debug;
        for &i in &bounded {
            self.cx.f.loops[i].bounded -= 1;
        }
        if let Some((_, other)) = &e.else_branch {
            self.visit_expr(other);
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Some(args) = macro_args::of(mac) {
            self.cx.f.debugging += usize::from(args.debug);
            args.exprs.iter().for_each(|e| self.visit_expr(e));
            self.cx.f.debugging -= usize::from(args.debug);
        }
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        let saved = self.cx.env.types.set_self_ty(None);
        // A trait's default methods are generic over `Self`.
        self.generic_items += 1;
        self.with_levels(&item.attrs, |w| visit::visit_item_trait(w, item));
        self.generic_items -= 1;
        self.cx.env.types.set_self_ty(saved);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.with_levels(&item.attrs, |w| visit::visit_item_mod(w, item));
    }

    fn visit_file(&mut self, file: &'ast syn::File) {
        self.with_levels(&file.attrs, |w| visit::visit_file(w, file));
    }

    fn visit_stmt(&mut self, stmt: &'ast Stmt) {
        match stmt {
            Stmt::Local(local) => {
                self.with_levels(&local.attrs, |w| w.visit_local(local));
            }
            Stmt::Macro(mac) => {
                self.with_levels(&mac.attrs, |w| visit::visit_stmt_macro(w, mac));
            }
            _ => visit::visit_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        self.depth += 1;
        let attrs = expr_attrs(e);
        if attrs.is_empty() {
            self.check_expr(e);
            visit::visit_expr(self, e);
        } else {
            self.with_levels(attrs, |w| {
                w.check_expr(e);
                visit::visit_expr(w, e);
            });
        }
        self.depth -= 1;
    }

    fn visit_block(&mut self, block: &'ast Block) {
        let saved = self.cx.f.no_grad;
        // A block that `break`s out of the innermost loop runs once per run of it.
        let once = bounded::breaks_out(block);
        if let Some(frame) = self.cx.f.loops.last_mut().filter(|_| once) {
            frame.bounded += 1;
        }
        // After `if !DEBUG { return; }` the rest of the block runs only while debugging.
        let mut leaves = 0;
        for stmt in &block.stmts {
            self.visit_stmt(stmt);
            if let Stmt::Local(local) = stmt {
                if self.cx.f.no_grad.is_none() && self.is_no_grad_guard(local) {
                    self.cx.f.no_grad = Some(NoGrad::Guard);
                }
            }
            if switches::leaves_unless(stmt, &self.cx.index().consts, &self.cx.f.switches) {
                self.cx.f.debugging += 1;
                leaves += 1;
            }
        }
        self.cx.f.debugging -= leaves;
        if let Some(frame) = self.cx.f.loops.last_mut().filter(|_| once) {
            frame.bounded -= 1;
        }
        self.cx.f.no_grad = saved;
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
        if let Some(init) = init {
            self.note_param_places(&local.pat, &init.expr);
        }
        // `let debug = std::env::var_os("X_DEBUG").is_some();`: `debug` is a debug switch.
        let consts = &self.cx.index().consts;
        switches::bind(
            &mut self.cx.f.switches,
            &local.pat,
            init.map(|i| &*i.expr),
            consts,
        );
        bounded::bind_from_zero(&mut self.cx.f.from_zero, &local.pat, init.map(|i| &*i.expr));
        // `let mut guard = CACHE.lock().unwrap();`: `guard` now refers into the static.
        let pat = match &local.pat {
            Pat::Type(t) => &*t.pat,
            pat => pat,
        };
        // `let f = |t: &Tensor| t.add(t);`: a call `f(x)` returns what the body does (its
        // inputs were bound when the closure was walked).
        if let (Some(init), Pat::Ident(p)) = (init, pat) {
            if let Expr::Closure(closure) = strip(&init.expr) {
                let returns = self.cx.env.infer(&closure.body);
                self.cx.env.bind_closure(p.ident.to_string(), returns);
            }
        }
        if let (Some(init), Pat::Ident(p)) = (init, pat) {
            if is_guard(&init.expr) {
                if let Some((target, _)) = self.cx.static_target(chain_root(&init.expr)) {
                    self.cx.f.aliases.push((p.ident.to_string(), target));
                }
            }
        }
    }

    fn visit_expr_let(&mut self, e: &'ast syn::ExprLet) {
        self.visit_expr(&e.expr);
        let value = element_of(self.cx.env.infer(&e.expr));
        self.bind_pat_value(&e.pat, None, None, value);
        self.note_param_places(&e.pat, &e.expr);
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        self.bind_pat_value(&arm.pat, None, None, Value::UNKNOWN);
        if let Pat::Guard(guarded) = &arm.pat {
            self.visit_expr(&guarded.guard);
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
        self.walk_for(e);
    }

    fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
        self.walk_while(e);
    }

    fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
        self.walk_plain_loop(e);
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        self.visit_expr(&call.func);
        // `no_grad(|| ..)` turns gradients off in the closure; `enable_grad(|| ..)` back on.
        let mode = match callee_name(call) {
            Some(name) if self.cx.used().is_no_grad_closure(&name.to_string()) => {
                Some(Some(NoGrad::Closure))
            }
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
        let method = &call.method;
        let static_target = if ident_in(method, &["with", "with_borrow_mut", "with_borrow"]) {
            self.cx
                .static_target(chain_root(&call.receiver))
                .map(|(name, _)| name)
        } else {
            None
        };
        for arg in &call.args {
            let Expr::Closure(closure) = strip(arg) else {
                self.visit_expr(arg);
                continue;
            };
            if method == "for_each" || method == "try_for_each" {
                // The closure is the body of a loop over the receiver's elements.
                self.check_expr(arg);
                let element = element_of(self.cx.env.infer(&call.receiver));
                let head = span_range(&call.method);
                let inputs: Vec<&Pat> = closure.inputs.iter().collect();
                let body = LoopBody::Expr(&closure.body);
                self.walk_loop(head, None, &inputs, body, FxHashSet::default(), |w| {
                    for input in &closure.inputs {
                        w.bind_pat_value(input, None, None, element.clone());
                    }
                    w.visit_expr(&closure.body);
                });
            } else if let Some(target) = &static_target {
                // `X.with(|cell| ..)`: `cell` is the static's contents.
                let before = self.cx.f.aliases.len();
                self.check_expr(arg);
                for input in &closure.inputs {
                    self.bind_pat(input, None, None);
                    pat_idents(input, &mut |ident| {
                        self.cx.f.aliases.push((ident.to_string(), target.clone()))
                    });
                }
                self.visit_expr(&closure.body);
                self.cx.f.aliases.truncate(before);
            } else {
                self.visit_expr(arg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_is_not_walked_past_the_limit() {
        let depth = MAX_DEPTH + 50;
        let src = format!(
            "fn f(t: Tensor) {{ let x = {}std::mem::forget(t){}; }}",
            "(".repeat(depth),
            ")".repeat(depth)
        );
        let found = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || {
                let file = syn::parse_file(&src).unwrap();
                let found = crate::lint_file(&file, &Levels::default()).len();
                drop(file);
                found
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(found, 0);
    }
}
