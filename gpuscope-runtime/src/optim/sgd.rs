//! Stochastic gradient descent, as `torch.optim.SGD` computes it.

use std::panic::Location;

use crate::grad::GradModeGuard;
use crate::keep;
use crate::tensor::compute::copy_at;
use crate::tensor::{Tensor, TensorError};

use super::Optimizer;

/// SGD with optional momentum, dampening, Nesterov momentum and (coupled) weight decay:
///
/// ```text
/// d = g + weight_decay·p
/// b = momentum·b + (1 - dampening)·d     (b = d at the first step)
/// d = d + momentum·b  if nesterov, else b
/// p = p - lr·d
/// ```
///
/// Momentum buffers are allocated at the first step; no step allocates after that.
///
/// ```
/// use gpuscope_runtime::{Device, Tensor, optim::{Optimizer, Sgd}};
/// let dev = Device::host().unwrap();
/// let p = Tensor::from_slice(&[1.0f32], &[1], &dev).unwrap().set_requires_grad(true);
/// p.set_grad(Some(Tensor::from_slice(&[0.5f32], &[1], &dev).unwrap()));
/// let mut opt = Sgd::new(vec![p.clone()], 0.1);
/// opt.step().unwrap();
/// assert_eq!(p.to_vec::<f32>().unwrap(), vec![0.95]);
/// ```
#[derive(Debug)]
pub struct Sgd {
    params: Vec<Tensor>,
    lr: f64,
    momentum: f64,
    dampening: f64,
    weight_decay: f64,
    nesterov: bool,
    buffers: Vec<Option<Tensor>>,
}

impl Sgd {
    /// Plain SGD over `params` with learning rate `lr`.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Sgd {
        let buffers = params.iter().map(|_| None).collect();
        Sgd {
            params,
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            buffers,
        }
    }

    /// Sets the momentum factor (0: none).
    pub fn momentum(mut self, momentum: f64) -> Sgd {
        self.momentum = momentum;
        self
    }

    /// Sets the dampening of momentum.
    pub fn dampening(mut self, dampening: f64) -> Sgd {
        self.dampening = dampening;
        self
    }

    /// Sets the (L2, coupled) weight decay.
    pub fn weight_decay(mut self, weight_decay: f64) -> Sgd {
        self.weight_decay = weight_decay;
        self
    }

    /// Uses Nesterov momentum.
    pub fn nesterov(mut self, on: bool) -> Sgd {
        self.nesterov = on;
        self
    }

    /// The momentum buffers (`None` until the first step that updated the parameter).
    pub fn momentum_buffers(&self) -> &[Option<Tensor>] {
        &self.buffers
    }
}

impl Optimizer for Sgd {
    #[track_caller]
    fn step(&mut self) -> Result<(), TensorError> {
        let site = Location::caller();
        let _mode = GradModeGuard::no_grad();
        let (lr, wd, mu, damp) = (self.lr, self.weight_decay, self.momentum, self.dampening);
        for (p, buf) in self.params.iter().zip(self.buffers.iter_mut()) {
            let Some(g) = p.grad() else { continue };
            if mu == 0.0 {
                if wd != 0.0 {
                    p.mul_scalar_(1.0 - lr * wd)?;
                }
                p.add_scaled_(&g, -lr)?;
                continue;
            }
            let b = match buf {
                Some(b) => {
                    b.mul_scalar_(mu)?;
                    b.add_scaled_(&g, 1.0 - damp)?;
                    if wd != 0.0 {
                        b.add_scaled_(p, wd * (1.0 - damp))?;
                    }
                    b.clone()
                }
                None => {
                    let b = copy_at(&g, site)?;
                    if wd != 0.0 {
                        b.add_scaled_(p, wd)?;
                    }
                    keep(&b);
                    *buf = Some(b.clone());
                    b
                }
            };
            if self.nesterov {
                // p - lr·(g + wd·p + mu·b), with p read before it changes.
                if wd != 0.0 {
                    p.mul_scalar_(1.0 - lr * wd)?;
                }
                p.add_scaled_(&g, -lr)?;
                p.add_scaled_(&b, -lr * mu)?;
            } else {
                p.add_scaled_(&b, -lr)?;
            }
        }
        Ok(())
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
