//! True findings in code written with gpuscope itself: the method-API accumulation of a
//! loss, a tensor forgotten, one stored in a static cache that is never cleared, and tensors
//! made in a `#[gpu_scope]` stored into a caller's container.

use gpuscope::optim::{Optimizer, Sgd};
use gpuscope::{Device, Tensor, TensorError, gpu_scope};
use std::collections::HashMap;
use std::sync::Mutex;

static MASKS: Mutex<Option<HashMap<usize, Tensor>>> = Mutex::new(None);

pub fn train(dev: &Device, opt: &mut Sgd, batches: &[Tensor]) -> Result<Tensor, TensorError> {
    let mut running = Tensor::zeros(&[1], dev)?;
    for batch in batches {
        opt.zero_grad();
        let loss = batch.mean()?;
        loss.backward()?;
        opt.step()?;
        running = running.add(&loss)?;
    }
    Ok(running)
}

pub fn causal_mask(n: usize, dev: &Device) -> Result<Tensor, TensorError> {
    let mask = Tensor::ones(&[n, n], dev)?;
    MASKS.lock().unwrap().get_or_insert_with(HashMap::new).insert(n, mask.clone());
    Ok(mask)
}

pub fn scratch(dev: &Device) -> Result<(), TensorError> {
    let scratch = Tensor::zeros(&[1 << 20], dev)?;
    std::mem::forget(scratch);
    Ok(())
}

#[gpu_scope]
pub fn collect(dev: &Device, history: &mut Vec<Tensor>) -> Result<(), TensorError> {
    let activation = Tensor::ones(&[256, 256], dev)?;
    history.push(activation.relu()?);
    Ok(())
}
