//! `item_in_hot_loop` (allow): a read of device values to the host (`.item()`,
//! candle's `to_scalar`, burn's `into_scalar`, tch's `double_value`, ...) inside an inner
//! loop.

use syn::Expr;

use crate::check::{Check, Trigger};
use crate::context::{CalledIn, Cx, Fate, Sink};
use crate::frameworks::Used;
use crate::infer::{Kind, MOVES, Value};
use crate::syntax::show;
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "item_in_hot_loop",
    default: Level::Allow,
    summary: "`.item()` or another read to the host in an inner loop synchronizes with the device on every iteration",
    docs: DOCS,
};

const DOCS: &str = r#"## `item_in_hot_loop`

Default level: **allow** (it costs time, not memory).

### What it does
Finds reads of device values to the host inside an inner loop (a loop nested in another
loop, including `.for_each(|..| ..)` bodies): `.item()` (gpuscope, tch), `to_vec::<T>()`
and `to_f64_vec()` (gpuscope), `to_scalar`, `to_vec0` to `to_vec3` (candle),
`into_scalar`, `into_data`, `to_data` and their `_async` forms (burn), `double_value`,
`int64_value` (tch),
`array`, `as_vec` (dfdx), `dtoh_sync_copy`, `memcpy_dtov`, `clone_dtoh` (cudarc),
`read_one` (CubeCL), and tch's conversions of a tensor into a number or a `Vec`
(`f64::try_from(&t)`, `Vec::<f32>::try_from(&t)`, `f32::from(&t)`), each for the libraries
the file names (all of them where it names none).

Loops of the callers count too, in the same file and, where `gpuscope lint` lints a crate's
files together, in its other files: a read in a helper that a loop calls
(`fn train_on_batch(..) { .. loss.to_vec0::<f32>()? .. }` called every batch of every epoch,
or a `clip_gradients` reading each parameter's norm in its own loop and called once per
step by a training loop in `main.rs`) is reported at the read, once, with a note naming the
call and where it is. Loops add up along calls (up to four deep), so a read repeated by any
two loops is found.

### Why is this bad
Each call copies a value to the host and waits for the device to finish everything queued
before it, on every iteration of the innermost loop: the GPU idles while the host waits.

### Example
```rust
fn per_sample(model: &Model, batches: &[Vec<Tensor>]) -> Vec<f32> {
    let mut out = Vec::new();
    for batch in batches {
        for x in batch {
            out.push(model.forward(x).sum().item());
        }
    }
    out
}
```
Use instead:
```rust
fn per_sample(model: &Model, batches: &[Vec<Tensor>]) -> Vec<f32> {
    let mut out = Vec::new();
    for batch in batches {
        let sums: Vec<Tensor> = batch.iter().map(|x| model.forward(x).sum()).collect();
        out.extend(Tensor::stack(&sums).to_vec());
    }
    out
}
```

### Known problems
- A training loop that logs its loss every step (`for epoch { for batch { .. loss.item() } }`)
  is an inner loop: enable the rule where step time matters.
