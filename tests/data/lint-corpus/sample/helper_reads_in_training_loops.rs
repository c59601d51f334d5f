// Reads to the host in a helper that a training loop of the same file calls, as the corpus
// has them at `item_in_hot_loop = "warn"` (2026-11-27): a trainer whose `train_on_batch`
// reads the loss with `to_vec0` and is called every batch of every epoch
// (Decision-Transformers-Rust's shape, on candle here), gradient clipping that reads each
// parameter's norm in its own loop and is called once per step (kungfu_nes_rl_rust's
// `clip_gradients`), and PPO metrics read with `into_scalar` in a function called every
// minibatch of every epoch (burn-ppo's `compute_minibatch_metrics`).
// Not reported: the same helpers called once, in a loop over a constant list of settings,
// or from a thread spawned in a loop; a helper reading a tensor it makes on the CPU; and a
// helper whose name the file defines twice.

use burn::tensor::{Tensor as BurnTensor, backend::Backend};
use candle_core::{Device, Result, Tensor, Var};

pub struct Trainer {
    model: Model,
    opt: Sgd,
}

impl Trainer {
    fn train_on_batch(&mut self, x: &Tensor, y: &Tensor) -> Result<f32> {
        let loss = self.model.loss(x, y)?;
        self.opt.backward_step(&loss)?;
        let l = loss.to_vec0::<f32>()?;
        Ok(l)
    }

    pub fn train(&mut self, epochs: usize, data: &[(Tensor, Tensor)]) -> Result<()> {
        for epoch in 0..epochs {
            for (x, y) in data {
                let l = self.train_on_batch(x, y)?;
                log(epoch, l);
            }
        }
        Ok(())
    }

    pub fn sweep(&mut self, data: &[(Tensor, Tensor)]) -> Result<()> {
        // Three settings, one batch each: no loop repeats the read.
        for lr in [1e-3, 1e-4, 1e-5] {
            self.opt.set_lr(lr);
            self.train_on_batch(&data[0].0, &data[0].1)?;
        }
        Ok(())
    }
}

fn clip_gradients(grads: &GradStore, params: &[Var], max_norm: f32) -> Result<f32> {
    let mut total = 0.0;
    for p in params {
        let n = grads.get(p).unwrap().sqr()?.sum_all()?.to_scalar::<f32>()?;
        total += n;
    }
    Ok(total.sqrt().min(max_norm))
}

pub fn run(steps: usize, agent: &mut Agent, params: &[Var]) -> Result<()> {
    for _ in 0..steps {
        let grads = agent.loss()?.backward()?;
        clip_gradients(&grads, params, 1.0)?;
    }
    // Once, after training: not repeated.
    let grads = agent.loss()?.backward()?;
    clip_gradients(&grads, params, 1.0)?;
    Ok(())
}

fn compute_minibatch_metrics<B: Backend>(ratio: BurnTensor<B, 1>, values: BurnTensor<B, 1>) -> (f32, f32) {
    let clip_fraction: f32 = (ratio - 1.0).abs().greater_elem(0.2).float().mean().into_scalar();
    let value_mean: f32 = values.mean().into_scalar();
    (clip_fraction, value_mean)
}

pub fn ppo_update<B: Backend>(epochs: usize, minibatches: &[Minibatch<B>]) {
    for _ in 0..epochs {
        for mb in minibatches {
            let (clip, value) = compute_minibatch_metrics(mb.ratio.clone(), mb.values.clone());
            record(clip, value);
        }
    }
}

fn cosine_on_cpu(a: &[f32], b: &[f32]) -> Result<f32> {
    let a = Tensor::new(a, &Device::Cpu)?;
    let b = Tensor::new(b, &Device::Cpu)?;
    (a * b)?.sum_all()?.to_scalar::<f32>()
}

pub fn similarities(rows: &[Vec<f32>]) -> Result<f32> {
    let mut total = 0.0;
    for a in rows {
        for b in rows {
            total += cosine_on_cpu(a, b)?;
        }
    }
    Ok(total)
}

pub fn actors(n: usize, steps: usize, x: &Tensor) {
    for _ in 0..n {
        let x = x.clone();
        std::thread::spawn(move || {
            for _ in 0..steps {
                let _ = read_value(&x);
            }
        });
    }
}

fn read_value(x: &Tensor) -> Result<f32> {
    x.to_scalar::<f32>()
}

mod eval {
    pub fn score(x: &candle_core::Tensor) -> f32 {
        x.to_scalar::<f32>().unwrap()
    }
}

mod test_helpers {
    pub fn score(x: &candle_core::Tensor) -> f32 {
        x.to_scalar::<f32>().unwrap()
    }
}

pub fn evaluate(epochs: usize, xs: &[Tensor]) {
    for _ in 0..epochs {
        for x in xs {
            log(0, score(x));
        }
    }
}
