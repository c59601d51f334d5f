//! Facts about a function body gathered before it is walked ([`FnFacts`]: the names
//! `.backward()` is called on, given to `keep`, used as a graph, whose raw pointer is taken,
//! and the expressions turned into raw pointers), and whether a loop body trains
//! ([`trains`]).

use rustc_hash::{FxHashMap, FxHashSet};

use syn::visit::{self, Visit};
use syn::{Block, Expr, Type};

use crate::syntax::{
    callee_name, callee_path, chain_root, ident_of, insert_ident, is_compound_assign,
    manually_drop_release, path_ends_with, place_and_field, ptr_read, rebuilt_from_raw, same_place,
    strip, takes_raw_handle, with_text,
};

/// Whether a loop body runs a training step: calls `backward`, `backward_step`,
/// `run_backward`, ... (an optimizer step alone is not enough: `model.step(token)` is also
/// a recurrent cell's).
///
/// `element` holds the names the loop's pattern binds. A loop whose optimizer steps are all
/// taken through its element (`critic.optimizer_mut().backward_step(&loss)`,
/// `agent.opt.step()` in `for critic in &mut critics`) trains each element's own model in
/// turn: it runs once per model, not once per batch, and is not a training loop here.
pub(crate) fn trains(block: &Block, element: &FxHashSet<String>) -> bool {
    let mut scan = Trains::new(element);
    scan.visit_block(block);
    scan.trains()
}

pub(crate) fn trains_expr(e: &Expr, element: &FxHashSet<String>) -> bool {
    let mut scan = Trains::new(element);
    scan.visit_expr(e);
    scan.trains()
}

struct Trains<'e> {
    /// Names bound by the loop's pattern.
    element: &'e FxHashSet<String>,
    /// A backward call was seen.
    found: bool,
    /// An optimizer step was taken through the loop's element.
    element_step: bool,
    /// An optimizer step was taken through something else.
    other_step: bool,
}

impl<'e> Trains<'e> {
    fn new(element: &'e FxHashSet<String>) -> Self {
        Trains {
            element,
            found: false,
            element_step: false,
            other_step: false,
        }
    }

    /// A backward call, unless every optimizer step went through the loop's element.
    fn trains(&self) -> bool {
        let per_element = self.element_step && !self.other_step;
        self.found && !per_element
    }

    fn name(&mut self, name: &str) {
        if name.starts_with("backward") || name.ends_with("_backward") {
            self.found = true;
        }
    }

    /// Notes an optimizer step (`opt.step()`, `opt.backward_step(&loss)`): whether it is
    /// taken through the loop's element (`x.opt.step()`, `x.optimizer_mut().backward_step(&l)`,
    /// `x.backward_step(&l)` with `x` bound by the loop's pattern) or not.
    /// burn's `optim.step(lr, module, grads)` is taken through the element when its module
    /// is (`agent.optim.step(lr, agent.model.clone(), grads)`, `optim.step(lr, model, g)`
    /// with `model` bound by the loop's pattern).
    fn step(&mut self, call: &syn::ExprMethodCall, method: &str) {
        let burn_step = method == "step" && call.args.len() == 3;
        let step = (method == "step" && call.args.is_empty())
            || burn_step
            || (method.starts_with("backward_step") && !call.args.is_empty());
        if !step {
            return;
        }
        let bare = ident_of(&call.receiver).is_some() && !burn_step;
        let of_element = |e: &Expr| {
            ident_of(chain_root(e)).is_some_and(|root| self.element.contains(&root.to_string()))
        };
        let through_element =
            of_element(&call.receiver) || (burn_step && of_element(&call.args[1]));
        // `x.step()` on the element itself may be a recurrent cell's step, not an optimizer's.
        if through_element && !(bare && method == "step") {
            self.element_step = true;
        } else if !through_element {
            self.other_step = true;
        }
    }
}