- A conversion is reported only when its argument is known to be a tensor (a parameter,
  `let` or field of a tensor type, or a tensor op's result); gpuscope's `to_vec` only with a turbofish (`to_vec::<f32>()`) or on a value
  known to be a tensor, since slices have a `to_vec` too; burn's `to_data()` likewise, or where
  its result is read with an element-typed getter (`x.to_data().to_vec::<f32>()`), which only
  burn's `TensorData` has.
- A read of a tensor known to be on the CPU is not reported, since it waits for no device:
  one made on candle's or tch's `Device::Cpu` (or tch's `FLOAT_CPU`, ..), named directly,
  through a local or by a function of the file that returns it, or computed from such
  tensors (`let e = t.get(i)?; (&e * &e)?.sum_all()?.to_scalar::<f32>()`). A move to the
  CPU in the read's own expression (`x.to_device(&Device::Cpu)?.to_vec1()`) is the copy it
  waits for, and is reported. burn's tensors carry their backend in their type: a read of
  one is not reported in a function that names burn's CPU backend (`NdArray`,
  `NdArrayDevice`, or an alias of the file for one, `type B = Autodiff<NdArray>;`), names
  no other backend and is not generic (nor in a generic impl), as a test on `NdArray` is;
  likewise dfdx's CPU device (`Cpu`; `AutoDevice` is neither, a cargo feature decides it).
  A tensor that such a function gets from a call whose backend the file does not show
  (a model loaded by another module's code on a GPU backend) is taken to be there too. A
  function generic over the backend (a type parameter of its own or of its impl or trait
  bounded by burn's `Backend` or `AutodiffBackend`, or dfdx's `Device`) that such a function
  calls runs there on the CPU: the call passes none of its loops on (an episode loop on
  `QNet<Autodiff<NdArray>>` calling `impl<B: Backend> QNet<B>`'s `sample_action` every
  step), in the file and across it. The generic function's own loops still count, since
  which backend its code runs on shows only at its callers.
- A read under a guard that lets only a bounded number of a loop's iterations through
  (`if n < 6 { .. }`, `if i == 0 { .. }`, the bound a literal of at most 64 or a
  constant, `n` the loop's range or `enumerate` index or a local its body advances by a
  literal each time) does not count that loop: logging the first tokens of a generation is
  not reported. `if step % 100 == 0` still is (it repeats, if less often), and so is
  `if step < 1000` (a thousand waits); a constant's value is not read, so
  `if step < WARMUP` is taken as a bound, whatever `WARMUP` is. A block that `break`s out
  of the innermost loop (and does not `continue` it first) runs once per run of that loop,
  which it therefore does not count either (`Converged(l) => { log(l.to_scalar()?); break; }`).
  A guard that never holds, a counter bound to a non-negative literal (`let mut index = 0;`)
  and advanced by a literal compared equal to a negative one (`if index == -1 { .. }`, a
  print switched off), counts as a debug switch (below).
- Callers are followed in the file and in the other files of its crate (the files
  `gpuscope lint` is given of one package: `src/lib.rs` and `src/main.rs` with the modules
  their `mod` declarations reach, each `src/bin/`, `tests/`, `examples/` and `benches/`
  crate, the library reached from those by its name), and calls are resolved by name. In
  the file: `helper(..)` where the file defines one function of that name, `self.name(..)`,
  `Self::name(..)` and `Type::name(..)` to the one method of that name in the file's impls
  of the type, and `x.name(..)` where `x`'s type shows in the file (a parameter or field of
  that type, `let x = Type::new(..)`, a tuple variant's field bound by a pattern,
  `Inner::Gpu(net)`, behind `Box`, `Rc` or `Arc`) or `x` is named as the type is
  (`trainer` for `Trainer`). Across files: `helper(..)` defined in the caller's module, or
  brought in by a `use` of it or a glob import (`use crate::optim::*`), `module::helper(..)`
  through the module path (`crate::`, `super::`, a `use`d module, a child module), and
  methods as in the file, of a type the caller's file defines or imports from the package (a
  type of another crate with the same name, `candle_nn::Linear`, is not followed); a name the
  crate defines twice at the same path is not followed, nor is a file no `mod` declaration
  reaches. A trait method called on a value of another type or through a generic, a closure
  stored and called later, a function passed as a value, a function calling itself, and a
  crate that is not the package's are not followed. A loop over an array literal, a
  constant (`for t in TEMPERATURES.iter()`) or a range to a literal of at most 64 does not
  count around a call (parameter sweeps and retries), nor does a loop that spawns a thread
  or task running the call (`spawn`, `spawn_blocking`, ..). A read under a debug switch
  (`if DEBUG && ..`, `if tracing::enabled!(..)`, `if VERBOSE.load(..)`, an environment
  variable read, `is_enabled()`, or a local bound to one of those; also the rest of a block
  after `if !tracing::enabled!(..) { return; }`, an exit of no work unless the switch is on)
  counts only its own function's loops, and a call under one passes no loops on. A method of
  a constant other than a flag's read (`FOLDABLE_OPS.contains(..)`, not `DEBUG.load(..)`)
  is no switch. A retry loop of another shape
  (`loop { match train(..) { Ok(m) => break m, .. } }`, `for attempt in 0..MAX_ATTEMPTS`)
  counts as a loop, and a read of a tensor that another function put on the CPU is
  reported, as it is in the loop itself: across files, a CPU-only evaluator (an ONNX
  interpreter making its constants on `Device::Cpu`) repeated by loops of its callers is
  reported.
- Macros' tokens are read only for the format and logging macros, whose arguments are
  expressions: every argument of `println!`, `print!`, `eprintln!`, `format!`, `write!`,
  `writeln!`, `dbg!` and of `log`'s and `tracing`'s `info!`, `warn!`, `error!`, `event!`
  (their `target:`, `field =` and `%`/`?` syntax stepped over); the condition of `assert!`
  and `ensure!` and the two sides of `assert_eq!`/`assert_ne!`, not their messages. The
  arguments of `debug!`, `trace!` and `debug_assert!` count as under a debug switch, and
  `panic!`'s, `bail!`'s and other macros' are not read: a read in a macro of a crate's own
  (`my_log!(..)`) is not reported.
