//! `out_of_place_update` (allow): `x = x + y` and the like where `x` is the same place on
//! both sides.

use syn::{BinOp, Expr};

use crate::check::Check;
use crate::context::{Cx, Sink};
use crate::infer::Kind;
use crate::syntax::{same_place, show, strip, unwrapped};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "out_of_place_update",
    default: Level::Allow,
    summary: "`x = x + y` allocates a new tensor where `x.add_(&y)` would update in place",
    docs: DOCS,
};

const DOCS: &str = r#"## `out_of_place_update`

Default level: **allow** (in-place updates are wrong where autograd needs the old value).

### What it does
Finds `x = x + y`, `x = x.add(&y)?`, `x = &x * &y` and the like, where `x` is the same place
on both sides, one side is known to be a tensor and neither is known to be host data
(`i = i + 1` and bindings of number types do not fire).

### Why is this bad
Each update allocates a new tensor and frees the old one, where an in-place `x.add_(&y)`
reuses `x`'s memory: in a hot loop that is an allocation per iteration and twice the peak
memory of `x`.

### Example
```rust
fn sgd(mut weight: Tensor, grads: &[Tensor]) -> Tensor {
    for grad in grads {
        weight = weight - grad;
    }
    weight
}
```
Use instead:
```rust
fn sgd(weight: Tensor, grads: &[Tensor]) -> Tensor {
    for grad in grads {
        weight.sub_(grad);
    }
    weight
}
```

### Known problems
- It cannot tell whether autograd needs the old value: an in-place update of a tensor saved
  for backward makes `backward()` fail (gpuscope refuses it).
- It fires only where the tensors have in-place arithmetic (gpuscope, tch, neuronika, or no
  library named): in candle, burn or dfdx code there is no in-place update to suggest. A file
  naming no library that imports a tensor type from its own crate (`use crate::tensor::Tensor`)
  or from another crate (`use rwkv::custom::Tensor`, burn re-exported) has a tensor whose
  in-place methods it does not know: it does not fire there.
"#;

/// The rule's checks.
pub(crate) struct OutOfPlaceUpdate;

impl Check for OutOfPlaceUpdate {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        let Expr::Assign(assign) = e else { return };
        // Without in-place arithmetic (candle, burn, dfdx) there is nothing to suggest.
        if !cx.used().in_place_ops() || own_tensor_type(cx) {
            return;
        }
        let target = &assign.left;
        // (in-place method, how the update is written, the other operand)
        let (op, written, other) = match unwrapped(strip(&assign.right)) {
            Expr::Binary(b) => {
                let (op, symbol) = match b.op {
                    BinOp::Add(_) => ("add", "+"),
                    BinOp::Sub(_) => ("sub", "-"),
                    BinOp::Mul(_) => ("mul", "*"),
                    BinOp::Div(_) => ("div", "/"),
                    _ => return,
                };
                let other = if same_place(&b.left, target) {
                    &*b.right
                } else if (op == "add" || op == "mul") && same_place(&b.right, target) {
                    &*b.left
                } else {
                    return;
                };
                (op, format!("{{place}} {symbol} {}", show(other)), other)
            }
            Expr::MethodCall(m) if m.args.len() == 1 && same_place(&m.receiver, target) => {
                let op = match m.method.to_string().as_str() {
                    "add" => "add",
                    "sub" => "sub",
                    "mul" => "mul",
                    "div" => "div",
                    _ => return,
                };
                (
                    op,
                    format!("{{place}}.{op}({})", show(&m.args[0])),
                    &m.args[0],
                )
            }
            _ => return,
        };
        // Pedantic as it is, the rule still wants a tensor on one side.
        let (place_kind, other_kind) = (cx.value(target).kind, cx.value(other).kind);
        if place_kind == Kind::Host
            || other_kind == Kind::Host
            || (place_kind != Kind::Device && other_kind != Kind::Device)
        {
            return;
        }
        let place = show(strip(target));
        let operand = show(strip(other));
        sink.emit(
            &RULE,
            e,
            format!("`{place} = {}` allocates a new tensor for every update and frees the old one", written.replace("{place}", &place)),
            format!("update in place: `{place}.{op}_(&{operand})` (only where autograd does not need the old value)"),
            None,
        );
    }
}

/// Whether a file naming no library imports a tensor type from its own crate
/// (`use crate::tensor::Tensor`) or from another crate (`use rwkv::custom::Tensor`, burn's
/// re-exported): that crate's tensor, whose in-place methods (if any) the lint does not
/// know, rather than gpuscope's. (A file importing from gpuscope or a library the lint
/// knows names that library.)
fn own_tensor_type(cx: &Cx<'_>) -> bool {
    let used = cx.used();
    let index = cx.index();
    used.is_empty()
        && index
            .local_imports
            .iter()
            .chain(index.imports.values().map(|(_, name)| name))
            .any(|name| used.type_kind(None, name) == Some(true))
}

#[cfg(test)]
mod tests {
    use crate::testing::{findings, hits};

    const RULE: &str = "out_of_place_update";

