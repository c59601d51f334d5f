//! False-alarm shape for `graph_accumulation` with candle: an off-policy agent with several
//! critics, each owning its optimizer, trains them in a loop over the critics and returns one
//! loss per critic for logging. The loop runs once per critic network, not once per batch,
//! so the kept losses are one graph per critic, not a pile growing with training. The
//! replay loop below it keeps its losses across batches and is a true finding.

use candle_core::{Module, Result, Tensor};
use candle_nn::{AdamW, Linear, Optimizer};

pub struct Critic {
    net: Linear,
    opt: AdamW,
}

impl Critic {
    fn optimizer_mut(&mut self) -> &mut AdamW {
        &mut self.opt
    }
}

pub struct Twin {
    critics: Vec<Critic>,
}

pub struct Report {
    pub losses: Vec<Tensor>,
    pub values: Vec<Tensor>,
}

impl Twin {
    pub fn update(&mut self, obs: &Tensor, targets: &Tensor) -> Result<Report> {
        let mut losses = Vec::with_capacity(self.critics.len());
        let mut values = Vec::with_capacity(self.critics.len());
        for critic in &mut self.critics {
            let q = critic.net.forward(obs)?;
            let loss = candle_nn::loss::mse(&q, targets)?;
            critic.optimizer_mut().backward_step(&loss)?;
            losses.push(loss);
            values.push(q);
        }
        Ok(Report { losses, values })
    }

    pub fn replay(&mut self, batches: &[(Tensor, Tensor)]) -> Result<Vec<Tensor>> {
        let mut history = Vec::new();
        for (obs, targets) in batches {
            for critic in &mut self.critics {
                let loss = candle_nn::loss::mse(&critic.net.forward(obs)?, targets)?;
                critic.opt.backward_step(&loss)?;
                history.push(loss);
            }
        }
        Ok(history)
    }
}
