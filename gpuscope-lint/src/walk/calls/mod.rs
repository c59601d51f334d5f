//! Which loops of its callers in the same file repeat each function: a pass over the file,
//! run the first time a rule asks (`Cx::repeated`, through the function the walker hands to
//! `context::Callers`), giving every function body that is called inside a loop a
//! [`CalledIn`].
//!
//! Calls are resolved by name, in the file only: `name(..)` to the file's one function of
//! that name (no other function or method of the file has it), `self.name(..)`,
//! `Self::name(..)` and `Type::name(..)` to the one method of that name in the file's impls
//! of the type, and `x.name(..)` the same way where `x`'s type shows (a parameter, a field
//! of a struct of the file, `let x = Type::new(..)`) or `x` is named as the type is
//! (`training_step` for `TrainingStep`). A method of a trait called on a value of another
//! type is not followed, nor is a name defined twice. A function calling itself does not
//! count as repeating itself. Loops count as in the walk (`for`, `while`, `loop`,
//! `for_each` closures, less those of which a bounded guard lets only a few iterations
//! through: `walk/bounded.rs`), less loops over a fixed few items (an array literal, a
//! constant, `0..4`) and loops spawning a thread that makes the call; they add up along
//! chains of at most [`MAX_CHAIN`] calls.

use rustc_hash::{FxHashMap, FxHashSet};

use syn::visit::{self, Visit};
use syn::{Block, Expr, Pat};

use super::bounded;
use crate::context::{CalledIn, LoopFrame, span_range};
use crate::infer::FileIndex;
use crate::syntax::{is_screaming_case, pat_idents, show, strip, unwrapped};

mod items;

use items::{FnItem, Items, Table, type_name};

/// The longest chain of calls through which loops add up.
pub(crate) const MAX_CHAIN: usize = 4;

/// Loops counted at most (two make code hot).
const MAX_LOOPS: usize = 2;

/// The [`CalledIn`] of every function body of `file` that its callers in the file repeat,
/// by the body's address; `index` is what the file declares (its constants, for bounded
/// guards; its structs' fields, for receivers' types).
pub(super) fn called_in(file: &syn::File, index: &FileIndex) -> FxHashMap<usize, CalledIn> {
    let consts = &index.consts;
    let mut items = Items::default();
    items.visit_file(file);
    let fns = items.fns;
    let table = Table::new(&fns, &index.adts);
    let mut sites = Vec::new();
    for (me, f) in fns.iter().enumerate() {
        let Some(body) = f.body else { continue };
        let mut walk = Sites {
            table: &table,
            consts,
            me,
            loops: Vec::new(),
            locals: FxHashMap::default(),
            out: &mut sites,
        };
        walk.visit_block(body);
    }
    let best = propagate(&fns, &sites);
    fns.iter()
        .zip(best)
        .filter_map(|(f, best)| Some((f.body? as *const Block as usize, best?)))
        .collect()
}

/// Adds up loops along calls, one more call of the chains each round.
fn propagate(fns: &[FnItem<'_>], sites: &[Site]) -> Vec<Option<CalledIn>> {
    let mut best: Vec<Option<CalledIn>> = vec![None; fns.len()];
    for _ in 0..MAX_CHAIN {
        let before = best.clone();
        for site in sites {
            let outer = before[site.caller].as_ref().map_or(0, |c| c.loops);
            let loops = (site.around + outer).min(MAX_LOOPS);
            if loops == 0 || best[site.callee].as_ref().is_some_and(|c| c.loops >= loops) {
                continue;
            }
            best[site.callee] = Some(CalledIn {
                loops,
                around_call: site.around,
                caller_loops: outer,
                call: site.call.clone(),
                caller: fns[site.caller].name.clone(),
                line: site.line,
            });
        }
        if before == best {
            break;
        }
    }
    best
}

/// A call of a function of the file.
struct Site {
    caller: usize,
    callee: usize,
    /// Loops around the call that repeat it.
    around: usize,
    call: String,
    line: usize,
}

/// Finds one function's calls of the file's functions, with the loops around each.
struct Sites<'s, 't, 'a> {
    table: &'s Table<'t, 'a>,
    consts: &'s FxHashSet<String>,
    me: usize,
    loops: Vec<LoopFrame>,
    /// The types of the locals bound so far whose type shows (`let t = Trainer::new(..)`).
    locals: FxHashMap<String, String>,
    out: &'s mut Vec<Site>,
}

