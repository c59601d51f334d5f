//! `scope_escape` (warn): a tensor made inside a `#[gpu_scope]` function stored into a
//! container that outlives the scope (a `&mut` argument, a field of `self`).

use syn::Expr;

use crate::check::{Check, Trigger};
use crate::context::{Cx, Sink};
use crate::infer::Kind;
use crate::syntax::{chain_root, ident_of, is_wrapper_path, path_names, show, strip};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "scope_escape",
    default: Level::Warn,
    summary: "a tensor made in a `#[gpu_scope]` and stored in a `&mut` argument or a field of `self` outlives the scope",
    docs: DOCS,
};

const DOCS: &str = r#"## `scope_escape`

Default level: **warn**.

### What it does
Inside a `#[gpu_scope]` function, finds a tensor made in the function (by a constructor or
an op, or a clone of one) stored into a container that outlives the scope: pushed or
inserted (`push`, `push_back`, `insert`, `extend`, `append`, `set`, a map's
`entry(k).or_insert` and `or_insert_with`) into a `&mut` argument
(`history: &mut Vec<Tensor>`) or a field of `self` (`self.cache.push(t)`), or assigned to
one (`self.last = Some(t)`, `*out = t`), also through a place inside such an argument
(`if let Some(t) = out.as_mut() { *t = .. }`, `for s in self.slots.iter_mut() { *s = .. }`),
including one a call returns (`let s = slot_for(out, i); *s = ..`, where the file declares
`slot_for` to return a `&mut`, or does not declare it).
Statics are `static_escape`'s. A tensor handed to `gpuscope::keep(&t)` in the function does
not fire.

### Why is this bad
The scope tracks every tensor the function makes and reports, at exit, those still alive
that were not returned: this one will be reported as leaked (or panic with
`leaks = "deny"`), and if the container is long-lived its memory stays with it.

### Example
```rust
#[gpu_scope]
fn collect(dev: &Device, history: &mut Vec<Tensor>) -> Result<(), TensorError> {
    let activation = Tensor::ones(&[256, 256], dev)?;
    history.push(activation.clone());
    Ok(())
}
```
Use instead:
```rust
#[gpu_scope]
fn collect(dev: &Device, history: &mut Vec<Tensor>) -> Result<(), TensorError> {
    let activation = Tensor::ones(&[256, 256], dev)?;
    gpuscope::keep(&activation); // on purpose: it now belongs to the caller's scope
    history.push(activation.clone());
    Ok(())
}
```

### Known problems
- Only tensors known to be made in the function are reported: a value from an unknown
  call is not.
- Containers reached through other references (a `&mut` field of a local struct) are not
  followed.
- A local that a function declared in another file returns from a `&mut` argument is
  followed only for a store through `*` (`*s = t`): `s.push(t)` could be into a copy.
"#;

/// Methods that store their argument into their receiver (`or_insert` into the map of
/// `map.entry(k)`, `or_insert_with` what its closure returns; `append` moves the elements
/// of the `&mut` collection it is given).
const STORING: &[&str] = &[
    "push",
    "push_back",
    "push_front",
    "insert",
    "extend",
    "append",
    "set",
    "replace",
    "or_insert",
    "or_insert_with",
];

/// The rule's checks.
pub(crate) struct ScopeEscape;

