// The warn-level rules' diagnostics as the macros emit them (compiler warnings over the
// whole offending expression); `#![deny(warnings)]` turns them into errors, so that their
// text is checked here. Deny-level rules are in `lint_deny_rules.rs`.
#![deny(warnings)]

use gpuscope::optim::{Optimizer, Sgd};
use gpuscope::{Device, Tensor, TensorError, gpu_scope};

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
    let mut opt = Sgd::new(Vec::new(), 0.1);
    let _ = train(&[], &mut opt);
    let _ = sweep(&[], &dev);
}
