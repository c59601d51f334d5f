//! What a rule sees while the walker runs: [`Cx`], the context of the expression being
//! checked (the enclosing function, loops, bindings and what they hold, `no_grad`,
//! statics), and [`Sink`], where findings go (it knows the levels in force at each place,
//! after `#[gpuscope::lints::allow(..)]` and `#[gpu_scope(allow(..))]` attributes).
//!
//! The walker (`walk.rs`) updates a `Cx` as it goes; rules only read it. Neither this module
//! nor the rules know the walker.

use std::cell::OnceCell;

use rustc_hash::{FxHashMap, FxHashSet};

use proc_macro2::Span;
use quote::ToTokens;
use syn::Expr;

pub(crate) use crate::callgraph::CalledIn;
use crate::callgraph::{FileCalls, called_in_file};
use crate::frameworks::Used;
use crate::infer::{Env, FileIndex, Kind, Value};
use crate::syntax::{is_screaming_case, strip};
use crate::{Finding, Level, Levels, Rule};

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

/// One enclosing loop.
#[derive(Debug, Default)]
pub(crate) struct LoopFrame {
    /// Names bound in the loop's body so far: they start afresh each iteration.
    pub(crate) names: FxHashSet<String>,
    /// Names the loop's pattern binds (`pool` in `for pool in pools`): a new element each
    /// iteration.
    pub(crate) element: FxHashSet<String>,
    /// The loop's body runs a training step (a backward call), other than one per model
    /// through the loop's element (see [`trains`](crate::fn_facts::trains)).
    pub(crate) trains: bool,
    /// Names that count the loop's iterations (a range's index, `enumerate`'s, a local the
    /// body advances by a constant each time): see `walk/bounded.rs`.
    pub(crate) counters: FxHashSet<String>,
    /// How many guards around the code let only a bounded number of the loop's iterations
    /// through (`if n < 6 { .. }` with `n` one of its counters).
    pub(crate) bounded: usize,
}

/// The context of the function being walked.
#[derive(Debug, Default)]
pub(crate) struct FnState {
    /// The function is `#[gpu_scope]`.
    pub(crate) scoped: bool,
    /// Whether, and why, gradients are off here.
    pub(crate) no_grad: Option<NoGrad>,
    /// The enclosing loops, innermost last.
    pub(crate) loops: Vec<LoopFrame>,
    /// Bindings that refer to a static's contents, with the static's name.
    pub(crate) aliases: Vec<(String, String)>,
    /// Bindings that refer into a `&mut` parameter's contents (`if let Some(t) =
    /// out.as_mut()`, `for t in slots.iter_mut()`, `let t = slot_of(out)`).
    pub(crate) param_places: Vec<ParamPlace>,
    /// The function is a free `fn main`: outside its loops, what it stores or forgets lives
    /// no longer than its own locals.
    pub(crate) main: bool,
    /// The function is the `drop` of an `impl Drop`: it chooses what of its value to free.
    pub(crate) destructor: bool,
    /// The function's parameters (`self` included).
    pub(crate) params: FxHashSet<String>,
    /// Names given to `gpuscope::keep(&x)` somewhere in the function.
    pub(crate) kept: FxHashSet<String>,
    /// Names used as a graph somewhere in the function (returned, passed on, differentiated),
    /// not only read back (`len()`, `item()`) or accumulated into.
    pub(crate) graph_used: FxHashSet<String>,
    /// Names whose raw pointer or handle the function takes (`x.as_ptr()`, `x.ptr`), or that
    /// it binds to a value rebuilt from one (`let s = dev.upgrade_device_ptr(p, n);`).
    pub(crate) raw_taken: FxHashSet<String>,
    /// Addresses of the expressions the function turns into raw pointers
    /// (`Box::leak(b) as *mut T`, `NonNull::from(..)`).
    pub(crate) raw_casts: FxHashSet<usize>,
    /// Addresses of the expressions whose value the function returns.
    pub(crate) returned: FxHashSet<usize>,
    /// `ManuallyDrop::new(..)` calls initializing a struct literal's field: (struct, field).
    pub(crate) manually_drop_fields: FxHashMap<usize, (String, String)>,
    /// `ManuallyDrop::new(..)` calls bound by a `let`: the binding.
    pub(crate) manually_drop_lets: FxHashMap<usize, String>,
    /// What the function moves back out of (or drops in) a binding: the whole (`None`) or
    /// fields.
    pub(crate) moved_out: FxHashMap<String, FxHashSet<Option<String>>>,
    /// The function runs on burn's or dfdx's CPU backend (it names `NdArray` or dfdx's `Cpu`
    /// and no other backend): its burn and dfdx tensors are in host memory.
    pub(crate) cpu_backend: bool,
    /// The address of the function's body: its key in [`Callers`].
    pub(crate) body: usize,
    /// How many debug switches (`if DEBUG { .. }`, `if tracing::enabled!(..) { .. }`, the
    /// rest of a block after `if !DEBUG { return; }`) or guards that never hold (`if index
    /// == -1 { .. }`) guard the code: there its callers' loops are not counted.
    pub(crate) debugging: usize,
    /// Locals bound to a debug switch (`let debug = std::env::var_os("X").is_some();`).
    pub(crate) switches: FxHashSet<String>,
    /// Locals bound to a non-negative integer literal (`let mut index = 0;`).
    pub(crate) from_zero: FxHashSet<String>,
}

