use candle_core::{Result, Tensor, Var};
use candle_nn::{AdamW, Optimizer};

use crate::metrics;
use crate::optim::clip_grad_norm;

pub struct Trainer {
    pub vars: Vec<Var>,
    pub opt: AdamW,
}

impl Trainer {
    /// One step on one batch: the loss read to the host at its end (true: the binary calls
    /// `fit`, which calls this every batch of every epoch).
    pub fn step(&mut self, logits: &Tensor, labels: &Tensor) -> Result<f32> {
        let loss = candle_nn::loss::cross_entropy(logits, labels)?;
        let mut grads = loss.backward()?;
        clip_grad_norm(&mut grads, &self.vars, 1.0)?;
        self.opt.step(&grads)?;
        metrics::batch_accuracy(logits, labels)?;
        if std::env::var_os("TRAIN_DEBUG").is_some() {
            metrics::dump(logits)?;
        }
        loss.to_scalar::<f32>()
    }

    pub fn fit(&mut self, batches: &[(Tensor, Tensor)]) -> Result<()> {
        for (logits, labels) in batches {
            self.step(logits, labels)?;
        }
        Ok(())
    }
}