impl Check for ScopeEscape {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // Only inside a `#[gpu_scope]` function.
        Some(&[Trigger::Part("gpu_scope")])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        if !cx.f.scoped {
            return;
        }
        let (target, values): (&Expr, Vec<&Expr>) = match e {
            Expr::Assign(a) => (&a.left, vec![&*a.right]),
            Expr::MethodCall(m) if STORING.iter().any(|s| m.method == s) => {
                let target = match strip(&m.receiver) {
                    Expr::MethodCall(entry)
                        if (m.method == "or_insert" || m.method == "or_insert_with")
                            && entry.method == "entry" =>
                    {
                        &entry.receiver
                    }
                    _ => &m.receiver,
                };
                let values = m.args.iter().map(|a| match strip(a) {
                    // `all.append(&mut local)`: the elements move out of `local`.
                    stripped if m.method == "append" => stripped,
                    // `entry(k).or_insert_with(|| t)`: what the closure returns is stored.
                    Expr::Closure(c) if m.method == "or_insert_with" => &*c.body,
                    _ => a,
                });
                (target, values.collect())
            }
            _ => return,
        };
        let Some(container) = outliving_container(target, matches!(e, Expr::Assign(_)), cx) else {
            return;
        };
        let Some(value) = values.into_iter().find(|v| {
            let value = cx.value(v);
            value.kind == Kind::Device && value.fresh && !value.borrowed && !kept(v, cx)
        }) else {
            return;
        };
        let tensor = unwrapped(value);
        let shown = show(tensor);
        // `keep` takes the tensor that is stored: a name, or a value bound to one first
        // (`keep(&t.relu())` would keep another tensor).
        let how = match strip(without_clone(tensor)) {
            Expr::Path(p) if p.path.get_ident().is_some() => format!(
                "call `gpuscope::keep(&{})` before storing it",
                show(without_clone(tensor))
            ),
            _ => "bind it to a name first (`let kept = ...;`), call `gpuscope::keep(&kept)` and store `kept`".to_owned(),
        };
        sink.emit(
            &RULE,
            e,
            format!("`{shown}` is made in this `#[gpu_scope]` and stored in `{container}`, which outlives the scope: the scope reports it as leaked"),
            "return it to the caller instead of storing it, or make it in the caller".to_owned(),
            Some(format!("to keep it on purpose, {how} (it then belongs to the caller's scope), or allow the rule: `#[gpuscope::lints::allow(scope_escape)]`")),
        );
    }
}

/// When `target` is rooted at a parameter passed by `&mut`, or at a field of `self`: its
/// text. `assign` is whether it is assigned to (then `*param` and `self.field` count, a
/// parameter itself does not).
fn outliving_container(target: &Expr, assign: bool, cx: &Cx<'_>) -> Option<String> {
    let root = chain_root(target);
    let ident = ident_of(root)?;
    let name = ident.to_string();
    let binding = cx.env.binding(&name)?;
    let through_place = !std::ptr::eq(strip(target), strip(root));
    if ident == "self" {
        // `self.cache.push(t)`, `self.last = t`: a field of the receiver.
        return through_place.then(|| show(strip(target)));
    }
    if let Some(place) = cx.f.param_places.iter().rev().find(|p| p.alias == name) {
        // `*t = ..` where `t` refers into a `&mut` parameter (`out.as_mut()`); where a call
        // of an unknown function gave `t`, only `*t = ..` shows that it is a reference.
        let stored = if place.deref_only {
            assign && is_deref_of(target, root)
        } else {
            through_place || !assign
        };
        return stored.then(|| place.param.clone());
    }
    if !cx.f.params.contains(&name) || !binding.mutable {
        return None;
    }
    if assign && !through_place {
        return None;
    }
    Some(show(strip(target)))
}

/// Whether `target` is `*root`.
fn is_deref_of(target: &Expr, root: &Expr) -> bool {
    matches!(strip(target), Expr::Unary(syn::ExprUnary { op: syn::UnOp::Deref(_), expr, .. })
        if std::ptr::eq(strip(expr), strip(root)))
}

/// The tensor in a stored value: `t` in `Some(t)`, `Ok(t)`, `Box::new(t)`, `[t]`, `t?`.
fn unwrapped(value: &Expr) -> &Expr {
    match strip(value) {
        Expr::Call(call) if wraps(call) => unwrapped(&call.args[0]),
        Expr::Array(a) if a.elems.len() == 1 => unwrapped(&a.elems[0]),
        Expr::Try(t) => unwrapped(&t.expr),
        other => other,
    }
}

/// Whether `call` wraps its one argument (`Some(t)`, `Ok(t)`, `Box::new(t)`), so that the
/// tensor stored is the argument; a function's or a closure's result (`double(x)`) is a
/// tensor of its own.
fn wraps(call: &syn::ExprCall) -> bool {
    let Expr::Path(p) = strip(&call.func) else {
        return false;
    };
    call.args.len() == 1 && is_wrapper_path(&path_names(&p.path))
}

/// `t` for `t.clone()`.
fn without_clone(e: &Expr) -> &Expr {
    match strip(e) {
        Expr::MethodCall(m) if m.method == "clone" => strip(&m.receiver),
        other => other,
    }
}