"#;

/// Reads whose name is also a method of ordinary types: reported only with a turbofish
/// or on a value known to hold device memory.
const COMMON_NAMES: &[&str] = &["to_vec", "array", "as_vec", "to_data", "copy_to"];

/// The rule's checks.
pub(crate) struct ItemInHotLoop;

impl Check for ItemInHotLoop {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // Parts of every library's `device_reads` (checked by a test).
        Some(&[
            Trigger::Part("item"),
            Trigger::Part("to_vec"),
            Trigger::Part("to_f64_vec"),
            Trigger::Part("to_scalar"),
            Trigger::Part("into_scalar"),
            Trigger::Part("into_data"),
            Trigger::Part("to_data"),
            Trigger::Part("double_value"),
            Trigger::Part("int64_value"),
            Trigger::Part("array"),
            Trigger::Part("as_vec"),
            Trigger::Part("dtoh"),
            Trigger::Part("dtov"),
            Trigger::Part("read_one"),
            Trigger::Part("copy_to"),
            Trigger::Part("from"),
        ])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        if cx.hot_loop_depth() < 2 && cx.callers.file.is_none() {
            return;
        }
        if let Expr::Call(call) = e {
            return conversion(call, e, cx, sink);
        }
        let Expr::MethodCall(call) = e else { return };
        if let Some(read) = data_read_by_its_use(call, cx) {
            // Loops last: the callers' are looked for only for a read.
            if let Some(fate) = (!cx.f.cpu_backend).then(|| cx.fate()).flatten() {
                emit(read, fate, cx, sink);
            }
            return;
        }
        let method = call.method.to_string();
        if !cx.used().is_device_read(&method) || (method == "item" && !call.args.is_empty()) {
            return;
        }
        let value = cx.value(&call.receiver);
        let kind = value.kind;
        if kind == Kind::Host
            || on_the_cpu(&call.receiver, &value, cx)
            || (cx.f.cpu_backend && Used::is_typed_backend_read(&method))
            || (COMMON_NAMES.contains(&method.as_str())
                && call.turbofish.is_none()
                && kind != Kind::Device)
        {
            return;
        }
        if let Some(fate) = cx.fate() {
            emit(call, fate, cx, sink);
        }
    }
}

/// Reports the read `call` (a method call to the host) in an inner loop, or in a function
/// that a call in an inner loop repeats (`fate`).
fn emit(call: &syn::ExprMethodCall, fate: Fate<'_>, cx: &Cx<'_>, sink: &mut Sink) {
    let method = call.method.to_string();
    let value = show(&call.receiver);
    let args = if call.args.is_empty() { "" } else { ".." };
    let read = format!("`{value}.{method}({args})`");
    let once = format!("call `.{method}({args})` once after the inner loop");
    report(call, read, once, fate, cx, sink);
}

/// Reports the read `at`, shown `read`, `once` saying how to read once instead: now, where
/// its loops or its callers' in the file repeat it, or once the callers in the crate's
/// other files are known.
fn report(
    at: &impl quote::ToTokens,
    read: String,
    once: String,
    fate: Fate<'_>,
    cx: &Cx<'_>,
    sink: &mut Sink,
) {
    match fate {
        Fate::Now(via) => {
            let (message, help, note) = texts(&read, &once, via);
            sink.emit(&RULE, at, message, help, note);
        }
        Fate::Later(own) => {
            let texts = Box::new(move |via: &CalledIn| texts(&read, &once, Some(via)));
            sink.defer(&RULE, at, (cx.f.body, own), texts);
        }
    }
}

/// The message, help and note of a finding on `read` (shown), `once` saying how to read
/// once instead, `via` the call repeating it where its own function's loops do not.
fn texts(read: &str, once: &str, via: Option<&CalledIn>) -> (String, String, Option<String>) {
    let help = format!("keep the values on the device (sum `.detach()`ed tensors) and {once}");
    let Some(via) = via else {
        let message = format!(
            "{read} in an inner loop copies to the host and waits for the device on every iteration"
        );
        return (message, help, None);
    };
    let message = format!(
        "{read} runs in an inner loop through `{}` ({}): it copies to the host and waits for the device on every iteration",
        via.call,
        via.place()
    );
    let plural = |n: usize| if n == 1 { "loop" } else { "loops" };
    let repeat = |n: usize| if n == 1 { "repeats" } else { "repeat" };
    let (around, more) = (via.around_call, via.caller_loops);
    let mut note = format!(
        "`{}` at {} (in `{}`) calls this function",
        via.call,
        via.place(),
        via.caller
    );
    if around > 0 {
        note.push_str(&format!(" inside {around} {}", plural(around)));
    }
    match (around, more) {
        (_, 0) => note.push_str(&format!(" that {} it", repeat(around))),
        (0, _) => note.push_str(&format!(
            ", and `{}` is itself called inside {more} {} that {} it",
            via.caller,
            plural(more),
            repeat(more)
        )),
        _ => note.push_str(&format!(
            ", and `{}` is itself called inside {more} more",
            via.caller
        )),
    }
    if let Some((call, place)) = &via.by {
        note.push_str(&format!(" (through `{call}` at {place})"));
    }
    (message, help, Some(note))
}

