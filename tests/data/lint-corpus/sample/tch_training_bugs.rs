//! True findings in tch (PyTorch's semantics): a training loop without `zero_grad`, a loss
//! tensor summed across training steps, losses kept in a `Vec`, backward under a no-grad
//! guard, the graph retained in a loop, and the CUDA cache emptied every iteration.

use tch::{Cuda, Device, Kind, Tensor, nn, nn::Module, nn::OptimizerConfig};

pub fn train(vs: &nn::VarStore, net: &impl Module, batches: &[(Tensor, Tensor)]) -> anyhow::Result<Tensor> {
    let mut opt = nn::Sgd::default().build(vs, 1e-2)?;
    let mut total_loss = Tensor::zeros([], (Kind::Float, Device::Cpu));
    let mut losses = Vec::new();
    for (x, y) in batches {
        let loss = net.forward(x).cross_entropy_for_logits(y);
        loss.backward();
        opt.step();
        total_loss += &loss;
        losses.push(loss);
        Cuda::empty_cache();
    }
    println!("{} steps", losses.len());
    Ok(total_loss)
}

pub fn evaluate(net: &impl Module, x: &Tensor, y: &Tensor) -> f64 {
    let _guard = tch::no_grad_guard();
    let loss = net.forward(x).mse_loss(y, tch::Reduction::Mean);
    loss.backward();
    loss.double_value(&[])
}

pub fn double_backward(net: &impl Module, xs: &[Tensor], w: &Tensor) {
    for x in xs {
        let loss = net.forward(x).sum(Kind::Float);
        Tensor::run_backward(&[&loss], &[w], true, false);
    }
}