/// A binding that refers into a `&mut` parameter's contents.
#[derive(Debug, Clone)]
pub(crate) struct ParamPlace {
    /// The binding's name.
    pub(crate) alias: String,
    /// The parameter's name (`self` included).
    pub(crate) param: String,
    /// It was given by a call of a function the file does not declare (`let t =
    /// slot_of(out)`): only a store through `*alias` shows that it is a reference.
    pub(crate) deref_only: bool,
}

/// The file's functions' callers: which of their loops repeat each function, computed
/// (from what `walk/calls/` gathers of the file, through the function the walker hands over,
/// and `callgraph`'s resolution) the first time a rule asks.
pub(crate) struct Callers<'i> {
    /// The file walked, where the entry point has one.
    pub(crate) file: Option<&'i syn::File>,
    /// The file is linted as one of a crate's: reads that its own loops and callers do not
    /// repeat are left for the callers in the crate's other files (`Sink::defer`).
    pub(crate) package: bool,
    compute: CallersOf,
    calls: OnceCell<FileCallsOf>,
    by_body: OnceCell<FxHashMap<usize, CalledIn>>,
}

/// What a file defines and calls ([`FileCalls`]), with the address of each function's body
/// (0 for none), by the function's index.
#[derive(Debug, Default)]
pub(crate) struct FileCallsOf {
    pub(crate) calls: FileCalls,
    pub(crate) bodies: Vec<usize>,
}

/// Gathers a file's [`FileCallsOf`] with what it declares.
pub(crate) type CallersOf = fn(&syn::File, &FileIndex) -> FileCallsOf;

impl Callers<'_> {
    pub(crate) fn new(compute: CallersOf) -> Self {
        Callers {
            file: None,
            package: false,
            compute,
            calls: OnceCell::new(),
            by_body: OnceCell::new(),
        }
    }

    /// What the file defines and calls, gathered once.
    pub(crate) fn calls(&self, index: &FileIndex) -> Option<&FileCallsOf> {
        let file = self.file?;
        Some(self.calls.get_or_init(|| (self.compute)(file, index)))
    }

    /// [`calls`](Callers::calls), taken.
    pub(crate) fn take_calls(mut self, index: &FileIndex) -> FileCallsOf {
        self.calls(index);
        self.calls.take().unwrap_or_default()
    }
}

/// Whether the code is repeated: by its own loops or its callers' in the file (`Now`, with
/// the call, as [`Cx::repeated`] gives it), or maybe by callers in the crate's other files
/// (`Later`, with how many loops its own function runs it in).
pub(crate) enum Fate<'c> {
    Now(Option<&'c CalledIn>),
    Later(usize),
}

/// The context of the expression a rule checks.
pub(crate) struct Cx<'i> {
    /// Bindings, types, and inference.
    pub(crate) env: Env<'i>,
    /// The function's state.
    pub(crate) f: FnState,
    /// The callers of the file's functions.
    pub(crate) callers: Callers<'i>,
}

