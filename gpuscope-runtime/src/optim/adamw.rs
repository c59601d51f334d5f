//! AdamW (Loshchilov and Hutter), as `torch.optim.AdamW` computes it.

use std::panic::Location;

use crate::grad::GradModeGuard;
use crate::keep;
use crate::tensor::compute::full_like;
use crate::tensor::compute::optim::{AdamWStep, adamw_all_};
use crate::tensor::{Tensor, TensorError};

use super::Optimizer;

/// Adam with decoupled weight decay:
///
/// ```text
/// p = p·(1 - lr·weight_decay)
/// m = β1·m + (1-β1)·g          v = β2·v + (1-β2)·g²
/// p = p - lr/(1-β1ᵗ) · m / (√v/√(1-β2ᵗ) + eps)
/// ```
///
/// Fused: on CUDA one kernel updates up to 24 parameters (their moments and
/// gradients) at a time, so a step over a transformer's parameters is a few launches
/// (one per parameter on the host, or for a parameter that is a view); the moments `m`
/// and `v` are allocated at the first step (zeros) and updated in place afterwards.
///
/// ```
/// use gpuscope_runtime::{Device, Tensor, optim::{AdamW, Optimizer}};
/// let dev = Device::host().unwrap();
/// let p = Tensor::from_slice(&[1.0f64], &[1], &dev).unwrap().set_requires_grad(true);
/// p.set_grad(Some(Tensor::from_slice(&[3.0f64], &[1], &dev).unwrap()));
/// let mut opt = AdamW::new(vec![p.clone()], 0.1).weight_decay(0.0);
/// opt.step().unwrap();
/// // The first Adam step moves by lr·sign(g) (up to eps).
/// assert!((p.item().unwrap() - 0.9).abs() < 1e-6);
/// ```
#[derive(Debug)]
pub struct AdamW {
    params: Vec<Tensor>,
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    steps: u64,
    moments: Vec<Option<(Tensor, Tensor)>>,
}

impl AdamW {
    /// AdamW over `params` with learning rate `lr` and PyTorch's defaults: betas
    /// (0.9, 0.999), eps 1e-8, weight decay 0.01.
    pub fn new(params: Vec<Tensor>, lr: f64) -> AdamW {
        let moments = params.iter().map(|_| None).collect();
        AdamW {
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.01,
            steps: 0,
            moments,
        }
    }

    /// Sets the moments' decay rates.
    pub fn betas(mut self, beta1: f64, beta2: f64) -> AdamW {
        self.betas = (beta1, beta2);
        self
    }

    /// Sets the term added to the denominator.
    pub fn eps(mut self, eps: f64) -> AdamW {
        self.eps = eps;
        self
    }

    /// Sets the decoupled weight decay.
    pub fn weight_decay(mut self, weight_decay: f64) -> AdamW {
        self.weight_decay = weight_decay;
        self
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Each parameter's first and second moments (`None` before its first update).
    pub fn moments(&self) -> &[Option<(Tensor, Tensor)>] {
        &self.moments
    }
}

impl Optimizer for AdamW {
    #[track_caller]
    fn step(&mut self) -> Result<(), TensorError> {
        let site = Location::caller();
        let _mode = GradModeGuard::no_grad();
        self.steps += 1;
        let t = self.steps as i32;
        let (b1, b2) = self.betas;
        let h = AdamWStep {
            lr: self.lr,
            beta1: b1,
            beta2: b2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            bias1: 1.0 - b1.powi(t),
            bias2: 1.0 - b2.powi(t),
        };
        let mut grads = Vec::with_capacity(self.params.len());
        for (p, state) in self.params.iter().zip(self.moments.iter_mut()) {
            let Some(g) = p.grad() else { continue };
            if state.is_none() {
                let m = full_like(p, 0.0, site)?;
                let v = full_like(p, 0.0, site)?;
                keep(&m);
                keep(&v);
                *state = Some((m, v));
            }
            grads.push((p, g, state.as_ref()));
        }
        let group: Vec<[&Tensor; 4]> = grads
            .iter()
            .filter_map(|(p, g, s)| s.map(|(m, v)| [*p, g, m, v]))
            .collect();
        adamw_all_(&group, h)
    }

    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
}
