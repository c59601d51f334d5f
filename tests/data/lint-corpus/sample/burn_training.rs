//! False-alarm shapes for gradient rules with burn: gradients are a value that
//! `optim.step(lr, model, grads)` consumes; gradients read from the `Gradients` of one
//! backward pass are not losses; losses summed per layer and then stacked are one graph.

use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::{Tensor, backend::AutodiffBackend};

pub fn train<B: AutodiffBackend, M: burn::module::AutodiffModule<B> + Forward<B>>(
    mut model: M,
    mut optim: impl Optimizer<M, B>,
    batches: Vec<(Tensor<B, 2>, Tensor<B, 2>)>,
) -> M {
    for (x, y) in batches {
        let loss = (model.forward(x) - y).powf_scalar(2.0).mean();
        println!("loss {}", loss.clone().into_scalar());
        let grads = loss.backward();
        let grads = GradientsParams::from_grads(grads, &model);
        model = optim.step(1e-3, model, grads);
    }
    model
}

pub fn input_grads<B: AutodiffBackend>(inputs: Vec<Tensor<B, 1>>, outputs: Vec<Tensor<B, 1>>) -> Vec<Tensor<B::InnerBackend, 1>> {
    let mut all_grads = vec![];
    for (input, output) in inputs.iter().zip(outputs) {
        let grads = output.backward();
        all_grads.push(input.grad(&grads).unwrap());
    }
    all_grads
}

pub fn layered_loss<B: AutodiffBackend>(pred: Vec<Tensor<B, 3>>, target: Vec<Tensor<B, 3>>) -> Tensor<B, 1> {
    let mut layer_losses = Vec::with_capacity(pred.len());
    for (p, t) in pred.into_iter().zip(target) {
        let loss = (p - t).powf_scalar(2.0).sum_dim(2).sum_dim(1).squeeze_dims::<1>(&[1, 2]);
        layer_losses.push(loss);
    }
    Tensor::stack::<2>(layer_losses, 1).sum_dim(1).squeeze_dim(1)
}

pub trait Forward<B: AutodiffBackend> {
    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2>;
}