    #[test]
    fn fires_when_enabled_on_same_place_updates() {
        let src = r#"
fn update(w: Tensor, g: &Tensor, lr: &Tensor) {
    let mut w = w;
    w = w - g;
    w = &w * lr;
    w = w.add(&g);
    self.weight = &self.weight - &(g * lr);
    w = g + w;
}
"#;
        assert_eq!(hits(RULE, src), [(4, 5), (5, 5), (6, 5), (7, 5), (8, 5)]);
        let all = findings(RULE, src);
        assert!(
            all[2].message.starts_with("`w = w.add(&g)` allocates"),
            "{}",
            all[2].message
        );
        let f = &all[0];
        assert_eq!(
            f.message,
            "`w = w - g` allocates a new tensor for every update and frees the old one"
        );
        assert!(
            f.help.starts_with("update in place: `w.sub_(&g)`"),
            "{}",
            f.help
        );
    }

    #[test]
    fn sees_through_question_mark_and_unwrap() {
        let src = r#"
fn update(w: Tensor, g: &Tensor) -> Result<(), TensorError> {
    let mut w = w;
    w = w.add(g)?;
    w = w.mul(g).unwrap();
    w = g.add(g)?;
    Ok(())
}
"#;
        assert_eq!(hits(RULE, src), [(4, 5), (5, 5)]);
    }

    #[test]
    fn quiet_where_the_library_has_no_in_place_arithmetic() {
        // candle's residual connections (seen in vllm.rs and Crane): candle tensors have no
        // `add_` to suggest. tch's do.
        let candle = r#"
use candle_core::{Result, Tensor};
fn block(xs: &Tensor, residual: &Tensor) -> Result<Tensor> {
    let mut xs = xs.clone();
    xs = (xs + residual)?;
    Ok(xs)
}
"#;
        assert_eq!(hits(RULE, candle), []);
        let tch = r#"
use tch::Tensor;
fn block(xs: &Tensor, residual: &Tensor) -> Tensor {
    let mut xs = xs.shallow_clone();
    xs = xs + residual;
    xs
}
"#;
        assert_eq!(hits(RULE, tch), [(5, 5)]);
    }

    #[test]
    fn quiet_on_a_crate_s_own_tensor_type() {
        // femtoGPT averages gradients into its own host tensor (`Tensor<f32>`, a `Vec` and a
        // shape, imported from `crate::tensor`): it has no `add_` to suggest.
        let own = r#"
use crate::tensor::{Tensor, TensorError};
fn average(grads: &[Tensor<f32>]) -> Result<Tensor<f32>, TensorError> {
    let mut avg = Tensor::<f32>::scalar(0.);
    for g in grads {
        avg = (&avg + g)?;
    }
    Ok(avg)
}
"#;
        assert_eq!(hits(RULE, own), []);
        // Imported from elsewhere, or with no import at all, `Tensor` is gpuscope's.
        for header in ["use gpuscope::Tensor;", "use crate::data::Batch;", ""] {
            let src = own.replace("use crate::tensor::{Tensor, TensorError};", header);
            assert_eq!(hits(RULE, &src), [(6, 9)], "{header}");
        }
    }

    #[test]
    fn quiet_on_a_tensor_type_another_crate_re_exports() {
        // rwkv-rs sums a burn tensor of per-paragraph losses for one `backward`, with burn
        // re-exported as `rwkv::custom` (`pub use burn::*`): the file names no library, and
        // burn's tensors have no `add_` to suggest.
        let reexported = r#"
use rwkv::custom::{Tensor, tensor::backend::Backend};
fn total<B: Backend>(losses: Vec<Tensor<B, 1>>, device: &B::Device) -> Tensor<B, 1> {
    let mut sum_loss: Tensor<B, 1> = Tensor::zeros([1], device);
    for loss in losses {
        sum_loss = sum_loss + loss.mul_scalar(2);
    }
    sum_loss
}
"#;
        assert_eq!(hits(RULE, reexported), []);
        let renamed = reexported.replace(
            "use rwkv::custom::{Tensor, tensor::backend::Backend};",
            "use rwkv::custom::{Tensor as T, tensor::backend::Backend};",
        );
        assert_eq!(hits(RULE, &renamed), []);
        // Imported from gpuscope or tch, or importing no tensor type, it still fires.
        for header in [
            "use gpuscope::Tensor;",
            "use tch::Tensor;",
            "use rwkv::custom::tensor::backend::Backend;",
        ] {
            let src = reexported.replace(
                "use rwkv::custom::{Tensor, tensor::backend::Backend};",
                header,
            );
            assert_eq!(hits(RULE, &src), [(6, 9)], "{header}");
        }
    }

    #[test]
    fn off_by_default() {
        let file: syn::File =
            syn::parse_str("fn f(mut w: Tensor, g: Tensor) { w = w - g; }").unwrap();
        assert!(crate::lint_file(&file, &crate::Levels::default()).is_empty());
    }

    #[test]
    fn different_places_literals_and_numbers_do_not_fire() {
        let src = r#"
fn update(x: Tensor, y: Tensor, z: Tensor, mut n: usize) {
    let mut x = x;
    x = y + z;
    x = y - x;
    let mut i = 0;
    i = i + 1;
    x = x * 2.0;
    n = n + n;
    x = x.matmul(&y);
    x += y;
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