impl<'i> Cx<'i> {
    /// What the file declares.
    pub(crate) fn index(&self) -> &'i FileIndex {
        self.env.types.index()
    }

    /// The tensor libraries the file uses.
    pub(crate) fn used(&self) -> &'i Used {
        &self.index().used
    }

    /// What `e`'s value is.
    pub(crate) fn value(&self, e: &Expr) -> Value {
        self.env.infer(e)
    }

    /// How many of the enclosing loops (`for`, `while`, `loop`, and `.for_each(|..| ..)`
    /// bodies) repeat the code: those with no guard around it that
    /// lets only a bounded number of their iterations through (`if n < 6 { .. }`, `n`
    /// counting the loop's iterations).
    pub(crate) fn hot_loop_depth(&self) -> usize {
        self.f.loops.iter().filter(|l| l.bounded == 0).count()
    }

    /// Whether at least two loops repeat the code: `Some(None)` when its function's own
    /// loops do, `Some(Some(call))` when they do counting those of the function's callers
    /// in the file ([`CalledIn`], not under a debug switch, which runs only while
    /// debugging), `None` otherwise. Callers are looked for only when the own loops are
    /// not enough: ask once the rest of a finding is known.
    pub(crate) fn repeated(&self) -> Option<Option<&CalledIn>> {
        let own = self.hot_loop_depth();
        if own >= 2 {
            return Some(None);
        }
        if self.f.debugging > 0 {
            return None;
        }
        let by_body = self.callers.by_body.get_or_init(|| {
            let Some(of) = self.callers.calls(self.index()) else {
                return FxHashMap::default();
            };
            called_in_file(&of.calls)
                .into_iter()
                .zip(&of.bodies)
                .filter_map(|(called, &body)| Some((body, called?)))
                .filter(|&(body, _)| body != 0)
                .collect()
        });
        let called = by_body.get(&self.f.body)?;
        (own + called.loops >= 2).then_some(Some(called))
    }

    /// [`repeated`](Cx::repeated), and where it is not, whether callers in the crate's other
    /// files may repeat the code: when the file is linted as one of a crate's, and the code
    /// is not under a debug switch.
    pub(crate) fn fate(&self) -> Option<Fate<'_>> {
        if let Some(via) = self.repeated() {
            return Some(Fate::Now(via));
        }
        (self.callers.package && self.f.debugging == 0).then(|| Fate::Later(self.hot_loop_depth()))
    }

    pub(crate) fn in_loop(&self) -> bool {
        !self.f.loops.is_empty()
    }

    /// Whether the code runs once per process: in `fn main`, outside its loops. What it
    /// stores in a static or forgets lives no longer than `main`'s own locals.
    pub(crate) fn runs_once(&self) -> bool {
        self.f.main && !self.in_loop()
    }

    /// The loops that `name` outlives: those entered after its binding (all of them for a
    /// name bound outside every loop, or not bound in this function), outermost first.
    pub(crate) fn loops_outlived_by(&self, name: &str) -> &[LoopFrame] {
        match self.f.loops.iter().rposition(|l| l.names.contains(name)) {
            Some(i) => &self.f.loops[i + 1..],
            None => &self.f.loops,
        }
    }

    /// When `root` (the root of a method chain or place) names a static that may hold device
    /// memory, or a binding aliasing one: the static's name and whether its declared type
    /// holds device memory for sure. A static is one declared in the file whose type is not
    /// host data, or an undeclared SCREAMING_CASE path that is not a `const`.
    pub(crate) fn static_target(&self, root: &Expr) -> Option<(String, bool)> {
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
                return self.static_target_named(target);
            }
            if self.env.binding(&name).is_some() {
                return None;
            }
        }
        self.static_target_named(&name)
    }

    fn static_target_named(&self, name: &str) -> Option<(String, bool)> {
        if self.index().released_statics.contains(name) {
            return None;
        }
        match self.index().statics.get(name) {
            // A pool that empties itself (`OnceLock<MemoryPool>`, `MemoryPool::clear`).
            Some(Some(ty)) if self.index().is_self_releasing(ty) => None,
            Some(Some(ty)) => match self.env.types.kind(ty) {
                Kind::Host => None,
                kind => Some((name.to_owned(), kind == Kind::Device)),
            },
            Some(None) => Some((name.to_owned(), false)),
            None if self.index().consts.contains(name) => None,
            None => is_screaming_case(name).then(|| (name.to_owned(), false)),
        }
    }
}

/// The first and last token spans of a syntax node, as `syn::Error::new_spanned` takes
/// them: a diagnostic can underline all of it, also in a procedural macro where spans
/// cannot be joined.
pub(crate) fn span_range(node: &impl ToTokens) -> (Span, Span) {
    let mut tokens = node.to_token_stream().into_iter();
    let Some(first) = tokens.next() else {
        return (Span::call_site(), Span::call_site());
    };
    let start = first.span();
    let end = tokens.last().map_or(start, |t| t.span());
    (start, end)
}

/// Collects findings at the levels in force where they are: the base levels, changed by
/// the allow/warn/deny attributes of the items, functions and statements around.
pub(crate) struct Sink {
    levels: Vec<Levels>,
    findings: Vec<Finding>,
    deferred: Vec<Deferred>,
}

