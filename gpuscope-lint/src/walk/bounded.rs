//! Guards that let only a bounded number of a loop's iterations through: `if n < 6 { .. }`
//! where `n` counts the loop's iterations (a range's index, `enumerate`'s index, a local
//! the body advances by a constant each time). What such a guard holds runs at most that
//! many times per run of the loop, as a diagnostic for the first tokens does, so the loop
//! does not repeat it (`Cx::hot_loop_depth`). So does a block that `break`s out of the
//! innermost loop ([`breaks_out`]): what it holds runs once per run of that loop. And a
//! guard that never holds ([`never_holds`]: a counter from zero up compared equal to a
//! negative literal, `if index == -1 { println!(..) }`) holds code that never runs.

use rustc_hash::FxHashSet;

use syn::visit::{self, Visit};
use syn::{BinOp, Block, Expr, Pat, Stmt};

use crate::context::{Cx, LoopFrame};
use crate::syntax::{is_compound_assign, is_screaming_case, strip};

/// Iterator adapters after which a range's or `enumerate`'s indices stay distinct.
const DISTINCT: &[&str] = &[
    "rev",
    "step_by",
    "skip",
    "take",
    "filter",
    "skip_while",
    "take_while",
];

/// The names that count a loop's iterations: `i` of `for i in a..b` (maybe `(a..b).rev()`,
/// `.step_by(k)`, ..), `i` of `for (i, x) in xs.iter().enumerate()`, and a local that a
/// top-level statement of `body` advances by a literal (`n += 1;`) and that the body
/// neither binds again nor assigns otherwise.
pub(super) fn counters(pat: Option<&Pat>, iter: Option<&Expr>, body: &Block) -> FxHashSet<String> {
    let mut out = FxHashSet::default();
    if let (Some(pat), Some(iter)) = (pat, iter) {
        if let Some(index) = index_of(pat, iter) {
            out.insert(index);
        }
    }
    for stmt in &body.stmts {
        let Stmt::Expr(Expr::Binary(b), _) = stmt else {
            continue;
        };
        if !matches!(b.op, BinOp::AddAssign(_)) || !is_int_literal(&b.right) {
            continue;
        }
        let Some(name) = plain_name(&b.left) else {
            continue;
        };
        let mut writes = Writes {
            name: &name,
            count: 0,
        };
        writes.visit_block(body);
        if writes.count == 1 {
            out.insert(name);
        }
    }
    out
}

/// Whether `block` ends the innermost loop around it: one of its own statements is a
/// `break` with no label (`Converged(l) => { log(l.to_scalar()?); break; }`), and nothing
/// in it `continue`s that loop first (`if short { continue; } break`). What it holds runs at
/// most once per run of that loop.
pub(super) fn breaks_out(block: &Block) -> bool {
    let breaks = block
        .stmts
        .iter()
        .any(|s| matches!(s, Stmt::Expr(Expr::Break(b), _) if b.label.is_none()));
    if !breaks {
        return false;
    }
    let mut continues = Continues(false);
    continues.visit_block(block);
    !continues.0
}

/// Whether a `continue` that may go on with the loop around the code is found: any
/// `continue` outside the loops and closures nested in it.
struct Continues(bool);

impl<'ast> Visit<'ast> for Continues {
    fn visit_expr_continue(&mut self, _: &'ast syn::ExprContinue) {
        self.0 = true;
    }
    fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
        self.visit_expr(&e.expr);
    }
    fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
        self.visit_expr(&e.cond);
    }
    fn visit_expr_loop(&mut self, _: &'ast syn::ExprLoop) {}
    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// The enclosing loops (indices into `cx.f.loops`) of which `cond` lets only a bounded
/// number of iterations through: it bounds a counter of the loop (`n < 6`, `i == 0`) that
/// no loop inside it binds again.
pub(super) fn bounded_loops(cx: &Cx<'_>, cond: &Expr) -> Vec<usize> {
    bounded_frames(&cx.f.loops, &cx.index().consts, cond)
}

/// [`bounded_loops`] among `loops` (outermost first), `consts` the file's constants.
pub(super) fn bounded_frames(
    loops: &[LoopFrame],
    consts: &FxHashSet<String>,
    cond: &Expr,
) -> Vec<usize> {
    if loops.is_empty() {
        return Vec::new();
    }
    let is_const = |e: &Expr| match e {
        Expr::Path(p) => p.path.segments.last().is_some_and(|s| {
            let name = s.ident.to_string();
            consts.contains(&name) || is_screaming_case(&name)
        }),
        _ => false,
    };
    let mut out = Vec::new();
    for name in bounded_names(cond, &is_const) {
        for (i, frame) in loops.iter().enumerate().rev() {
            if frame.counters.contains(&name) {
                out.push(i);
                break;
            }
            if frame.names.contains(&name) {
                break;
            }
        }
    }
    out
}

/// Whether `cond` never holds: a counter of an enclosing loop that the function bound to a
/// non-negative integer literal (`from_zero`, `let mut index = 0;`) and that the loop's body
/// advances by a literal, compared equal to a negative literal (`index == -1`, a print
/// switched off), alone or in a conjunction.
pub(super) fn never_holds(loops: &[LoopFrame], from_zero: &FxHashSet<String>, cond: &Expr) -> bool {
    let Expr::Binary(b) = strip(cond) else {
        return false;
    };
    match b.op {
        BinOp::And(_) => {
            never_holds(loops, from_zero, &b.left) || never_holds(loops, from_zero, &b.right)
        }
        BinOp::Eq(_) => {
            let name = if negative_int_literal(&b.right) {
                plain_name(&b.left)
            } else if negative_int_literal(&b.left) {
                plain_name(&b.right)
            } else {
                None
            };
            name.is_some_and(|n| {
                from_zero.contains(&n) && loops.iter().any(|l| l.counters.contains(&n))
            })
        }
        _ => false,
    }
}

/// Notes in `from_zero` whether `let pat = init;` binds a local to a non-negative integer
/// literal (`let mut n = 0;`), and forgets a name bound to anything else.
pub(super) fn bind_from_zero(from_zero: &mut FxHashSet<String>, pat: &Pat, init: Option<&Expr>) {
    let pat = match pat {
        Pat::Type(t) => &*t.pat,
        pat => pat,
    };
    let Pat::Ident(p) = pat else {
        return;
    };
    let name = p.ident.to_string();
    if p.subpat.is_none() && init.is_some_and(is_int_literal) {
        from_zero.insert(name);
    } else {
        from_zero.remove(&name);
    }
}

/// `-1`, `-(2)`: a negated integer literal.
fn negative_int_literal(e: &Expr) -> bool {
    matches!(strip(e), Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) && is_int_literal(&u.expr))
}