impl Sites<'_, '_, '_> {
    fn owner(&self) -> Option<&str> {
        self.table.fns[self.me].owner.as_deref()
    }

    /// The function of the file that the call `e` makes.
    fn callee(&self, e: &Expr) -> Option<usize> {
        match e {
            Expr::Call(call) => {
                let Expr::Path(p) = strip(&call.func) else {
                    return None;
                };
                if p.qself.is_some() {
                    return None;
                }
                let segments: Vec<String> = p
                    .path
                    .segments
                    .iter()
                    .map(|s| s.ident.to_string())
                    .collect();
                match segments.as_slice() {
                    [name] => self.table.free(name),
                    [ty, name] if ty == "Self" => self.table.method_of(self.owner()?, name),
                    [ty, name] => self.table.method_of(ty, name),
                    _ => None,
                }
            }
            Expr::MethodCall(m) => {
                let name = m.method.to_string();
                match self.receiver_type(&m.receiver) {
                    Some(ty) => self.table.method_of(&ty, &name),
                    None => self
                        .table
                        .method_named_like(&receiver_name(&m.receiver)?, &name),
                }
            }
            _ => None,
        }
    }

    /// The type of a method call's receiver, where the file shows it: `self`, a parameter
    /// or local of a declared or constructed type, a field of a struct of the file.
    fn receiver_type(&self, e: &Expr) -> Option<String> {
        match strip(e) {
            Expr::Path(p) if p.qself.is_none() => {
                let name = p.path.get_ident()?.to_string();
                if name == "self" {
                    return self.owner().map(str::to_owned);
                }
                self.locals
                    .get(&name)
                    .or_else(|| self.table.fns[self.me].params.get(&name))
                    .cloned()
            }
            Expr::Field(f) => {
                let syn::Member::Named(field) = &f.member else {
                    return None;
                };
                let ty = self.receiver_type(&f.base)?;
                self.table.field_type(&ty, &field.to_string())
            }
            _ => None,
        }
    }

    fn enter(&mut self, pats: &[&Pat], counters: FxHashSet<String>) {
        let mut frame = LoopFrame {
            counters,
            ..LoopFrame::default()
        };
        for pat in pats {
            pat_idents(pat, &mut |ident| {
                frame.names.insert(ident.to_string());
            });
        }
        self.loops.push(frame);
    }
}

impl<'ast> Visit<'ast> for Sites<'_, '_, '_> {
    // Nested items are functions of their own (or hold none).
    fn visit_item(&mut self, _: &'ast syn::Item) {}

    fn visit_expr(&mut self, e: &'ast Expr) {
        if matches!(e, Expr::Call(_) | Expr::MethodCall(_)) {
            if let Some(callee) = self.callee(e).filter(|&c| c != self.me) {
                self.out.push(Site {
                    caller: self.me,
                    callee,
                    around: self.loops.iter().filter(|l| l.bounded == 0).count(),
                    call: show(e),
                    line: span_range(e).0.start().line,
                });
            }
        }
        visit::visit_expr(self, e);
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        visit::visit_local(self, local);
        if let Some((name, ty)) = local_type(local) {
            self.locals.insert(name, ty);
        }
        if let Some(frame) = self.loops.last_mut() {
            pat_idents(&local.pat, &mut |ident| {
                frame.names.insert(ident.to_string());
            });
        }
    }

    fn visit_expr_if(&mut self, e: &'ast syn::ExprIf) {
        self.visit_expr(&e.cond);
        let bounded = bounded::bounded_frames(&self.loops, self.consts, &e.cond);
        for &i in &bounded {
            self.loops[i].bounded += 1;
        }
        self.visit_block(&e.then_branch);
        for &i in &bounded {
            self.loops[i].bounded -= 1;
        }
        if let Some((_, other)) = &e.else_branch {
            self.visit_expr(other);
        }
    }

    fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
        self.visit_expr(&e.expr);
        let counters = bounded::counters(Some(&e.pat), Some(&e.expr), &e.body);
        self.enter(&[&e.pat], counters);
        if runs_a_few_times(&e.expr, self.consts) {
            // Counted as a bounded guard would be: it does not repeat the call.
            if let Some(frame) = self.loops.last_mut() {
                frame.bounded += 1;
            }
        }
        self.visit_block(&e.body);
        self.loops.pop();
    }

    fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
        self.enter(&[], bounded::counters(None, None, &e.body));
        self.visit_expr(&e.cond);
        self.visit_block(&e.body);
        self.loops.pop();
    }

    fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
        self.enter(&[], bounded::counters(None, None, &e.body));
        self.visit_block(&e.body);
        self.loops.pop();
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        self.visit_expr(&call.func);
        let spawn = matches!(strip(&call.func), Expr::Path(p)
            if p.path.segments.last().is_some_and(|s| s.ident == "spawn"));
        // A thread spawned in a loop runs beside the others: the loop does not repeat what
        // it runs one after another.
        let around = if spawn {
            std::mem::take(&mut self.loops)
        } else {
            Vec::new()
        };
        for arg in &call.args {
            self.visit_expr(arg);
        }
        if spawn {
            self.loops = around;
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        self.visit_expr(&call.receiver);
        if call.method == "spawn" {
            let around = std::mem::take(&mut self.loops);
            for arg in &call.args {
                self.visit_expr(arg);
            }
            self.loops = around;
            return;
        }
        let each = call.method == "for_each" || call.method == "try_for_each";
        for arg in &call.args {
            match strip(arg) {
                Expr::Closure(closure) if each => {
                    let inputs: Vec<&Pat> = closure.inputs.iter().collect();
                    self.enter(&inputs, FxHashSet::default());
                    self.visit_expr(&closure.body);
                    self.loops.pop();
                }
                _ => self.visit_expr(arg),
            }
        }
    }
}

