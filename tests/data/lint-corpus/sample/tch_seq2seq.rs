//! False-alarm shapes: a loss summed over the tokens of one sequence in an inner loop with
//! no backward in it, then returned (one graph per step, as intended); `opt.backward_step`
//! clears, runs backward and steps in one call; file names pushed into a `Vec`.

use std::path::Path;
use tch::{Device, Kind, Tensor, nn, nn::OptimizerConfig};

pub struct Decoder;

impl Decoder {
    pub fn forward(&self, prev: &Tensor, state: &Tensor) -> (Tensor, Tensor) {
        (prev.shallow_clone(), state.shallow_clone())
    }
}

pub fn sequence_loss(decoder: &Decoder, start: &Tensor, targets: &[i64], device: Device) -> Tensor {
    let mut loss = Tensor::from(0f32).to_device(device);
    let mut prev = start.shallow_clone();
    let mut state = Tensor::zeros([1, 256], (Kind::Float, device));
    for &t in targets {
        let (output, next_state) = decoder.forward(&prev, &state);
        state = next_state;
        let target = Tensor::from_slice(&[t]).to_device(device);
        loss = loss + output.nll_loss(&target);
        prev = target;
    }
    loss
}

pub fn train(vs: &nn::VarStore, decoder: &Decoder, data: &[(Tensor, Vec<i64>)]) -> anyhow::Result<()> {
    let mut opt = nn::Adam::default().build(vs, 1e-3)?;
    for (start, targets) in data {
        let loss = sequence_loss(decoder, start, targets, vs.device());
        opt.backward_step(&loss);
    }
    Ok(())
}

pub fn checkpoints(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let relative = entry.path().strip_prefix(root).unwrap().to_path_buf();
        files.push(relative.to_string_lossy().replace('\\', "/"));
    }
    files
}