/// The index a `for` pattern binds where every iteration gives a new one.
fn index_of(pat: &Pat, iter: &Expr) -> Option<String> {
    let mut e = strip(iter);
    let mut enumerated = false;
    loop {
        match e {
            Expr::Range(_) => break,
            Expr::MethodCall(m) if m.method == "enumerate" => {
                enumerated = true;
                break;
            }
            Expr::MethodCall(m) if DISTINCT.iter().any(|d| m.method == d) => {
                e = strip(&m.receiver);
            }
            _ => return None,
        }
    }
    let pat = match pat {
        Pat::Tuple(t) if enumerated => t.elems.first()?,
        _ if enumerated => return None,
        pat => pat,
    };
    match pat {
        Pat::Ident(p) if p.subpat.is_none() => Some(p.ident.to_string()),
        _ => None,
    }
}

/// The most iterations a literal bound may let through for the guard to count as a
/// diagnostic of the first few (`n < 6`): `if step < 1000 { loss.item() }` still waits
/// on every one of a thousand steps.
pub(super) const MAX_LITERAL_BOUND: u64 = 64;

/// The names `cond` bounds: `n < K`, `n <= K`, `n == K` (or `K > n`, `K >= n`, `K == n`),
/// `K` an integer literal (at most [`MAX_LITERAL_BOUND`] for `<` and `<=`; any for `==`,
/// negative too, which lets one iteration through) or a constant (`is_const`), alone or in
/// a conjunction (`&&`).
fn bounded_names(cond: &Expr, is_const: &dyn Fn(&Expr) -> bool) -> Vec<String> {
    let Expr::Binary(b) = strip(cond) else {
        return Vec::new();
    };
    if matches!(b.op, BinOp::And(_)) {
        let mut out = bounded_names(&b.left, is_const);
        out.extend(bounded_names(&b.right, is_const));
        return out;
    }
    let equal = matches!(b.op, BinOp::Eq(_));
    let bound = |e: &Expr| {
        is_const(strip(e))
            || int_literal(e).is_some_and(|k| equal || k <= MAX_LITERAL_BOUND)
            || (equal && negative_int_literal(e))
    };
    let name = match b.op {
        BinOp::Lt(_) | BinOp::Le(_) | BinOp::Eq(_) if bound(&b.right) => plain_name(&b.left),
        BinOp::Gt(_) | BinOp::Ge(_) | BinOp::Eq(_) if bound(&b.left) => plain_name(&b.right),
        _ => None,
    };
    name.into_iter().collect()
}

fn is_int_literal(e: &Expr) -> bool {
    matches!(strip(e), Expr::Lit(l) if matches!(l.lit, syn::Lit::Int(_)))
}

/// An integer literal's value (`6`, `6usize`, `1_000`); `None` for anything else or a
/// literal too large for a `u64`.
pub(super) fn int_literal(e: &Expr) -> Option<u64> {
    match strip(e) {
        Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.base10_parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// A single-segment path's name (`n`).
fn plain_name(e: &Expr) -> Option<String> {
    match strip(e) {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(ToString::to_string),
        _ => None,
    }
}

/// Counts the writes of `name` in a loop body: assignments, compound assignments and
/// bindings of the name (a `let` starts it afresh each iteration).
struct Writes<'n> {
    name: &'n str,
    count: usize,
}

impl<'ast> Visit<'ast> for Writes<'_> {
    fn visit_expr_assign(&mut self, e: &'ast syn::ExprAssign) {
        if plain_name(&e.left).is_some_and(|n| n == self.name) {
            self.count += 2;
        }
        visit::visit_expr_assign(self, e);
    }

    fn visit_expr_binary(&mut self, e: &'ast syn::ExprBinary) {
        if is_compound_assign(&e.op) && plain_name(&e.left).is_some_and(|n| n == self.name) {
            self.count += 1;
        }
        visit::visit_expr_binary(self, e);
    }

    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        if p.ident == self.name {
            self.count += 2;
        }
        visit::visit_pat_ident(self, p);
    }

    fn visit_expr_reference(&mut self, e: &'ast syn::ExprReference) {
        // `&mut n` handed on may be written anywhere.
        if e.mutability.is_some() && plain_name(&e.expr).is_some_and(|n| n == self.name) {
            self.count += 2;
        }
        visit::visit_expr_reference(self, e);
    }
}
