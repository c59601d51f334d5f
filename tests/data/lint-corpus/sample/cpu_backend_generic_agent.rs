//! False-alarm shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in minimal RL agents on burn (2026-11-28, twenty-third round):
//! a Q-network generic over its backend (`impl<B> QNet<B> where B: Backend`) reads its
//! greedy action with `into_scalar`, and the only caller, an episode loop in a function
//! that names burn's `NdArray` and no other backend, calls it every step of every
//! episode. Through that call the network's tensors are in host memory: the read waits
//! for no device.
//! Reported (true): the same network, evaluated by a function on burn's `Wgpu` backend,
//! has its greedy action read on the GPU every step of every episode.

use burn::backend::ndarray::NdArrayDevice;
use burn::backend::wgpu::WgpuDevice;
use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::nn::{Linear, LinearConfig, Relu};
use burn::tensor::{Int, Tensor, TensorData, backend::Backend};

use crate::env::CartPole;

pub struct QNet<B: Backend> {
    hidden: Linear<B>,
    head: Linear<B>,
}

impl<B> QNet<B>
where
    B: Backend,
{
    pub fn new(device: &B::Device) -> Self {
        QNet {
            hidden: LinearConfig::new(4, 128).init(device),
            head: LinearConfig::new(128, 2).init(device),
        }
    }

    pub fn q_values(&self, state: Tensor<B, 1>) -> Tensor<B, 1> {
        self.head.forward(Relu::new().forward(self.hidden.forward(state)))
    }

    pub fn greedy_action(&self, state: Tensor<B, 1>) -> usize {
        let best: Tensor<B, 1, Int> = self.q_values(state).argmax(0);
        best.into_scalar() as usize
    }
}

pub fn run_session(episodes: usize) -> f32 {
    let device = NdArrayDevice::default();
    let q_net: QNet<Autodiff<NdArray>> = QNet::new(&device);
    let mut env = CartPole::new();
    let mut score = 0.0;
    for _ in 0..episodes {
        let mut state = env.reset();
        let mut done = false;
        while !done {
            let obs: Tensor<Autodiff<NdArray>, 1> =
                Tensor::from_data(TensorData::new(state.to_vec(), [4]), &device);
            let action = q_net.greedy_action(obs);
            let step = env.step(action);
            state = step.state;
            score += step.reward;
            done = step.done;
        }
    }
    score
}

pub fn evaluate_on_gpu(episodes: usize) -> usize {
    let device = WgpuDevice::default();
    let q_net: QNet<Wgpu> = QNet::new(&device);
    let mut env = CartPole::new();
    let mut moves = 0;
    for _ in 0..episodes {
        let mut state = env.reset();
        loop {
            let obs = Tensor::<Wgpu, 1>::from_data(TensorData::new(state.to_vec(), [4]), &device);
            let best: i64 = q_net.q_values(obs).argmax(0).into_scalar();
            let step = env.step(best as usize);
            moves += 1;
            if step.done {
                break;
            }
            state = step.state;
        }
    }
    moves
}
