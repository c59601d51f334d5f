// backward_in_no_grad (deny) after a no-grad guard, and in a `no_grad(|| ..)` closure.
use gpuscope::grad::GradModeGuard;
use gpuscope::{Tensor, TensorError, gpu_scope, no_grad};

#[gpu_scope]
fn evaluate(batch: &Tensor) -> Result<(), TensorError> {
    let _guard = GradModeGuard::no_grad();
    let loss = batch.mean()?;
    loss.backward()?;
    Ok(())
}

#[gpu_scope]
fn closure(batch: &Tensor) -> Result<(), TensorError> {
    no_grad(|| batch.mean()?.backward())
}

fn main() {
    let dev = gpuscope::Device::host().unwrap();
    let t = Tensor::zeros(&[1], &dev).unwrap();
    let _ = evaluate(&t);
    let _ = closure(&t);
}
