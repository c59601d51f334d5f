//! False-alarm shapes for gradient rules with candle, where `backward()` returns a
//! `GradStore` that the optimizer consumes: no `zero_grad` exists or is needed; host numbers
//! accumulated; per-layer losses kept in a `Vec<f32>`.

use candle_core::{DType, Device, Result, Tensor, D};
use candle_nn::{AdamW, Optimizer, VarMap, loss};

pub fn train(varmap: &VarMap, xs: &Tensor, ys: &Tensor, model: &impl Fn(&Tensor) -> Result<Tensor>) -> Result<f32> {
    let mut opt = AdamW::new_lr(varmap.all_vars(), 1e-3)?;
    let mut sum_loss = 0f32;
    let mut layer_losses = vec![0f32; 4];
    let mut history = Vec::new();
    for epoch in 0..10 {
        let logits = model(xs)?;
        let loss = loss::cross_entropy(&logits, ys)?;
        let grads = loss.backward()?;
        opt.step(&grads)?;
        layer_losses[epoch % 4] = loss.to_dtype(DType::F32)?.to_scalar::<f32>()?;
        history.push(layer_losses.clone());
        sum_loss += loss.to_vec0::<f32>()?;
    }
    for _ in 0..10 {
        let loss = loss::mse(&model(xs)?, ys)?;
        opt.backward_step(&loss)?;
    }
    let _ = (history, Device::Cpu, D::Minus1);
    Ok(sum_loss)
}
