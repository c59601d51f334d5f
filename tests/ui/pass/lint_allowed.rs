#![deny(warnings)]
use std::sync::{Mutex, OnceLock};

use gpuscope::{Device, Tensor, TensorError, gpu_scope, no_grad};

static CACHE: OnceLock<Mutex<Vec<Tensor>>> = OnceLock::new();

// Deliberate leaks compile when their rules are allowed.
#[gpu_scope(leaks = "allow", allow(static_escape, forget_tensor))]
fn cache(dev: &Device) -> Result<(), TensorError> {
    let t = Tensor::zeros(&[1], dev)?;
    CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .push(t.clone());
    std::mem::forget(t);
    Ok(())
}

// Levels from both attributes apply; the function is linted once.
#[gpu_scope(allow(graph_accumulation))]
#[no_grad(allow(forget_tensor))]
fn both(batches: &[Tensor]) -> Result<Vec<Tensor>, TensorError> {
    let mut history = Vec::new();
    for batch in batches {
        let loss = batch.mean()?;
        history.push(loss.clone());
        std::mem::forget(loss);
    }
    Ok(history)
}

fn main() {
    let dev = Device::host().unwrap();
    cache(&dev).unwrap();
    assert!(both(&[]).unwrap().is_empty());
}
