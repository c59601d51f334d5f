//! False-alarm shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in a self-play PPO crate's evaluation test and an RL library's
//! distribution tests (2026-11-27, seventeenth session): the test names burn's CPU backend
//! (`type B = NdArray<f32>;` in its body, or the module's `type TestBackend = NdArray;`)
//! and reads every sampled action or log-probability with `into_scalar` / `into_data` in
//! two nested loops. Those tensors are in host memory: the reads wait for no device.
//! Reported (true): the PPO update, generic over its backend (a GPU in training), reads the
//! minibatch loss every minibatch of every epoch.

use burn::backend::NdArray;
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Int, Tensor, TensorData};

use crate::env::Game;
use crate::model::{load_model, Policy};

type TestBackend = NdArray<f32>;

pub fn update<B: AutodiffBackend, O: Optimizer<Policy<B>, B>>(
    mut model: Policy<B>,
    optim: &mut O,
    batches: &[(Tensor<B, 2>, Tensor<B, 1, Int>)],
    epochs: usize,
) -> (Policy<B>, f32) {
    let mut last = 0.0;
    for _ in 0..epochs {
        for (obs, actions) in batches {
            let loss = model.loss(obs.clone(), actions.clone());
            last = loss.clone().into_scalar().into();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(3e-4, model, grads);
        }
    }
    (model, last)
}

#[test]
fn trained_agent_wins_from_every_seat() {
    type B = NdArray<f32>;
    let device = Default::default();
    let model = load_model::<B>("checkpoints/best", &device).unwrap();
    for seat in 0..4 {
        let mut env = Game::new(seat);
        while !env.over() {
            let obs = Tensor::<B, 1>::from_floats(env.observation().as_slice(), &device);
            let action: i64 = model.sample(obs.reshape([1, Game::OBS])).into_scalar();
            env.step(action as usize);
        }
        assert!(env.winner().is_some());
    }
}

#[test]
fn log_probs_sum_to_one() {
    let device = Default::default();
    let logits: Tensor<TestBackend, 2> =
        Tensor::from_data(TensorData::new(vec![0.3f32, 0.7, 1.0, -0.5], [1, 4]), &device);
    let mut total = 0.0f32;
    for a0 in 0..2 {
        for a1 in 0..2 {
            let lp: f32 = crate::dist::log_prob(logits.clone(), &[a0, a1], &device)
                .into_data()
                .to_vec()
                .unwrap()[0];
            total += lp.exp();
        }
    }
    assert!((total - 1.0).abs() < 1e-5);
}