/// Whether the value stored is a binding given to `keep(&x)` in the function.
fn kept(value: &Expr, cx: &Cx<'_>) -> bool {
    let mut e = strip(value);
    loop {
        e = match e {
            Expr::MethodCall(m) if m.method == "clone" => strip(&m.receiver),
            Expr::Call(call) if wraps(call) => strip(&call.args[0]),
            _ => break,
        };
    }
    ident_of(e).is_some_and(|ident| cx.f.kept.contains(&ident.to_string()))
}

#[cfg(test)]
mod tests {
    use crate::testing::{findings, hits};

    const RULE: &str = "scope_escape";

    #[test]
    fn follows_a_local_that_a_call_returns_into_a_mut_parameter() {
        let src = r#"
use gpuscope::{Tensor, TensorError, gpu_scope};
struct Slots { items: Vec<Tensor> }
fn slot_of(slots: &mut Slots, i: usize) -> &mut Tensor { &mut slots.items[i] }
fn count(slots: &mut Slots) -> usize { slots.items.len() }
impl Slots {
    fn slot_mut(&mut self, i: usize) -> Option<&mut Tensor> { self.items.get_mut(i) }
    fn snapshot(&mut self) -> Vec<Tensor> { self.items.clone() }
}
#[gpu_scope]
fn fill(x: &Tensor, slots: &mut Slots, out: &mut Vec<Tensor>) -> Result<(), TensorError> {
    let t = slot_of(slots, 0);
    *t = x.relu()?;
    let u = helper::first(out)?;
    *u = x.exp()?;
    let w = slots.slot_mut(1).unwrap();
    *w = x.abs()?;
    let v = helper::rows(out);
    v.push(x.sqrt()?);
    let mut s = slots.snapshot();
    s.push(x.neg()?);
    let n = count(slots);
    let b = Box::new(out);
    Ok(())
}
"#;
        assert_eq!(hits(RULE, src), [(13, 5), (15, 5), (17, 5)]);
        let found = findings(RULE, src);
        assert!(
            found[0].message.ends_with(
                "stored in `slots`, which outlives the scope: the scope reports it as leaked"
            ),
            "{}",
            found[0].message
        );
        assert!(
            found[1].message.contains("stored in `out`"),
            "{}",
            found[1].message
        );
        // Rebinding the local stores nothing into the parameter.
        let rebound = src.replace("*t = x.relu()?;", "let t = x.relu()?;");
        assert_eq!(hits(RULE, &rebound), [(15, 5), (17, 5)]);
    }

    #[test]
    fn fires_on_tensors_stored_into_mut_arguments_and_self_fields() {
        let src = r#"
use gpuscope::{Device, Tensor, TensorError, gpu_scope};
struct Trainer { cache: Vec<Tensor>, last: Option<Tensor> }
impl Trainer {
    #[gpu_scope]
    fn step(&mut self, x: &Tensor, history: &mut Vec<Tensor>, out: &mut Tensor) -> Result<(), TensorError> {
        let h = x.relu()?;
        history.push(h.clone());
        self.cache.push(x.matmul(x)?);
        self.last = Some(h.clone());
        *out = Tensor::zeros(&[1], &x.device())?;
        Ok(())
    }
}
"#;
        assert_eq!(hits(RULE, src), [(8, 9), (9, 9), (10, 9), (11, 9)]);
        let first = &findings(RULE, src)[0];
        assert_eq!(
            first.message,
            "`h.clone()` is made in this `#[gpu_scope]` and stored in `history`, which outlives the scope: the scope reports it as leaked"
        );
        assert!(
            first
                .note
                .as_deref()
                .unwrap()
                .contains("gpuscope::keep(&h)")
        );
        // A value that is not a name is bound to one before `keep` can take it.
        let second = &findings(RULE, src)[1];
        let note = second.note.as_deref().unwrap();
        assert!(
            note.contains("bind it to a name first") && !note.contains("keep(&x.matmul"),
            "{note}"
        );
        let third = &findings(RULE, src)[2];
        assert!(
            third.message.starts_with("`h.clone()` is made"),
            "{}",
            third.message
        );
    }

