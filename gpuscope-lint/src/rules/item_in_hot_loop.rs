//! `item_in_hot_loop` (allow): a read of device values to the host (`.item()`,
//! candle's `to_scalar`, burn's `into_scalar`, tch's `double_value`, ...) inside an inner
//! loop.

use syn::Expr;

use crate::check::{Check, Trigger};
use crate::context::{Cx, Sink};
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
  waits for, and is reported.
"#;

/// Reads whose name is also a method of ordinary types: reported only with a turbofish
/// or on a value known to hold device memory.
const COMMON_NAMES: &[&str] = &["to_vec", "array", "as_vec", "to_data"];

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
            Trigger::Part("from"),
        ])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        if cx.loop_depth() < 2 {
            return;
        }
        if let Expr::Call(call) = e {
            return conversion(call, e, cx, sink);
        }
        let Expr::MethodCall(call) = e else { return };
        if let Some(read) = data_read_by_its_use(call, cx) {
            return emit(read, sink);
        }
        let method = call.method.to_string();
        if !cx.used().is_device_read(&method) || (method == "item" && !call.args.is_empty()) {
            return;
        }
        let value = cx.value(&call.receiver);
        let kind = value.kind;
        if kind == Kind::Host
            || on_the_cpu(&call.receiver, &value, cx)
            || (COMMON_NAMES.contains(&method.as_str())
                && call.turbofish.is_none()
                && kind != Kind::Device)
        {
            return;
        }
        emit(call, sink);
    }
}