/// A finding that callers in a crate's other files may make ([`Fate::Later`]): kept with
/// what decides it, until those files are linted.
pub(crate) struct Deferred {
    pub(crate) rule: &'static str,
    /// Its level where it is.
    pub(crate) level: Level,
    pub(crate) span: (Span, Span),
    /// The body of the function holding it (its [`FnState::body`]).
    pub(crate) body: usize,
    /// The loops of its own function that repeat it.
    pub(crate) own: usize,
    pub(crate) texts: Texts,
}

/// A deferred finding's message, help and note, given the call that repeats it.
pub(crate) type Texts = Box<dyn Fn(&CalledIn) -> (String, String, Option<String>) + Send>;

impl Sink {
    pub(crate) fn new(levels: &Levels) -> Self {
        Sink {
            levels: vec![levels.clone()],
            findings: Vec::new(),
            deferred: Vec::new(),
        }
    }

    fn current(&self) -> &Levels {
        self.levels
            .last()
            .expect("the base levels are never popped")
    }

    /// Whether `rule` is on here (not `allow`): rules with costly checks ask first.
    pub(crate) fn enabled(&self, rule: &Rule) -> bool {
        self.current().of(rule) != Level::Allow
    }

    /// Whether the rule at `index` of [`RULES`](crate::RULES) (and of
    /// [`CHECKS`](crate::rules::CHECKS), in the same order) is on here: what the walker asks
    /// for every expression, without comparing names.
    pub(crate) fn enabled_at(&self, index: usize) -> bool {
        self.current().at(index) != Level::Allow
    }

    /// Whether every rule is off here.
    pub(crate) fn all_allowed(&self) -> bool {
        self.current().all_allowed()
    }

    /// Makes `overrides` the levels in force until [`pop`](Sink::pop).
    pub(crate) fn push(&mut self, overrides: &[(&'static Rule, Level)]) {
        let mut levels = self.current().clone();
        for (rule, level) in overrides {
            // Names were checked when the attribute was read.
            let _ = levels.set(rule.name, *level);
        }
        self.levels.push(levels);
    }

    /// Ends the levels of the matching [`push`](Sink::push).
    pub(crate) fn pop(&mut self) {
        if self.levels.len() > 1 {
            self.levels.pop();
        }
    }

    /// Reports `rule` over the syntax node `at`, unless the rule is at `allow` here.
    pub(crate) fn emit(
        &mut self,
        rule: &Rule,
        at: &impl ToTokens,
        message: String,
        help: String,
        note: Option<String>,
    ) {
        let (span, end) = span_range(at);
        self.emit_spans(rule, (span, end), message, help, note);
    }

    /// Reports `rule` from `span.0` to `span.1`, unless the rule is at `allow` here.
    pub(crate) fn emit_spans(
        &mut self,
        rule: &Rule,
        (span, end): (Span, Span),
        message: String,
        help: String,
        note: Option<String>,
    ) {
        let level = self.current().of(rule);
        if level != Level::Allow {
            self.findings.push(Finding {
                rule: rule.name,
                level,
                span,
                end,
                message,
                help,
                note,
            });
        }
    }

    /// Keeps a finding of `rule` over `at` for the callers in the crate's other files to
    /// decide (the code in function `body`, repeated by `own` loops there), unless the rule
    /// is at `allow` here.
    pub(crate) fn defer(
        &mut self,
        rule: &Rule,
        at: &impl ToTokens,
        (body, own): (usize, usize),
        texts: Texts,
    ) {
        let level = self.current().of(rule);
        if level != Level::Allow {
            self.deferred.push(Deferred {
                rule: rule.name,
                level,
                span: span_range(at),
                body,
                own,
                texts,
            });
        }
    }

    /// Reports a problem that is not a rule's (an attribute naming an unknown rule), as an
    /// error whatever the levels.
    pub(crate) fn error(&mut self, rule: &'static str, span: Span, message: String, help: String) {
        self.findings.push(Finding {
            rule,
            level: Level::Deny,
            span,
            end: span,
            message,
            help,
            note: None,
        });
    }

    /// The findings, ordered by source position (stable: equal positions keep visiting order).
    /// How many findings there are so far.
    pub(crate) fn count(&self) -> usize {
        self.findings.len()
    }

    pub(crate) fn into_findings(self) -> Vec<Finding> {
        self.into_parts().0
    }

    /// The findings, ordered as [`into_findings`](Sink::into_findings) orders them, and the
    /// deferred ones.
    pub(crate) fn into_parts(self) -> (Vec<Finding>, Vec<Deferred>) {
        let mut findings = self.findings;
        findings.sort_by_key(|f| {
            let start = f.span.start();
            (start.line, start.column)
        });
        (findings, self.deferred)
    }
}
