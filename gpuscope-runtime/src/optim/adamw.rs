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

    /// Allocates every parameter's moments now (zeros, as the first step would), instead
    /// of at the first [`step`](Optimizer::step). The updates are the same; what changes
    /// is memory:
    ///
    /// - the optimizer's state (twice the parameters) is allocated before training, so a
    ///   model whose state does not fit fails here rather than after its first forward
    ///   and backward pass;
    /// - the state lies next to the parameters, below the activations, rather than in
    ///   the holes the first step's activations leave: on the GPT example
    ///   (`examples/gpt`) peak reserved memory is 1.9% above peak allocated instead of
    ///   3.2% (BENCHMARKS.md).
    ///
    /// Parameters that never get a gradient get moments too (the lazy default skips
    /// them). Moments already allocated are kept.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor, optim::AdamW};
    /// let dev = Device::host().unwrap();
    /// let p = Tensor::zeros(&[1024], &dev).unwrap().set_requires_grad(true);
    /// let mut opt = AdamW::new(vec![p], 1e-3);
    /// assert!(opt.moments()[0].is_none());
    /// opt.init_state().unwrap();
    /// let (m, v) = opt.moments()[0].as_ref().unwrap();
    /// assert_eq!((m.shape(), v.to_vec::<f32>().unwrap()[0]), (&[1024][..], 0.0));
    /// ```
    #[track_caller]
    pub fn init_state(&mut self) -> Result<(), TensorError> {
        let site = Location::caller();
        let _mode = GradModeGuard::no_grad();
        for (p, state) in self.params.iter().zip(self.moments.iter_mut()) {
            if state.is_none() {
                *state = Some(zero_moments(p, site)?);
            }
        }
        Ok(())
    }
}

/// A parameter's first and second moments before any update: zeros, kept past the scope
/// that makes them (they live as long as the optimizer).
fn zero_moments(
    p: &Tensor,
    site: &'static Location<'static>,
) -> Result<(Tensor, Tensor), TensorError> {
    let m = full_like(p, 0.0, site)?;
    let v = full_like(p, 0.0, site)?;
    keep(&m);
    keep(&v);
    Ok((m, v))
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
                *state = Some(zero_moments(p, site)?);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    /// Three steps of AdamW over two parameters (one never gets a gradient).
    fn train(eager: bool) -> (Vec<f32>, Vec<f32>, bool) {
        let dev = Device::host().unwrap();
        let w = Tensor::from_slice(&[0.5f32, -1.0, 2.0], &[3], &dev)
            .unwrap()
            .set_requires_grad(true);
        let unused = Tensor::zeros(&[2], &dev).unwrap().set_requires_grad(true);
        let mut opt = AdamW::new(vec![w.clone(), unused.clone()], 0.1).weight_decay(0.1);
        if eager {
            opt.init_state().unwrap();
        }
        for g in [[1.0f32, -2.0, 0.5], [0.25, 0.0, -3.0], [2.0, 1.0, 1.0]] {
            w.set_grad(Some(Tensor::from_slice(&g, &[3], &dev).unwrap()));
            opt.step().unwrap();
        }
        let (m, _) = opt.moments()[0].as_ref().unwrap();
        (
            w.to_vec::<f32>().unwrap(),
            m.to_vec::<f32>().unwrap(),
            opt.moments()[1].is_some(),
        )
    }

    #[test]
    fn state_allocated_up_front_updates_exactly_as_state_allocated_at_the_first_step() {
        let (lazy_w, lazy_m, lazy_unused) = train(false);
        let (eager_w, eager_m, eager_unused) = train(true);
        assert_eq!(lazy_w, eager_w);
        assert_eq!(lazy_m, eager_m);
        // The difference: a parameter without gradients has moments only when eager.
        assert!(!lazy_unused && eager_unused);
    }
}
