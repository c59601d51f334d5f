// Every lint rule's diagnostic as the macros emit it: deny-level rules are errors, and
// `#![deny(warnings)]` turns the warn-level ones (compiler warnings) into errors too, so
// their text is checked here.
#![deny(warnings)]

use gpuscope::optim::{Optimizer, Sgd};
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

// missing_zero_grad (warn)
#[gpu_scope]
fn train(batches: &[Tensor], opt: &mut Sgd) -> Result<(), TensorError> {
    for batch in batches {
        let loss = batch.mean()?;
        loss.backward()?;
        opt.step()?;
    }
    Ok(())
}

// empty_cache_in_loop (warn)
#[gpu_scope]
fn sweep(batches: &[Tensor], dev: &Device) -> Result<(), TensorError> {
    for batch in batches {
        let _ = batch.mean()?.item()?;
        dev.allocator().empty_cache()?;
    }
    Ok(())
}

// out_of_place_update and item_in_hot_loop are `allow` by default; raised here.
#[gpu_scope(warn(out_of_place_update, item_in_hot_loop))]
fn pedantic(rows: &[Vec<Tensor>], y: &Tensor) -> Result<f64, TensorError> {
    let mut total = 0.0;
    for row in rows {
        for x in row {
            let mut x = x.clone();
            x = x.add(y)?;
            total += x.sum()?.item()?;
        }
    }
    Ok(total)
}

fn main() {
    let _ = pedantic(&[], &Tensor::zeros(&[1], &Device::host().unwrap()).unwrap());
    let dev = Device::host().unwrap();
    let _ = stash(&dev);
    let _ = leak_box(&dev);
    let mut opt = Sgd::new(Vec::new(), 0.1);
    let _ = train(&[], &mut opt);
    let _ = sweep(&[], &dev);
}
