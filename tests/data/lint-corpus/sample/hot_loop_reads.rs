// Reads to the host in inner loops, as the corpus has them at `item_in_hot_loop = "warn"`
// (2026-11-26): pairwise similarities read one `to_scalar` at a time (candle's bert and
// t5 examples), a training loop that reads its loss every batch with `into_scalar`
// (burn's examples), a rollout that reads each action with `int64_value` and a loop
// converting each loss with `f64::try_from` (RL and examples on tch).
// Not reported: a slice's `to_vec` in an inner loop, a read after the inner loop, and a
// read in a single loop.

use burn::tensor::{Tensor as BurnTensor, backend::Backend};
use candle_core::{Result, Tensor};

pub fn similarities(embeddings: &[Tensor]) -> Result<Vec<(usize, usize, f32)>> {
    let mut out = Vec::new();
    for (i, e_i) in embeddings.iter().enumerate() {
        for (j, e_j) in embeddings.iter().enumerate().skip(i + 1) {
            let dot = (e_i * e_j)?.sum_all()?.to_scalar::<f32>()?;
            out.push((i, j, dot));
        }
    }
    Ok(out)
}

pub fn rows(batches: &[Vec<Vec<f32>>]) -> Vec<Vec<f32>> {
    let mut all = Vec::new();
    for batch in batches {
        for row in batch {
            all.push(row.to_vec());
        }
    }
    all
}

pub fn train<B: Backend>(epochs: usize, losses: &[BurnTensor<B, 1>]) -> f32 {
    let mut last = 0.0;
    for _ in 0..epochs {
        for loss in losses {
            last = loss.clone().into_scalar().elem::<f32>();
        }
        let mean = losses[0].clone().into_scalar();
        log(mean);
    }
    last
}

pub fn once(losses: &[Tensor]) -> Result<f32> {
    let mut sum = 0.0;
    for loss in losses {
        sum += loss.to_scalar::<f32>()?;
    }
    Ok(sum)
}

pub fn rollout(steps: usize, envs: &mut [Env], policy: &tch::CModule) {
    for _ in 0..steps {
        for env in envs.iter_mut() {
            let action = policy.forward_ts(&[env.observation()]).unwrap().argmax(-1, false);
            env.step(action.int64_value(&[0]));
        }
    }
}

pub fn mean_loss(epochs: usize, losses: &[tch::Tensor]) -> f64 {
    let mut sum = 0.0;
    for _ in 0..epochs {
        for loss in losses {
            sum += f64::try_from(loss).unwrap();
        }
    }
    sum
}