/// Iterator adapters that keep the number of a loop's iterations at most what it was.
const FEWER: &[&str] = &[
    "iter",
    "into_iter",
    "iter_mut",
    "enumerate",
    "rev",
    "skip",
    "take",
    "step_by",
    "zip",
    "copied",
    "cloned",
    "filter",
    "map",
];

/// Whether `for _ in iter` runs a fixed few times: over an array literal (`[F16, BF16]`), a
/// constant (`TEMPERATURES.iter()`, `SHAPES`), or a range ending at a literal of at most
/// [`bounded::MAX_LITERAL_BOUND`] (`0..4`), maybe through adapters (`.iter().enumerate()`).
/// Such loops sweep parameters or retry; they do not repeat a call as a data loop does.
fn runs_a_few_times(iter: &Expr, consts: &FxHashSet<String>) -> bool {
    let mut e = strip(iter);
    while let Expr::MethodCall(m) = e {
        if !FEWER.iter().any(|a| m.method == a) {
            return false;
        }
        e = strip(&m.receiver);
    }
    match e {
        Expr::Array(_) => true,
        Expr::Path(p) if p.qself.is_none() => p.path.segments.last().is_some_and(|s| {
            let name = s.ident.to_string();
            consts.contains(&name) || is_screaming_case(&name)
        }),
        Expr::Range(r) => r
            .end
            .as_deref()
            .and_then(bounded::int_literal)
            .is_some_and(|k| k <= bounded::MAX_LITERAL_BOUND),
        _ => false,
    }
}

/// The name and type of a `let` whose type shows: `let t: Trainer = ..`, `let t =
/// Trainer::new(..)?`, `let t = Trainer { .. }`.
fn local_type(local: &syn::Local) -> Option<(String, String)> {
    let (pat, declared) = match &local.pat {
        Pat::Type(t) => (&*t.pat, type_name(&t.ty)),
        pat => (pat, None),
    };
    let Pat::Ident(ident) = pat else { return None };
    let ty = declared.or_else(|| match unwrapped(&local.init.as_ref()?.expr) {
        Expr::Call(call) => match strip(&call.func) {
            Expr::Path(p) if p.path.segments.len() >= 2 => {
                let segments = &p.path.segments;
                Some(segments[segments.len() - 2].ident.to_string())
            }
            _ => None,
        },
        Expr::Struct(s) => s.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    })?;
    Some((ident.ident.to_string(), ty))
}

/// The last name of a receiver (`trainer` of `self.trainer` or `trainer`).
fn receiver_name(e: &Expr) -> Option<String> {
    match strip(e) {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(ToString::to_string),
        Expr::Field(f) => match &f.member {
            syn::Member::Named(name) => Some(name.to_string()),
            syn::Member::Unnamed(_) => None,
        },
        _ => None,
    }
}