/// Whether `e` (of value `value`) is known to be on the CPU already, so that reading it
/// waits for no device. A move to the CPU in `e` itself (`x.to_device(&Device::Cpu)?`) is the
/// copy from the device that the read waits for: not known to be there already.
fn on_the_cpu(mut e: &Expr, value: &Value, cx: &Cx<'_>) -> bool {
    if !value.on_cpu {
        return false;
    }
    loop {
        e = match e {
            Expr::MethodCall(m) => {
                if MOVES.iter().any(|mv| m.method == mv) && !cx.value(&m.receiver).on_cpu {
                    return false;
                }
                &m.receiver
            }
            Expr::Try(t) => &t.expr,
            Expr::Paren(p) => &p.expr,
            Expr::Group(g) => &g.expr,
            Expr::Reference(r) => &r.expr,
            _ => return true,
        };
    }
}

/// burn's `TensorData` getters, generic over the element type: `x.to_data().to_vec::<f32>()`
/// (and burn 0.22's `try_` forms, which return a `Result`).
const TENSOR_DATA_GETTERS: &[&str] = &[
    "to_vec",
    "into_vec",
    "as_slice",
    "iter",
    "try_to_vec",
    "try_into_vec",
    "try_to_vec_as",
    "try_into_vec_as",
];

/// The `to_data()` in `x.to_data().to_vec::<f32>()` where `x`'s type is not known in the
/// file (a field of a struct from another file): the element-typed getter on its result
/// is burn's `TensorData`, so `x` is a tensor and `to_data()` its read.
fn data_read_by_its_use<'a>(
    call: &'a syn::ExprMethodCall,
    cx: &Cx<'_>,
) -> Option<&'a syn::ExprMethodCall> {
    if call.turbofish.is_none() || !TENSOR_DATA_GETTERS.iter().any(|g| call.method == g) {
        return None;
    }
    let Expr::MethodCall(inner) = &*call.receiver else {
        return None;
    };
    let unknown = matches!(cx.value(&inner.receiver).kind, Kind::Host | Kind::Device);
    (inner.method == "to_data"
        && inner.args.is_empty()
        && cx.used().is_device_read("to_data")
        && !unknown)
        .then_some(inner)
}

/// Host types a tensor converts into (tch's `TryFrom<&Tensor>` and `From<&Tensor>`).
const HOST_TARGETS: &[&str] = &["f64", "f32", "i64", "i32", "i16", "i8", "u8", "bool", "Vec"];

/// `f64::try_from(&t)`, `Vec::<f32>::try_from(t)`, `f32::from(&t)` on a tensor.
fn conversion(call: &syn::ExprCall, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
    let Expr::Path(func) = &*call.func else {
        return;
    };
    let segments = &func.path.segments;
    let n = segments.len();
    if n < 2 || call.args.len() != 1 || !cx.used().conversions_read() {
        return;
    }
    let (target, conv) = (&segments[n - 2].ident, &segments[n - 1].ident);
    if !(conv == "try_from" || conv == "from") || !HOST_TARGETS.iter().any(|t| target == t) {
        return;
    }
    let mut arg = &call.args[0];
    while let Expr::Reference(r) = arg {
        arg = &r.expr;
    }
    let value = cx.value(arg);
    if value.kind != Kind::Device || on_the_cpu(arg, &value, cx) {
        return;
    }
    let Some(fate) = cx.fate() else { return };
    let shown = format!("`{}::{conv}({})`", show_type(segments), show(arg));
    let once = "convert once after the inner loop".to_owned();
    report(e, shown, once, fate, cx, sink);
}

/// The type of a conversion's path, `f64` or `Vec::<f32>`.
fn show_type(segments: &syn::punctuated::Punctuated<syn::PathSegment, syn::Token![::]>) -> String {
    let target = &segments[segments.len() - 2];
    match &target.arguments {
        syn::PathArguments::None => target.ident.to_string(),
        _ => format!("{}::<..>", target.ident),
    }
}

#[cfg(test)]
mod tests;