    #[test]
    fn kept_values_parameters_locals_and_unscoped_functions_do_not_fire() {
        let src = r#"
use gpuscope::{Tensor, TensorError, gpu_scope, keep};
#[gpu_scope]
fn kept(x: &Tensor, history: &mut Vec<Tensor>) -> Result<(), TensorError> {
    let h = x.relu()?;
    keep(&h);
    history.push(h.clone());
    history.push(x.clone());
    let mut local = Vec::new();
    local.push(x.relu()?);
    let mut names: Vec<String> = Vec::new();
    names.push(format!("{}", 1));
    Ok(())
}
fn unscoped(x: &Tensor, history: &mut Vec<Tensor>) {
    history.push(x.relu().unwrap());
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn fires_on_map_entries_and_appended_collections() {
        let src = r#"
use gpuscope::{Device, Tensor, TensorError, gpu_scope};
use std::collections::HashMap;
#[gpu_scope]
fn fill(x: &Tensor, m: &mut HashMap<u32, Tensor>, all: &mut Vec<Tensor>, dev: &Device) -> Result<(), TensorError> {
    m.entry(1).or_insert(Tensor::ones(&[1], dev)?);
    m.entry(3).or_insert_with(|| x.relu().unwrap());
    let mut made = vec![x.relu()?];
    all.append(&mut made);
    let mut local: HashMap<u32, Tensor> = HashMap::new();
    local.entry(2).or_insert(x.relu()?);
    let mut kept_here = Vec::new();
    kept_here.append(&mut vec![x.relu()?]);
    Ok(())
}
"#;
        assert_eq!(hits(RULE, src), [(6, 5), (7, 5), (9, 5)]);
        let first = &findings(RULE, src)[0];
        assert!(first.message.contains("stored in `m`"), "{}", first.message);
    }

    #[test]
    fn fires_through_places_inside_mut_parameters() {
        let src = r#"
use gpuscope::{Tensor, TensorError, gpu_scope};
#[gpu_scope]
fn fill(x: &Tensor, out: &mut Option<Tensor>, slots: &mut [Tensor], all: &mut Vec<Vec<Tensor>>) -> Result<(), TensorError> {
    if let Some(t) = out.as_mut() {
        *t = x.relu()?;
    }
    for s in slots.iter_mut() {
        *s = x.relu()?;
    }
    let last = all.last_mut().unwrap();
    last.push(x.relu()?);
    let mut local = vec![x.relu()?];
    for l in local.iter_mut() {
        *l = x.relu()?;
    }
    if let Some(t) = out.as_mut() {
        let t = x.relu()?;
        drop(t);
    }
    Ok(())
}
"#;
        assert_eq!(hits(RULE, src), [(6, 9), (9, 9), (12, 5)]);
        let first = &findings(RULE, src)[0];
        assert!(
            first.message.contains("stored in `out`"),
            "{}",
            first.message
        );
        // The same through `&mut self`'s fields; a `&self` method cannot store.
        let methods = r#"
use gpuscope::{Tensor, TensorError, gpu_scope};
struct Model { items: Vec<Tensor> }
impl Model {
    #[gpu_scope]
    fn refresh(&mut self, x: &Tensor) -> Result<(), TensorError> {
        for t in self.items.iter_mut() {
            *t = x.relu()?;
        }
        Ok(())
    }
    #[gpu_scope]
    fn look(&self, x: &Tensor) -> Result<usize, TensorError> {
        for t in self.items.iter() {
            let _ = t.add(x)?;
        }
        Ok(self.items.len())
    }
}
"#;
        assert_eq!(hits(RULE, methods), [(8, 13)]);
    }

    #[test]
    fn fires_on_what_a_local_closure_returns() {
        // A new user's helper closure: its calls make tensors as its body does.
        let src = r#"
use gpuscope::{Tensor, TensorError, gpu_scope};
#[gpu_scope]
fn leaky(x: &Tensor, keep: &mut Vec<Tensor>, sizes: &mut Vec<usize>) -> Result<(), TensorError> {
    let double = |t: &Tensor| t.add(t);
    keep.push(double(x)?);
    let size = |t: &Tensor| t.numel();
    sizes.push(size(x));
    // Bound again, to a closure of host values: its calls are host values.
    let double = |t: &Tensor| t.numel() * 2;
    sizes.push(double(x));
    Ok(())
}
"#;
        assert_eq!(hits(RULE, src), [(6, 5)]);
        // What is stored is the closure's result, not its argument.
        let found = &findings(RULE, src)[0];
        assert!(
            found.message.starts_with("`double(..)` is made"),
            "{}",
            found.message
        );
    }
}
