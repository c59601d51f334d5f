// `#[gpuscope::lints::allow(..)]` on a function, an impl, a module and, inside `#[gpu_scope]`
// functions, a statement: each allows the rules it names under it, on stable Rust, and
// `#![deny(warnings)]` stays quiet. `gpuscope lint` reads the same attributes.
#![deny(warnings)]

use std::sync::Mutex;

use gpuscope::{Device, Tensor, TensorError, gpu_scope};

static CACHE: Mutex<Vec<Tensor>> = Mutex::new(Vec::new());

// On a function carrying `#[gpu_scope]` (above it: passed on to it).
#[gpuscope::lints::allow(static_escape)]
#[gpu_scope(leaks = "allow")]
fn warm_up(dev: &Device) -> Result<(), TensorError> {
    CACHE.lock().unwrap().push(Tensor::zeros(&[4], dev)?);
    Ok(())
}

// Below it: read by `#[gpu_scope]`.
#[gpu_scope(leaks = "allow")]
#[gpuscope::lints::allow(forget_tensor)]
fn forget(dev: &Device) -> Result<(), TensorError> {
    std::mem::forget(Tensor::zeros(&[4], dev)?);
    Ok(())
}

struct Trainer {
    history: Vec<Tensor>,
}

// On an impl: every method under it.
#[gpuscope::lints::allow(scope_escape, graph_accumulation)]
impl Trainer {
    #[gpu_scope(leaks = "allow")]
    fn step(&mut self, batches: &[Tensor]) -> Result<(), TensorError> {
        for batch in batches {
            let loss = batch.mean()?;
            loss.backward()?;
            self.history.push(loss);
        }
        Ok(())
    }
}

// On a module.
#[gpuscope::lints::allow(empty_cache_in_loop)]
mod sweeps {
    use gpuscope::{Device, TensorError, gpu_scope};

    #[gpu_scope]
    pub fn sweep(dev: &Device, n: usize) -> Result<(), TensorError> {
        for _ in 0..n {
            dev.allocator().empty_cache()?;
        }
        Ok(())
    }
}

// On a statement, inside a `#[gpu_scope]` function.
#[gpu_scope(leaks = "allow")]
fn statement(dev: &Device, batches: &[Tensor]) -> Result<usize, TensorError> {
    let mut kept = Vec::new();
    for batch in batches {
        let loss = batch.mean()?;
        #[gpuscope::lints::allow(graph_accumulation)]
        kept.push(loss);
    }
    #[gpuscope::lints::allow(forget_tensor)]
    std::mem::forget(Tensor::zeros(&[1], dev)?);
    Ok(kept.len())
}

fn main() {
    let dev = Device::host().unwrap();
    warm_up(&dev).unwrap();
    forget(&dev).unwrap();
    let mut trainer = Trainer { history: Vec::new() };
    trainer.step(&[]).unwrap();
    assert!(trainer.history.is_empty());
    sweeps::sweep(&dev, 1).unwrap();
    assert_eq!(statement(&dev, &[]).unwrap(), 0);
}