impl<'ast> Visit<'ast> for Trains<'_> {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        with_text(&call.method, |method| {
            self.name(method);
            self.step(call, method);
        });
        visit::visit_expr_method_call(self, call);
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let Some(name) = callee_name(call) {
            with_text(name, |name| self.name(name));
        }
        visit::visit_expr_call(self, call);
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// Facts about a function body gathered before it is walked.
pub(crate) struct FnFacts {
    /// Names `.backward()` is called on.
    pub(crate) backwarded: FxHashSet<String>,
    /// Names given to `keep(&x)`.
    pub(crate) kept: FxHashSet<String>,
    /// Names used as a graph (see [`FnState::graph_used`](crate::context::FnState::graph_used)).
    pub(crate) graph_used: FxHashSet<String>,
    /// Names whose raw pointer or handle is taken, or that a `let` binds to a value rebuilt
    /// from one (`dev.upgrade_device_ptr(p, n)`, `ptr::read(p)`): what they hold is handed
    /// over or borrowed, not owned by the function.
    pub(crate) raw_taken: FxHashSet<String>,
    /// Addresses of expressions turned into raw pointers (`x as *mut T`, `NonNull::from(x)`).
    pub(crate) raw_casts: FxHashSet<usize>,
    /// Addresses of the expressions whose value the function returns: its tail expression
    /// and the operands of `return`, through `Ok(..)`, `Some(..)`, `Err(..)`, blocks, `if`
    /// and `match` arms.
    pub(crate) returned: FxHashSet<usize>,
    /// Addresses of the `ManuallyDrop::new(..)` calls that initialize a field of a struct
    /// literal, with the struct's name (as written: `Self` too) and the field's.
    pub(crate) manually_drop_fields: FxHashMap<usize, (String, String)>,
    /// Addresses of the `ManuallyDrop::new(..)` calls bound by a `let`, with the binding.
    pub(crate) manually_drop_lets: FxHashMap<usize, String>,
    /// What the function moves back out of a binding or drops in place:
    /// `ManuallyDrop::take(&mut x)`, `ManuallyDrop::drop(&mut x)`, `ManuallyDrop::into_inner(x)`
    /// and `ptr::read(&x)` give `None` (the whole), `ptr::read(&x.f)` gives `Some("f")`.
    pub(crate) moved_out: FxHashMap<String, FxHashSet<Option<String>>>,
}

/// Whether `e` is a `ManuallyDrop::new(..)` call.
fn is_manually_drop_new(e: &Expr) -> bool {
    matches!(e, Expr::Call(call) if callee_path(call).is_some_and(|p| path_ends_with(p, &["ManuallyDrop", "new"])))
}

/// Methods that add their argument into their receiver.
const ACCUMULATING: &[&str] = &[
    "push",
    "push_back",
    "push_front",
    "extend",
    "append",
    "insert",
    "add_assign",
];

/// Methods that read a value without passing its graph on.
const READS: &[&str] = &[
    "len",
    "is_empty",
    "item",
    "to_scalar",
    "into_scalar",
    "to_vec",
    "to_vec0",
    "to_vec1",
    "double_value",
    "capacity",
    "clear",
    "shape",
    "dims",
    "size",
];

impl FnFacts {
    pub(crate) fn of(block: &Block) -> Self {
        let mut facts = FnFacts {
            backwarded: FxHashSet::default(),
            kept: FxHashSet::default(),
            graph_used: FxHashSet::default(),
            raw_taken: FxHashSet::default(),
            raw_casts: FxHashSet::default(),
            returned: FxHashSet::default(),
            manually_drop_fields: FxHashMap::default(),
            manually_drop_lets: FxHashMap::default(),
            moved_out: FxHashMap::default(),
        };
        facts.returned_tail(block);
        facts.visit_block(block);
        facts
    }

    /// Marks the value `block` evaluates to as returned.
    fn returned_tail(&mut self, block: &Block) {
        if let Some(syn::Stmt::Expr(e, None)) = block.stmts.last() {
            self.returned_expr(e);
        }
    }

    /// Marks `e` (and what it is made of, when it only wraps or chooses a value) as
    /// returned.
    fn returned_expr(&mut self, e: &Expr) {
        let e = strip(e);
        self.returned.insert(std::ptr::from_ref(e) as usize);
        match e {
            Expr::Call(call)
                if callee_path(call).is_some_and(|p| {
                    p.segments
                        .last()
                        .is_some_and(|s| s.ident == "Ok" || s.ident == "Some" || s.ident == "Err")
                }) =>
            {
                call.args.iter().for_each(|arg| self.returned_expr(arg));
            }
            Expr::Block(b) => self.returned_tail(&b.block),
            Expr::Unsafe(u) => self.returned_tail(&u.block),
            Expr::If(i) => {
                self.returned_tail(&i.then_branch);
                if let Some((_, other)) = &i.else_branch {
                    self.returned_expr(other);
                }
            }
            Expr::Match(m) => m.arms.iter().for_each(|arm| self.returned_expr(&arm.body)),
            _ => {}
        }
    }

    fn use_of(&mut self, e: &Expr) {
        if let Some(ident) = ident_of(e) {
            insert_ident(&mut self.graph_used, ident);
        }
    }
}

