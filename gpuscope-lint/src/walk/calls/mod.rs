//! What a file's functions call, with the loops around each call: the plain data
//! ([`FileCalls`]) that `callgraph` resolves, within the file (the first time a rule asks,
//! `Cx::repeated`, through the function the walker hands to `context::Callers`) and across
//! a crate's files.
//!
//! A call is kept with what it names as written (`callgraph::Callee`): a path, or a method
//! with its receiver's type where it shows (`self`, a parameter or local of a declared or
//! constructed type, a field of those, a tuple variant's field bound by a `match` arm or an
//! `if let` pattern, `NetworkInner::Gpu(net)`) and its receiver's last name. Loops count as
//! in the walk (`for`, `while`, `loop`, `for_each` closures, less those of which a bounded
//! guard lets only a few iterations through: `walk/bounded.rs`), less loops over a fixed
//! few items (an array literal, a constant, `0..4`) and loops spawning a thread that makes
//! the call. `callgraph` adds them up along chains of at most `MAX_CHAIN` calls.

use rustc_hash::{FxHashMap, FxHashSet};

use proc_macro2::{Delimiter, Spacing, TokenTree};
use syn::parse::Parser;
use syn::visit::{self, Visit};
use syn::{Block, Expr, Pat};

use super::{bounded, switches};
use crate::callgraph::{Callee, FileCalls, Site, TypeOf};
use crate::context::{FileCallsOf, LoopFrame, span_range};
use crate::infer::FileIndex;
use crate::syntax::{expr_attrs, is_screaming_case, pat_idents, show, strip, unwrapped, with_text};

mod backends;
mod items;

use items::{Items, path_of, type_path};

/// What `file` defines and calls, and each function's body address (0 for none); `index`
/// is what the file declares (its constants, for bounded guards).
pub(super) fn file_calls(file: &syn::File, index: &FileIndex) -> FileCallsOf {
    let mut items = Items::default();
    items.visit_file(file);
    let mut sites = Vec::new();
    for (me, body) in items.bodies.iter().enumerate() {
        let Some(body) = body else { continue };
        let (sig, generic_outer) = items.sigs[me];
        let mut walk = Sites {
            fns: &items.fns,
            consts: &index.consts,
            me,
            on_cpu: index.runs_on_a_cpu_backend(sig, body, generic_outer),
            loops: Vec::new(),
            locals: FxHashMap::default(),
            switches: FxHashSet::default(),
            from_zero: FxHashSet::default(),
            debugging: 0,
            out: &mut sites,
        };
        walk.visit_block(body);
    }
    let bodies = items
        .bodies
        .iter()
        .map(|b| b.map_or(0, |b| b as *const Block as usize))
        .collect();
    FileCallsOf {
        calls: FileCalls {
            fns: items.fns,
            adts: items.adts,
            uses: items.uses,
            mods: items.mods,
            sites,
        },
        bodies,
    }
}

/// Finds one function's calls, with the loops around each.
struct Sites<'s> {
    fns: &'s [crate::callgraph::FnDef],
    consts: &'s FxHashSet<String>,
    me: usize,
    /// Whether the function runs on burn's or dfdx's CPU backend.
    on_cpu: bool,
    loops: Vec<LoopFrame>,
    /// The types of the locals bound so far whose type shows (`let t = Trainer::new(..)`).
    locals: FxHashMap<String, TypeOf>,
    /// Locals bound to a debug switch (`let debug = std::env::var_os("X").is_some();`).
    switches: FxHashSet<String>,
    /// Locals bound to a non-negative integer literal (`let mut index = 0;`).
    from_zero: FxHashSet<String>,
    /// How many debug switches (or guards that never hold) guard the code: calls there pass
    /// no loops on.
    debugging: usize,
    out: &'s mut Vec<Site>,
}

