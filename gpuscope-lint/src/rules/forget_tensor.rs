//! `forget_tensor` (deny): `mem::forget`, `ManuallyDrop::new`, `Box::leak` or `Vec::leak`
//! of a value known to own device memory.

use syn::Expr;

use crate::check::{Check, Trigger};
use crate::context::{Cx, Sink};
use crate::infer::Kind;
use crate::syntax::{callee_path, ident_of, path_ends_with, rebuilt_from_raw, show, strip};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "forget_tensor",
    default: Level::Deny,
    summary: "`mem::forget`, `ManuallyDrop::new` or `Box::leak` of a value that owns GPU memory",
    docs: DOCS,
};

const DOCS: &str = r#"## `forget_tensor`

Default level: **deny**.

### What it does
Finds `std::mem::forget(x)`, `ManuallyDrop::new(x)`, `Box::leak(x)` and `Vec::leak(x)` where
`x` is known to own device memory: a tensor or a device buffer of a supported library
(gpuscope, candle, burn, tch, dfdx, cudarc, cust, CubeCL's `Handle`, neuronika), a value
of a struct of the file holding one, or the result of a tensor constructor or op.

### Why is this bad
A forgotten value's destructor never runs, so its device memory never goes back to the
allocator: it stays reserved until the process exits, and a `#[gpu_scope]` around the call
cannot free it either.

### Example
```rust
fn features(x: &Tensor) -> Tensor {
    let hidden = x.matmul(&x.t());
    let out = hidden.relu();
    std::mem::forget(hidden);
    out
}
```
Use instead:
```rust
fn features(x: &Tensor) -> Tensor {
    let hidden = x.matmul(&x.t());
    let out = hidden.relu();
    drop(hidden);
    out
}
```

### Known problems
- Code in `fn main` outside its loops does not fire: what it forgets lives no longer than
  `main`'s own locals.
- Values whose type is not known (a type of another file, a type parameter) are not
  reported: the rule prefers silence.
- Handing ownership over is not a leak and is not reported: forgetting `self` (or a value of
  the `impl`'s own type) inside its `impl`, forgetting a value after taking its raw pointer
  (`as_ptr`, `device_ptr`, `into_raw`, ...), a `Box::leak` whose result becomes a raw pointer
  (`as *mut _`), values rebuilt from raw pointers (`Arc::from_raw`, `ptr::read`, cudarc's
  `upgrade_device_ptr`; also once bound by a `let`), a forget inside a type's own
  `Drop::drop` (it chooses what of its value it frees, as a non-owning view does), and a
  `ManuallyDrop` the function returns (the caller decides whether it drops).
- Nor is a `ManuallyDrop` released elsewhere: one stored in a field that the struct's
  `impl Drop` in the same file releases (`ManuallyDrop::take(&mut self.f)`, `drop`,
  `into_inner`), or one the function drops, takes back out (`ManuallyDrop::into_inner`,
  `ptr::read(&md)`) or takes apart with a `ptr::read` of every field holding device memory.
  A `Drop` in another file is not seen: such a field is still reported.
"#;

/// The rule's checks.
pub(crate) struct ForgetTensor;

impl Check for ForgetTensor {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // Calls of `mem::forget` (or an imported `forget`), `ManuallyDrop::new`, `Box::leak`,
        // `Vec::leak`.
        Some(&[
            Trigger::Part("forget"),
            Trigger::Part("manuallydrop"),
            Trigger::Part("leak"),
        ])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        let Expr::Call(call) = e else { return };
        let Some(path) = callee_path(call) else {
            return;
        };
        let what = if path_ends_with(path, &["mem", "forget"])
            || (cx.index().forget_imported && path.is_ident("forget"))
        {
            "mem::forget"
        } else if path_ends_with(path, &["ManuallyDrop", "new"]) {
            "ManuallyDrop::new"
        } else if path_ends_with(path, &["Box", "leak"]) {
            "Box::leak"
        } else if path_ends_with(path, &["Vec", "leak"]) {
            "Vec::leak"
        } else {
            return;
        };
        let Some(arg) = call.args.first() else { return };
        if cx.runs_once() || !cx.value(arg).owns_device_memory() || hands_over(e, arg, cx) {
            return;
        }
        // A type's own destructor forgetting what its value holds chooses not to free memory
        // the value does not own (a non-owning view's slice): not a leak.
        if what == "mem::forget" && cx.f.destructor {
            return;
        }
        // A `ManuallyDrop` the function returns is the caller's to drop or keep; one stored in
        // a field that its struct's `Drop` releases is that destructor's; one whose contents
        // the function takes back out is not leaked.
        if what == "ManuallyDrop::new" && manually_drop_released(e, arg, cx) {
            return;
        }
        let value = show(arg);
        let scope = if cx.f.scoped {
            "; the enclosing `#[gpu_scope]` cannot free it either"
        } else {
            ""
        };
        let (message, help) = match what {
            "mem::forget" => (
                format!("`{what}({value})` leaks `{value}`: its destructor never runs, so its GPU memory is never freed{scope}"),
                format!("let `{value}` drop (or call `drop({value})`); to hand it on, return it or move it into its owner"),
            ),
            "ManuallyDrop::new" => (
                format!("`{what}({value})` never drops `{value}` unless `ManuallyDrop::drop` is called: its GPU memory leaks{scope}"),
                format!("keep `{value}` as a plain value and let it drop; if it must outlive this function, return it"),
            ),
            _ => (
                format!("`{what}({value})` leaks `{value}` for the rest of the program: its GPU memory is never freed{scope}"),
                "return the value, or store it in an owner that drops it (a struct field, a bounded cache)".to_owned(),
            ),
        };
        sink.emit(&RULE, e, message, help, None);
    }
}

/// Whether the `ManuallyDrop::new(arg)` call `call` is released elsewhere: returned (the
/// caller's to drop or keep), the value of a field that the struct's `impl Drop` in this
/// file releases (`ManuallyDrop::take(&mut self.f)`), or bound by a `let` whose contents the
/// function takes back out (`ManuallyDrop::into_inner(md)`, `ManuallyDrop::drop(&mut md)`),
/// or whose fields holding device memory it moves out one by one (`ptr::read(&md.f)`).
fn manually_drop_released(call: &Expr, arg: &Expr, cx: &Cx<'_>) -> bool {
    let at = std::ptr::from_ref(call) as usize;
    if cx.f.returned.contains(&at) {
        return true;
    }
    if let Some((ty, field)) = cx.f.manually_drop_fields.get(&at) {
        let ty = if ty == "Self" {
            cx.env
                .types
                .self_ty()
                .and_then(|t| cx.env.types.info(t).name)
        } else {
            Some(ty.clone())
        };
        if ty.is_some_and(|ty| cx.index().drop_released.contains(&(ty, field.clone()))) {
            return true;
        }
    }
    let Some(moved) =
        cx.f.manually_drop_lets
            .get(&at)
            .and_then(|name| cx.f.moved_out.get(name))
    else {
        return false;
    };
    if moved.contains(&None) {
        return true;
    }
    // Taken apart field by field: every field that holds device memory must be moved out.
    let Some(adt) = cx.value(arg).name.and_then(|n| cx.index().adts.get(&n)) else {
        return false;
    };
    adt.fields.iter().enumerate().all(|(i, (name, ty))| {
        let name = name.clone().unwrap_or_else(|| i.to_string());
        cx.env.types.kind(ty) != Kind::Device || moved.contains(&Some(name))
    })
}

/// Whether forgetting `arg` hands its memory over rather than leaking it: `self` or a
/// value of the `impl`'s own type, a value whose raw pointer the function took, or a value
/// rebuilt from a raw pointer.
fn hands_over(call: &Expr, arg: &Expr, cx: &Cx<'_>) -> bool {
    if cx
        .f
        .raw_casts
        .contains(&(std::ptr::from_ref(call) as usize))
    {
        return true;
    }
    let inner = match strip(arg) {
        // `Box::leak(Box::new(x))`: what is boxed.
        Expr::Call(call)
            if callee_path(call).is_some_and(|p| path_ends_with(p, &["Box", "new"])) =>
        {
            call.args.first().map_or(arg, |a| a)
        }
        _ => arg,
    };
    if rebuilt_from_raw(inner) {
        return true;
    }
    let Some(ident) = ident_of(inner) else {
        return false;
    };
    if ident == "self" {
        return true;
    }
    let name = ident.to_string();
    let self_name = cx
        .env
        .types
        .self_ty()
        .and_then(|ty| cx.env.types.info(ty).name);
    let own_type = self_name.is_some()
        && cx
            .env
            .binding(&name)
            .is_some_and(|value| value.name == self_name);
    own_type || cx.f.raw_taken.contains(&name)
}

#[cfg(test)]
mod tests {
    use crate::testing::{findings, hits};

    const RULE: &str = "forget_tensor";

    #[test]
    fn fires_on_forget_manually_drop_and_leak_of_tensors() {
        let src = r#"
use std::mem::ManuallyDrop;
fn f(t: Tensor, u: Tensor, v: Tensor, dev: &Device) {
    std::mem::forget(t);
    let kept = ManuallyDrop::new(u);
    let r: &'static mut Tensor = Box::leak(Box::new(v));
    core::mem::forget(Tensor::zeros(&[4], dev));
}
"#;
        assert_eq!(hits(RULE, src), [(4, 5), (5, 16), (6, 34), (7, 5)]);
        let f = &findings(RULE, src)[0];
        assert_eq!(
            f.message,
            "`mem::forget(t)` leaks `t`: its destructor never runs, so its GPU memory is never freed"
        );
        assert!(f.help.contains("drop(t)"), "{}", f.help);
        assert_eq!(f.end.end().column, 23, "the whole call is underlined");
    }

    #[test]
    fn a_manually_drop_the_function_returns_is_the_callers() {
        // The shape of vllm.rs's `open_ipc_handle`: a tensor over another process's memory,
        // returned in a `ManuallyDrop` so that dropping it frees nothing it does not own.
        let src = r#"
use std::mem::ManuallyDrop;
use candle_core::{Result, Storage, Tensor};
fn open(storage: Storage, shape: Vec<usize>) -> Result<ManuallyDrop<Tensor>> {
    Ok(ManuallyDrop::new(Tensor::from_storage(storage, shape)?))
}
fn view(t: Tensor, early: bool) -> Option<ManuallyDrop<Tensor>> {
    if early {
        return Some(ManuallyDrop::new(t));
    }
    None
}
fn plain(t: Tensor) -> ManuallyDrop<Tensor> {
    ManuallyDrop::new(t)
}
fn kept_here(t: Tensor) -> usize {
    let kept = ManuallyDrop::new(t);
    kept.dims().len()
}
"#;
        assert_eq!(hits(RULE, src), [(17, 16)]);
    }

    #[test]
    fn a_manually_drop_field_its_drop_releases_is_the_destructors() {
        // The shape of kornia-rs's `CudaResource`: the device slice is kept in a
        // `ManuallyDrop` field so that `Drop` can choose how to release it (let it drop, or
        // leak the alias and free the pointer another way).
        let src = r#"
use std::mem::ManuallyDrop;
use cudarc::driver::CudaSlice;
struct Resource { slice: ManuallyDrop<CudaSlice<u8>>, ptr: u64 }
impl Drop for Resource {
    fn drop(&mut self) {
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        drop(slice);
    }
}
impl Resource {
    fn new(slice: CudaSlice<u8>, ptr: u64) -> Self {
        Self { slice: ManuallyDrop::new(slice), ptr }
    }
}
fn boxed(slice: CudaSlice<u8>) -> Box<Resource> {
    let r = Box::new(Resource { slice: ManuallyDrop::new(slice), ptr: 0 });
    r
}
struct Plain { slice: ManuallyDrop<CudaSlice<u8>>, other: ManuallyDrop<CudaSlice<u8>> }
impl Drop for Plain {
    fn drop(&mut self) {
        unsafe { ManuallyDrop::drop(&mut self.other) };
    }
}
fn plain(a: CudaSlice<u8>, b: CudaSlice<u8>) -> Box<Plain> {
    let p = Box::new(Plain { slice: ManuallyDrop::new(a), other: ManuallyDrop::new(b) });
    p
}
"#;
        // `Plain`'s `Drop` never releases `slice`: that one still leaks.
        assert_eq!(hits(RULE, src), [(27, 37)]);
    }

    #[test]
    fn a_manually_drop_taken_back_out_is_not_leaked() {
        // The shape of kornia-rs's `into_cudaslice`: a value with a `Drop` wrapped in
        // `ManuallyDrop` so that its fields can be moved out with `ptr::read`.
        let src = r#"
use std::mem::ManuallyDrop;
use cudarc::driver::CudaSlice;
struct Resource { slice: CudaSlice<u8>, id: i32 }
impl Drop for Resource { fn drop(&mut self) {} }
fn into_slice(r: Box<Resource>) -> CudaSlice<u8> {
    let md = ManuallyDrop::new(*r);
    let slice = unsafe { std::ptr::read(&md.slice) };
    slice
}
fn into_inner(r: Resource) -> i32 {
    let mut md = ManuallyDrop::new(r);
    let inner = ManuallyDrop::into_inner(md);
    inner.id
}
fn dropped(r: Resource) {
    let mut md = ManuallyDrop::new(r);
    unsafe { ManuallyDrop::drop(&mut md) };
}
fn id_only(r: Resource) -> i32 {
    let md = ManuallyDrop::new(r);
    unsafe { std::ptr::read(&md.id) }
}
"#;
        // Only the `id` is read out of the last one: its slice leaks.
        assert_eq!(hits(RULE, src), [(21, 14)]);
    }

    #[test]
    fn bare_forget_fires_only_when_imported_from_mem() {
        let imported = "use std::mem::{self, forget};\nfn f(t: Tensor) { forget(t); }";
        assert_eq!(hits(RULE, imported), [(2, 19)]);
        let other = "fn forget<T>(_: T) {}\nfn f(t: Tensor) { forget(t); }";
        assert_eq!(hits(RULE, other), []);
    }

    #[test]
    fn mentions_gpu_scope_when_scoped() {
        let src = "#[gpu_scope]\nfn f(t: Tensor) { mem::forget(t); }";
        assert!(
            findings(RULE, src)[0]
                .message
                .ends_with("the enclosing `#[gpu_scope]` cannot free it either")
        );
    }

    #[test]
    fn values_that_are_not_tensors_do_not_fire() {
        let src = r#"
struct Kernel { name: String, grid: (u32, u32) }
fn f(t: Tensor, name: String, bytes: Vec<u8>, names: Vec<&'static str>, k: Kernel) -> Tensor {
    std::mem::forget(5);
    let s: &'static str = Box::leak(name.into_boxed_str());
    let msg: &'static str = Box::leak(format!("run {}", 1).into_boxed_str());
    let unit = ManuallyDrop::new(());
    let b = Box::leak(Box::new(0u8));
    std::mem::forget(bytes);
    let all: &'static [&'static str] = Box::leak(names.into_boxed_slice());
    let kernel: &'static Kernel = Box::leak(Box::new(k));
    std::mem::forget(&t);
    t
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn unknown_types_do_not_fire() {
        let src = r#"
fn f<T>(value: T, ctx: Context, data: impl Sized) {
    std::mem::forget(value);
    std::mem::forget(ctx);
    std::mem::forget(data);
    std::mem::forget(make());
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn handing_ownership_over_does_not_fire() {
        let src = r#"
use cudarc::driver::CudaSlice;
struct Buffer { ptr: u64, len: usize, data: CudaSlice<f32> }
impl Buffer {
    fn into_raw(self) -> u64 {
        let me = std::mem::ManuallyDrop::new(self);
        me.ptr
    }
    fn release(b: Buffer) -> u64 {
        let ptr = b.ptr;
        std::mem::forget(b);
        ptr
    }
}
fn export(t: Tensor, out: *mut *mut Tensor) {
    let p = t.as_ptr();
    std::mem::forget(t);
}
fn ffi(t: Tensor, out: &mut *mut Tensor) {
    *out = Box::leak(Box::new(t)) as *mut Tensor;
}
fn borrowed(p: *const Tensor) {
    let t = std::mem::ManuallyDrop::new(unsafe { std::ptr::read(p) });
    let a = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p) });
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn an_alias_rebuilt_from_a_device_pointer_is_forgotten_not_leaked() {
        // infernum's shape: `upgrade_device_ptr` makes a typed `CudaSlice` over memory that
        // another buffer owns (to give `dtoh_sync_copy` a type), and `mem::forget` keeps its
        // destructor from freeing that memory a second time. Bound by a `let` (also through
        // `unsafe { .. }`), as a value rebuilt from `Arc::from_raw` or `ptr::read` is.
        let src = r#"
use cudarc::driver::{CudaDevice, CudaSlice, DevicePtr};
fn to_vec(dev: &CudaDevice, data: &CudaSlice<u8>, n: usize) -> Vec<f32> {
    let raw = *data.device_ptr();
    let typed: CudaSlice<f32> = unsafe { dev.upgrade_device_ptr(raw, n) };
    let out = dev.dtoh_sync_copy(&typed).unwrap();
    std::mem::forget(typed);
    out
}
fn borrowed(p: *const CudaSlice<f32>) {
    let s: CudaSlice<f32> = unsafe { std::ptr::read(p) };
    std::mem::forget(s);
}
fn fresh(dev: &CudaDevice, n: usize) {
    let owned: CudaSlice<f32> = dev.alloc_zeros(n).unwrap();
    std::mem::forget(owned);
}
"#;
        // A buffer the function allocates is still leaked.
        assert_eq!(hits(RULE, src), [(16, 5)]);
    }

    #[test]
    fn a_destructor_forgetting_what_it_does_not_own_does_not_fire() {
        // infernum's `PoolableBuffer`: its `Drop` forgets the slice of a non-owning view, so
        // that the memory another buffer owns is not freed twice. A type's own destructor
        // chooses what of its value it frees; elsewhere, forgetting the field still leaks.
        let src = r#"
use cudarc::driver::CudaSlice;
struct Buffer { slice: Option<CudaSlice<u8>>, owned: bool }
impl Drop for Buffer {
    fn drop(&mut self) {
        if !self.owned {
            if let Some(slice) = self.slice.take() {
                std::mem::forget(slice);
            }
        }
    }
}
impl Buffer {
    fn drop(&mut self) {
        let slice: CudaSlice<u8> = self.slice.take().unwrap();
        std::mem::forget(slice);
    }
}
"#;
        assert_eq!(hits(RULE, src), [(16, 9)]);
    }
}