impl<'ast> Visit<'ast> for FnFacts {
    fn visit_expr(&mut self, e: &'ast Expr) {
        if let Some(ident) = takes_raw_handle(e) {
            self.raw_taken.insert(ident.to_string());
        }
        if let Expr::Return(r) = e {
            if let Some(value) = &r.expr {
                self.returned_expr(value);
            }
        }
        match e {
            Expr::Cast(c) if matches!(&*c.ty, Type::Ptr(_)) => {
                self.raw_casts
                    .insert(std::ptr::from_ref(strip(&c.expr)) as usize);
            }
            Expr::MethodCall(m) if m.method == "cast" || m.method == "cast_mut" => {
                self.raw_casts
                    .insert(std::ptr::from_ref(strip(&m.receiver)) as usize);
            }
            Expr::Call(call)
                if callee_path(call).is_some_and(|p| {
                    p.segments.len() >= 2
                        && ["NonNull", "ptr"]
                            .iter()
                            .any(|t| p.segments[p.segments.len() - 2].ident == t)
                }) =>
            {
                if let Some(arg) = call.args.first() {
                    self.raw_casts
                        .insert(std::ptr::from_ref(strip(arg)) as usize);
                }
            }
            _ => {}
        }
        match e {
            Expr::MethodCall(call) => {
                if call.method == "backward" {
                    if let Some(ident) = ident_of(&call.receiver) {
                        self.backwarded.insert(ident.to_string());
                    }
                }
                let direct = ident_of(&call.receiver).is_some();
                if direct
                    && with_text(&call.method, |m| {
                        ACCUMULATING.contains(&m) || READS.contains(&m)
                    })
                {
                    // Accumulating into it, or reading it: not a graph use of the receiver.
                } else {
                    self.visit_expr(&call.receiver);
                }
                for arg in &call.args {
                    self.visit_expr(arg);
                }
            }
            Expr::Call(call) => {
                if let Some(place) = manually_drop_release(call).or_else(|| ptr_read(call)) {
                    if let Some((base, field)) = place_and_field(place) {
                        self.moved_out
                            .entry(base.to_string())
                            .or_default()
                            .insert(field);
                    }
                }
                if callee_name(call).is_some_and(|n| n == "keep") {
                    if let Some(ident) = call.args.first().and_then(ident_of) {
                        self.kept.insert(ident.to_string());
                    }
                }
                visit::visit_expr_call(self, call);
            }
            Expr::Assign(a) => {
                // `acc = acc + v`, `acc = acc.add(&v)?`: only `v` is used.
                let mut right = strip(&a.right);
                while let Expr::Try(t) = right {
                    right = strip(&t.expr);
                }
                match right {
                    Expr::Binary(b) if same_place(&b.left, &a.left) => self.visit_expr(&b.right),
                    Expr::Binary(b) if same_place(&b.right, &a.left) => self.visit_expr(&b.left),
                    Expr::MethodCall(m) if same_place(&m.receiver, &a.left) => {
                        m.args.iter().for_each(|arg| self.visit_expr(arg));
                    }
                    other => self.visit_expr(other),
                }
                if ident_of(&a.left).is_none() {
                    self.visit_expr(&a.left);
                }
            }
            Expr::Binary(b) if is_compound_assign(&b.op) => {
                if ident_of(&b.left).is_none() {
                    self.visit_expr(&b.left);
                }
                self.visit_expr(&b.right);
            }
            Expr::Path(_) => self.use_of(e),
            Expr::Struct(s) => {
                if let Some(ty) = s.path.segments.last() {
                    for field in &s.fields {
                        let value = strip(&field.expr);
                        if let (true, syn::Member::Named(name)) =
                            (is_manually_drop_new(value), &field.member)
                        {
                            self.manually_drop_fields.insert(
                                std::ptr::from_ref(value) as usize,
                                (ty.ident.to_string(), name.to_string()),
                            );
                        }
                    }
                }
                visit::visit_expr(self, e);
            }
            _ => visit::visit_expr(self, e),
        }
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        let pat = match &local.pat {
            syn::Pat::Type(t) => &*t.pat,
            other => other,
        };
        if let (syn::Pat::Ident(p), Some(init)) = (pat, &local.init) {
            let value = strip(&init.expr);
            if is_manually_drop_new(value) {
                self.manually_drop_lets
                    .insert(std::ptr::from_ref(value) as usize, p.ident.to_string());
            } else if rebuilt_from_raw(value) {
                self.raw_taken.insert(p.ident.to_string());
            }
        }
        visit::visit_local(self, local);
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_uses_leave_out_accumulation_and_reads() {
        let block: Block = syn::parse_quote!({
            let mut kept = Vec::new();
            let mut sum = zeros();
            let mut out = Vec::new();
            for x in xs {
                kept.push(x.loss());
                sum = sum + x.loss();
                sum += x.loss();
                out.push(x.loss());
            }
            println!("{}", kept.len());
            keep(&sum);
            Ok(out)
        });
        let facts = FnFacts::of(&block);
        assert!(!facts.graph_used.contains("kept"));
        assert!(facts.graph_used.contains("out"));
        assert!(facts.graph_used.contains("sum"), "passed to keep");
        assert!(facts.kept.contains("sum"));
    }
}
