// graph_accumulation (raised to deny) sees gpuscope's method API: `x = x.add(&loss)?`
// and `extend`, not only `+=` and `push`.
use gpuscope::optim::{Optimizer, Sgd};
use gpuscope::{Device, Tensor, TensorError, gpu_scope};

#[gpu_scope(deny(graph_accumulation))]
fn train(dev: &Device, batches: &[Tensor], opt: &mut Sgd) -> Result<Tensor, TensorError> {
    let mut running = Tensor::zeros(&[1], dev)?;
    let mut kept = Vec::new();
    for batch in batches {
        opt.zero_grad();
        let loss = batch.mean()?;
        loss.backward()?;
        opt.step()?;
        running = running.add(&loss)?;
        kept.extend([loss]);
    }
    Ok(running)
}

fn main() {
    let dev = Device::host().unwrap();
    let mut opt = Sgd::new(Vec::new(), 0.1);
    let _ = train(&dev, &[], &mut opt);
}