impl Sites<'_> {
    /// What the call `e` names, where it may be a function of the package, and the call
    /// shown short (as `show` shows it).
    fn callee(&self, e: &Expr) -> Option<(Callee, String)> {
        let args = |empty: bool| if empty { "()" } else { "(..)" };
        match e {
            Expr::Call(call) => {
                let Expr::Path(p) = strip(&call.func) else {
                    return None;
                };
                if p.qself.is_some() {
                    return None;
                }
                // `Some(..)`, `Ok(..)`, `Wrapper(..)`: constructors, not functions.
                if p.path.segments.len() == 1 {
                    let upper = with_text(&p.path.segments[0].ident, |name| {
                        name.starts_with(|c: char| c.is_ascii_uppercase())
                    });
                    if upper {
                        return None;
                    }
                }
                let segments = path_of(&p.path);
                let plain = matches!(&*call.func, Expr::Path(_)) && p.attrs.is_empty();
                let shown = if plain {
                    let lead = if p.path.leading_colon.is_some() {
                        "::"
                    } else {
                        ""
                    };
                    format!(
                        "{lead}{}{}",
                        segments.join("::"),
                        args(call.args.is_empty())
                    )
                } else {
                    show(e)
                };
                Some((Callee::Path(segments), shown))
            }
            Expr::MethodCall(m) => {
                let (ty, receiver, shown) = self.receiver(&m.receiver);
                if ty.is_none() && receiver.is_none() {
                    return None;
                }
                let name = m.method.to_string();
                let shown = format!("{shown}.{name}{}", args(m.args.is_empty()));
                Some((Callee::Method { name, ty, receiver }, shown))
            }
            _ => None,
        }
    }

    /// A method call's receiver: its type where the code shows it ([`receiver_type`]), its
    /// last name ([`receiver_name`]) and its text (`show`), reading each name once for a
    /// path or a chain of named fields.
    ///
    /// [`receiver_type`]: Sites::receiver_type
    fn receiver(&self, e: &Expr) -> (Option<TypeOf>, Option<String>, String) {
        if expr_attrs(e).is_empty() {
            match e {
                Expr::Path(p) if p.qself.is_none() => {
                    if let Some(ident) = p.path.get_ident() {
                        let name = ident.to_string();
                        let ty = if name == "self" {
                            Some(TypeOf::SelfType)
                        } else {
                            self.local_type(&name)
                        };
                        return (ty, Some(name.clone()), name);
                    }
                }
                Expr::Field(f) => {
                    if let syn::Member::Named(field) = &f.member {
                        let (base, _, text) = self.receiver(&f.base);
                        let field = field.to_string();
                        let text = format!("{text}.{field}");
                        let ty = base.map(|b| TypeOf::Field(Box::new(b), field.clone()));
                        return (ty, Some(field), text);
                    }
                }
                _ => {}
            }
        }
        let (ty, name) = (self.receiver_type(e), receiver_name(e));
        // Shown only where the call is kept.
        let text = if ty.is_some() || name.is_some() {
            show(e)
        } else {
            String::new()
        };
        (ty, name, text)
    }

    /// The type of the local or parameter `name`, where it shows.
    fn local_type(&self, name: &str) -> Option<TypeOf> {
        self.locals.get(name).cloned().or_else(|| {
            let ty = self.fns[self.me].params.get(name)?;
            Some(TypeOf::Named(ty.clone()))
        })
    }

    /// The type of a method call's receiver, where the code shows it: `self`, a parameter
    /// or local of a declared or constructed type, a field of those.
    fn receiver_type(&self, e: &Expr) -> Option<TypeOf> {
        match strip(e) {
            Expr::Path(p) if p.qself.is_none() => {
                let name = p.path.get_ident()?.to_string();
                if name == "self" {
                    return Some(TypeOf::SelfType);
                }
                self.local_type(&name)
            }
            Expr::Field(f) => {
                let syn::Member::Named(field) = &f.member else {
                    return None;
                };
                let base = self.receiver_type(&f.base)?;
                Some(TypeOf::Field(Box::new(base), field.to_string()))
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

    /// Runs `walk` with the names that `pat` binds to a tuple variant's fields
    /// (`NetworkInner::Gpu(net)`) typed as those fields, as they were after.
    fn with_variant(&mut self, pat: &Pat, walk: impl FnOnce(&mut Self)) {
        let bound = variant_bindings(pat);
        let saved: Vec<_> = bound
            .into_iter()
            .map(|(name, ty)| {
                let before = self.locals.insert(name.clone(), ty);
                (name, before)
            })
            .collect();
        walk(self);
        for (name, before) in saved {
            match before {
                Some(ty) => self.locals.insert(name, ty),
                None => self.locals.remove(&name),
            };
        }
    }
}

impl<'ast> Visit<'ast> for Sites<'_> {
    // Nested items are functions of their own (or hold none).
    fn visit_item(&mut self, _: &'ast syn::Item) {}

    // Calls are expressions: types, paths and attributes hold none worth following, and
    // patterns only in an arm's guard (`visit_arm`).
    fn visit_type(&mut self, _: &'ast syn::Type) {}

    fn visit_path(&mut self, _: &'ast syn::Path) {}

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_pat(&mut self, pat: &'ast Pat) {
        if let Pat::Guard(guarded) = pat {
            self.visit_expr(&guarded.guard);
        }
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        if matches!(e, Expr::Call(_) | Expr::MethodCall(_)) && self.debugging == 0 {
            if let Some((callee, call)) = self.callee(e) {
                self.out.push(Site {
                    caller: self.me,
                    callee,
                    around: self.loops.iter().filter(|l| l.bounded == 0).count(),
                    call,
                    line: start_line(e),
                    on_cpu: self.on_cpu,
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
        let init = local.init.as_ref().map(|i| &*i.expr);
        switches::bind(&mut self.switches, &local.pat, init, self.consts);
        bounded::bind_from_zero(&mut self.from_zero, &local.pat, init);
        if let Some(frame) = self.loops.last_mut() {
            pat_idents(&local.pat, &mut |ident| {
                frame.names.insert(ident.to_string());
            });
        }
    }

    fn visit_expr_if(&mut self, e: &'ast syn::ExprIf) {
        // What a debug switch guards (its condition's conjunction too) runs only while
        // debugging.
        let (debug, _) = switches::of_if(&e.cond, self.consts, &self.switches);
        // A guard that never holds (`if index == -1 { .. }`) holds code that never runs.
        let debug =
            debug + usize::from(bounded::never_holds(&self.loops, &self.from_zero, &e.cond));
        self.debugging += debug;
        self.visit_expr(&e.cond);
        let bounded = bounded::bounded_frames(&self.loops, self.consts, &e.cond);
        for &i in &bounded {
            self.loops[i].bounded += 1;
        }
        match &*e.cond {
            Expr::Let(l) => self.with_variant(&l.pat, |w| w.visit_block(&e.then_branch)),
            _ => self.visit_block(&e.then_branch),
        }
        for &i in &bounded {
            self.loops[i].bounded -= 1;
        }
        self.debugging -= debug;
        if let Some((_, other)) = &e.else_branch {
            self.visit_expr(other);
        }
    }

    // `with_env!(conf, E => { for .. { train(..) } })`: a block after `=>` in a macro's
    // tokens is code the macro runs (as `select!`'s and dispatch macros' arms are).
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Some(args) = super::macro_args::of(mac) {
            self.debugging += usize::from(args.debug);
            args.exprs.iter().for_each(|e| self.visit_expr(e));
            self.debugging -= usize::from(args.debug);
            return;
        }
        let mut arrow = (false, false);
        for token in mac.tokens.clone() {
            let after_arrow = arrow.1;
            arrow = match &token {
                TokenTree::Punct(p) if p.as_char() == '=' => (p.spacing() == Spacing::Joint, false),
                TokenTree::Punct(p) if p.as_char() == '>' => (false, arrow.0),
                _ => (false, false),
            };
            let TokenTree::Group(group) = token else {
                continue;
            };
            if !after_arrow || group.delimiter() != Delimiter::Brace {
                continue;
            }
            if let Ok(stmts) = Block::parse_within.parse2(group.stream()) {
                for stmt in &stmts {
                    self.visit_stmt(stmt);
                }
            }
        }
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        self.with_variant(&arm.pat, |w| {
            w.visit_pat(&arm.pat);
            w.visit_expr(&arm.body);
        });
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

    fn visit_block(&mut self, block: &'ast Block) {
        // A block that `break`s out of the innermost loop runs once per run of it.
        let once = bounded::breaks_out(block);
        if let Some(frame) = self.loops.last_mut().filter(|_| once) {
            frame.bounded += 1;
        }
        // After `if !DEBUG { return; }` the rest of the block runs only while debugging.
        let mut leaves = 0;
        for stmt in &block.stmts {
            self.visit_stmt(stmt);
            if switches::leaves_unless(stmt, self.consts, &self.switches) {
                self.debugging += 1;
                leaves += 1;
            }
        }
        self.debugging -= leaves;
        if let Some(frame) = self.loops.last_mut().filter(|_| once) {
            frame.bounded -= 1;
        }
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
            if p.path.segments.last().is_some_and(|s| spawns(&s.ident)));
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
        if spawns(&call.method) {
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

/// The line `e` starts on, as `span_range(e)` gives it, found without turning `e` into tokens
/// (what `span_range` does): the first token of a call chain is its leftmost path's.
fn start_line(e: &Expr) -> usize {
    let mut at = e;
    loop {
        if !crate::syntax::expr_attrs(at).is_empty() {
            break;
        }
        at = match at {
            Expr::MethodCall(m) => &m.receiver,
            Expr::Call(c) => &c.func,
            Expr::Field(f) => &f.base,
            Expr::Try(t) => &t.expr,
            Expr::Await(a) => &a.base,
            Expr::Index(i) => &i.expr,
            Expr::Path(p) if p.qself.is_none() && p.path.leading_colon.is_none() => {
                match p.path.segments.first() {
                    Some(first) => return first.ident.span().start().line,
                    None => break,
                }
            }
            _ => break,
        };
    }
    span_range(at).0.start().line
}

/// Whether a function or method of this name starts a thread or task that runs beside the
/// caller: `spawn`, `spawn_blocking`, `spawn_local`, ..
fn spawns(name: &syn::Ident) -> bool {
    crate::syntax::with_text(name, |name| name.starts_with("spawn"))
}

/// The name and type of a `let` whose type shows: `let t: Trainer = ..`, `let t =
/// Trainer::new(..)?`, `let t = Trainer { .. }`.
fn local_type(local: &syn::Local) -> Option<(String, TypeOf)> {
    let (pat, declared) = match &local.pat {
        Pat::Type(t) => (&*t.pat, type_path(&t.ty)),
        pat => (pat, None),
    };
    let Pat::Ident(ident) = pat else { return None };
    let ty = declared.or_else(|| match unwrapped(&local.init.as_ref()?.expr) {
        Expr::Call(call) => match strip(&call.func) {
            Expr::Path(p) if p.path.segments.len() >= 2 => {
                let mut path = path_of(&p.path);
                path.pop();
                Some(path)
            }
            _ => None,
        },
        Expr::Struct(s) => Some(path_of(&s.path)),
        _ => None,
    })?;
    Some((ident.ident.to_string(), TypeOf::Named(ty)))
}

/// The names that `pat` binds to a tuple variant's fields, with their types:
/// `NetworkInner::Gpu(net)`, `Self::Gpu(ref mut net)` (behind `&` too).
fn variant_bindings(pat: &Pat) -> Vec<(String, TypeOf)> {
    let pat = match pat {
        Pat::Reference(r) => &*r.pat,
        Pat::Guard(g) => &*g.pat,
        pat => pat,
    };
    let Pat::TupleStruct(ts) = pat else {
        return Vec::new();
    };
    let path = path_of(&ts.path);
    let [.., ty, variant] = path.as_slice() else {
        return Vec::new();
    };
    ts.elems
        .iter()
        .enumerate()
        .filter_map(|(i, elem)| match elem {
            Pat::Ident(p) if p.subpat.is_none() => Some((
                p.ident.to_string(),
                TypeOf::Variant(ty.clone(), variant.clone(), i),
            )),
            _ => None,
        })
        .collect()
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
