// The deny-level rules' diagnostics as the macros emit them: compile errors over the whole
// offending expression. (Warn-level rules are in `lint_rules.rs`: rustc stops before its
// lints when an error comes first.)
use gpuscope::{Device, Tensor, TensorError, gpu_scope};
use std::sync::Mutex;

static KEEP: Mutex<Vec<Tensor>> = Mutex::new(Vec::new());

// static_escape (deny)
#[gpu_scope]
fn stash(dev: &Device) -> Result<(), TensorError> {
    let t = Tensor::zeros(&[4], dev)?;
    KEEP.lock().unwrap().push(t);
    Ok(())
}

// forget_tensor (deny), through `Box::leak`
#[gpu_scope]
fn leak_box(dev: &Device) -> Result<(), TensorError> {
    let t = Tensor::zeros(&[4], dev)?;
    let _forever: &'static mut Tensor = Box::leak(Box::new(t));
    Ok(())
}

fn main() {
    let dev = Device::host().unwrap();
    let _ = stash(&dev);
    let _ = leak_box(&dev);
}
