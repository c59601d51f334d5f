//! Missed-finding shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in a PPO trainer on burn (2026-11-27): the losses come back in
//! a struct from the crate's own `loss` module, so their type is not known in this file,
//! and each minibatch of each epoch reads them with `to_data().to_vec::<f32>()` for a debug
//! line, built before the log macro and so read whatever the log level. burn's `to_data()`
//! is a name other types have too and is reported only on a value known to be a tensor; the
//! element-typed getter on its result (`to_vec::<f32>()`, `iter::<f32>()`) is burn's
//! `TensorData`, so the `to_data()` is a read. Not reported: the detached sums read once
//! after the loops, and a `to_data()` of something else whose result is used untyped.

use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;

use crate::loss::{clipped_losses, LossInputs};
use crate::stats::Histogram;

pub fn update<B: AutodiffBackend, O: Optimizer<Policy<B>, B>>(
    mut policy: Policy<B>,
    optim: &mut O,
    minibatches: &[LossInputs<B>],
    epochs: usize,
    hist: &Histogram,
    device: &B::Device,
) -> (Policy<B>, f32) {
    let mut policy_sum = Tensor::<B, 1>::zeros([1], device);
    for epoch in 0..epochs {
        for (i, mb) in minibatches.iter().enumerate() {
            let out = clipped_losses(&policy, mb);
            let grads = GradientsParams::from_grads(out.total.backward(), &policy);
            policy = optim.step(3e-4, policy, grads);
            policy_sum = policy_sum + out.policy.clone().detach();

            let policy_loss = out.policy.to_data().to_vec::<f32>().unwrap()[0];
            let value_loss = out.value.to_data().iter::<f32>().next().unwrap_or(0.0);
            let buckets = hist.to_data().len();
            tracing::debug!(epoch, i, policy_loss, value_loss, buckets, "minibatch");
        }
    }
    let total = policy_sum.to_data().to_vec::<f32>().unwrap()[0];
    (policy, total)
}