/// Reports the read `call` (a method call to the host) in an inner loop.
fn emit(call: &syn::ExprMethodCall, sink: &mut Sink) {
    let method = call.method.to_string();
    let value = show(&call.receiver);
    let args = if call.args.is_empty() { "" } else { ".." };
    sink.emit(
        &RULE,
        call,
        format!("`{value}.{method}({args})` in an inner loop copies to the host and waits for the device on every iteration"),
        format!("keep the values on the device (sum `.detach()`ed tensors) and call `.{method}({args})` once after the inner loop"),
        None,
    );
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
    let shown = format!("{}::{conv}({})", show_type(segments), show(arg));
    sink.emit(
        &RULE,
        e,
        format!("`{shown}` in an inner loop copies to the host and waits for the device on every iteration"),
        "keep the values on the device (sum `.detach()`ed tensors) and convert once after the inner loop".to_owned(),
        None,
    );
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
mod tests {
    use crate::testing::hits;

    const RULE: &str = "item_in_hot_loop";

    #[test]
    fn fires_in_inner_loops() {
        let src = r#"
fn f(data: &[Vec<Batch>], model: &Model) {
    for epoch in data {
        for batch in epoch {
            log(model.loss(batch).item());
        }
        epoch.iter().for_each(|b| log(model.loss(b).item()));
    }
}
"#;
        assert_eq!(hits(RULE, src), [(5, 17), (7, 39)]);
    }

    #[test]
    fn outer_loops_and_other_items_do_not_fire() {
        let src = r#"
fn f(data: &[Batch], model: &Model, map: &HashMap<u8, u8>) {
    for batch in data {
        log(model.loss(batch).item());
        for k in 0..3 {
            let v = map.item(k);
        }
    }
    let last = model.loss(&data[0]).item();
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn other_libraries_reads_fire_where_the_file_uses_them() {
        let candle = r#"
use candle_core::Tensor;
fn f(epochs: usize, xs: &[Tensor], rows: &[Vec<f32>]) -> candle_core::Result<f32> {
    let mut total = 0.0;
    for _ in 0..epochs {
        for x in xs {
            total += x.sum_all()?.to_scalar::<f32>()?;
            let v = x.to_vec1::<f32>()?;
        }
        for r in rows {
            let copy = r.to_vec();
        }
    }
    Ok(total)
}
"#;
        assert_eq!(hits(RULE, candle), [(7, 22), (8, 21)]);
        let burn = r#"
use burn::tensor::Tensor;
fn f<B: Backend>(epochs: usize, xs: &[Tensor<B, 2>]) {
    for _ in 0..epochs {
        for x in xs {
            log(x.clone().sum().into_scalar());
        }
    }
}
"#;
        assert_eq!(hits(RULE, burn), [(6, 17)]);
        let tch = r#"
use tch::Tensor;
fn f(epochs: usize, xs: &[Tensor]) {
    for _ in 0..epochs {
        xs.iter().for_each(|x| log(x.sum(tch::Kind::Float).double_value(&[])));
    }
}
"#;
        assert_eq!(hits(RULE, tch), [(5, 36)]);
        let found = crate::testing::findings(RULE, tch);
        assert!(
            found[0]
                .message
                .starts_with("`x.sum(..).double_value(..)` in an inner loop"),
            "{}",
            found[0].message
        );
        let conversions = r#"
use tch::Tensor;
fn f(epochs: usize, xs: &[Tensor], ns: &[i32]) {
    for _ in 0..epochs {
        for x in xs {
            let a = f64::try_from(&x.sum(tch::Kind::Float)).unwrap();
            let v = Vec::<f32>::try_from(x).unwrap();
        }
        for n in ns {
            let b = f64::from(*n);
        }
    }
}
"#;
        assert_eq!(hits(RULE, conversions), [(6, 21), (7, 21)]);
        let found = crate::testing::findings(RULE, conversions);
        assert!(
            found[1].message.starts_with("`Vec::<..>::try_from(x)`"),
            "{}",
            found[1].message
        );
        // Only tch converts tensors that way.
        assert_eq!(
            hits(
                RULE,
                &conversions
                    .replace("use tch::Tensor;", "use candle_core::Tensor;")
                    .replace("tch::Kind::Float", "0")
            ),
            []
        );
        // candle's read is not a method of tch's tensors.
        let not_tch = tch.replace("double_value(&[])", "to_scalar::<f64>()");
        assert_eq!(hits(RULE, &not_tch), []);
    }

    #[test]
    fn burn_to_data_of_a_field_of_unknown_type_is_a_read_by_its_typed_getter() {
        // `parts` comes from another file: its fields' types are not known here, but
        // `to_data().to_vec::<f32>()` is burn's `TensorData`, so `to_data()` reads a tensor.
        let src = r#"
use burn::tensor::Tensor;
use crate::loss::compute_losses;
fn f<B: Backend>(epochs: usize, batches: &[Batch], names: &Names) {
    for _ in 0..epochs {
        for b in batches {
            let parts = compute_losses::<B>(b);
            let a = parts.actor_loss.to_data().to_vec::<f32>().unwrap();
            let v = parts.value_loss.to_data().iter::<f32>().next();
            let t = parts.entropy.to_data().try_to_vec::<f32>().unwrap();
            let n = names.to_data().to_vec();
            let s = names.to_data().len();
        }
    }
    let last = compute_losses::<B>(&batches[0]).actor_loss.to_data().to_vec::<f32>();
}
"#;
        assert_eq!(hits(RULE, src), [(8, 21), (9, 21), (10, 21)]);
        let found = crate::testing::findings(RULE, src);
        assert!(
            found[0]
                .message
                .starts_with("`parts.actor_loss.to_data()` in an inner loop"),
            "{}",
            found[0].message
        );
        // A tensor known as one is reported once, at its `to_data()`.
        let typed = src.replace("parts.value_loss", "t").replace(
            "let parts = compute_losses::<B>(b);",
            "let parts = compute_losses::<B>(b); let t: Tensor<B, 1> = b.x();",
        );
        assert_eq!(hits(RULE, &typed), [(8, 21), (9, 21), (10, 21)]);
        // Only burn's tensors give a `TensorData`.
        let candle = src.replace("use burn::tensor::Tensor;", "use candle_core::Tensor;");
        assert_eq!(hits(RULE, &candle), []);
    }

    #[test]
    fn reads_of_tensors_on_the_cpu_wait_for_no_device() {
        // Embeddings copied back to the host and compared pairwise on the CPU (as an
        // embedding crate's examples do): no device to wait for.
        let src = r#"
use candle_core::{Device, Tensor};
fn test_device() -> Device {
    Device::Cpu
}
fn f(rows: Vec<f32>, n: usize, d: usize, w: &Tensor) -> candle_core::Result<f32> {
    let embeddings = Tensor::from_vec(rows.clone(), (n, d), &Device::Cpu)?;
    let device = Device::Cpu;
    let local = Tensor::new(rows.as_slice(), &device)?.reshape((n, d))?;
    let helper = Tensor::new(rows.as_slice(), &test_device())?;
    let mut total = 0.0;
    for i in 0..n {
        let e_i = embeddings.get(i)?;
        for j in (i + 1)..n {
            let e_j = embeddings.get(j)?;
            total += (&e_i * &e_j)?.sum_all()?.to_scalar::<f32>()?;
            total += local.get(j)?.sum_all()?.to_scalar::<f32>()?;
            total += (helper.get(j)? * 2.0)?.to_vec0::<f32>()?;
            total += (&e_j * w)?.sum_all()?.to_scalar::<f32>()?;
        }
    }
    Ok(total)
}
"#;
        // Only the product with `w`, a parameter that may be elsewhere, is reported.
        assert_eq!(hits(RULE, src), [(19, 22)]);
        // The same loops on the model's device wait for it at every read.
        let gpu = src
            .replace("&Device::Cpu)", "&Device::new_cuda(0)?)")
            .replace(
                "let device = Device::Cpu;",
                "let device = Device::new_cuda(0)?;",
            )
            .replace("    Device::Cpu\n", "    Device::new_cuda(0).unwrap()\n");
        assert_eq!(hits(RULE, &gpu), [(16, 22), (17, 22), (18, 22), (19, 22)]);
        // A move to the CPU in the read's own expression is the copy the read waits for;
        // a copy made once before the loops is read there for free.
        let moved = r#"
use candle_core::{Device, Tensor};
fn f(xs: &[Tensor], n: usize) -> candle_core::Result<()> {
    let host = xs[0].to_device(&Device::Cpu)?;
    for x in xs {
        for i in 0..n {
            let a = x.get(i)?.to_device(&Device::Cpu)?.to_vec1::<f32>()?;
            let b = host.get(i)?.to_vec1::<f32>()?;
        }
    }
    Ok(())
}
"#;
        assert_eq!(hits(RULE, moved), [(7, 21)]);
        // tch's `(Kind, Device::Cpu)` constants: its conversions and reads likewise.
        let tch = r#"
use tch::{kind::FLOAT_CPU, Kind, Tensor};
fn f(steps: usize, envs: usize, rewards: &Tensor) {
    let sums = Tensor::zeros([envs as i64], FLOAT_CPU);
    for _ in 0..steps {
        for e in 0..envs {
            let a = f64::try_from(sums.get(e as i64)).unwrap();
            let b = sums.sum(Kind::Float).double_value(&[]);
            let c = f64::try_from(rewards.get(e as i64)).unwrap();
        }
    }
}
"#;
        assert_eq!(hits(RULE, tch), [(9, 21)]);
        // `Device::Cpu` is candle's and tch's: in a file on burn it names nothing known.
        let burn = r#"
use burn::tensor::Tensor;
fn f<B: Backend>(epochs: usize, xs: &[Tensor<B, 1>]) {
    for _ in 0..epochs {
        for x in xs {
            let y = x.clone().to_device(&Device::Cpu);
            log(y.into_scalar());
        }
    }
}
"#;
        assert_eq!(hits(RULE, burn), [(7, 17)]);
    }

    #[test]
    fn gpuscope_to_vec_needs_a_turbofish_or_a_tensor() {
        let src = r#"
use gpuscope::Tensor;
fn f(epochs: usize, xs: &[Tensor], names: &[String]) {
    for _ in 0..epochs {
        for x in xs {
            let a = x.to_vec::<f32>();
            let t = Tensor::zeros(&[2], &dev).unwrap();
            let b: Vec<f32> = t.to_vec().unwrap();
            let c = names.to_vec();
        }
    }
}
"#;
        assert_eq!(hits(RULE, src), [(6, 21), (8, 31)]);
    }

    #[test]
    fn the_triggers_cover_every_librarys_reads() {
        use crate::check::{Check, Trigger};
        let parts: Vec<&str> = super::ItemInHotLoop
            .triggers()
            .unwrap()
            .iter()
            .map(|t| match t {
                Trigger::Part(p) => *p,
                other => panic!("{other:?}"),
            })
            .collect();
        for framework in crate::frameworks::ALL {
            for read in framework.device_reads {
                assert!(
                    parts.iter().any(|p| read.contains(p)),
                    "{}: `{read}` has no trigger",
                    framework.name
                );
            }
        }
    }
}
