//! False-alarm shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in a double DQN on burn (2026-11-28, twenty-second round): a
//! debug print of each sample's tensors switched off by a guard that never holds, a
//! counter that counts up from zero compared with `-1`, in the per-sample loop of an update
//! that the training loops call every step. The print never runs.
//! Reported (true): the loss read for every sample of the same update.

use candle_core::{Result, Tensor};

pub struct Sample {
    pub state: Tensor,
    pub target: Tensor,
}

fn update(batch: &[Sample]) -> Result<f32> {
    let mut index = 0;
    let mut last = 0.0;
    for mem in batch {
        if index == -1 {
            println!(
                "state {} target {}",
                mem.state.to_scalar::<f32>()?,
                mem.target.to_scalar::<f32>()?
            );
        }
        index += 1;
        let loss = (&mem.state - &mem.target)?.sqr()?;
        last = loss.to_scalar::<f32>()?;
    }
    Ok(last)
}

pub fn train(trials: usize, episodes: &[Vec<Sample>]) -> Result<f32> {
    let mut last = 0.0;
    for _ in 0..trials {
        for batch in episodes {
            last = update(batch)?;
        }
    }
    Ok(last)
}
