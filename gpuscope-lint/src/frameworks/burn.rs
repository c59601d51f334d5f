//! burn (`burn`, `burn_tensor`, `burn_core`, ...): `loss.backward()` returns the gradients
//! as a value, `GradientsParams::from_grads(grads, &model)` takes them and
//! `optim.step(lr, model, grads)` consumes them: nothing accumulates between steps.
//! `into_scalar`, `into_data` and `to_data` read a tensor back to the host.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "burn",
    crates: &[
        "burn",
        "burn_tensor",
        "burn_core",
        "burn_autodiff",
        "burn_train",
        "burn_optim",
        "burn_nn",
        "burn_cuda",
        "burn_wgpu",
        "burn_tch",
        "burn_candle",
        "burn_ndarray",
        "burn_cubecl",
    ],
    device_types: &["Tensor"],
    host_types: &["TensorData"],
    gradients: Gradients::Returned,
    clear_grads: &[],
    backward_and_step: &[],
    steps: &["step"],
    to_host: &["into_scalar", "into_data", "to_data", "into_scalar_async"],
    device_reads: &["into_scalar", "into_data", "to_data"],
    conversions_read: false,
    detach: &["detach", "inner"],
    no_grad_guards: &[],
    no_grad_closures: &[],
    generic_type_names: false,
    in_place_ops: false,
};

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    #[test]
    fn gradients_consumed_by_step_need_no_zero_grad() {
        let src = r#"
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::Tensor;
fn train<B: AutodiffBackend>(mut model: Model<B>, mut optim: impl Optimizer, data: Vec<Batch<B>>) {
    let mut total = 0.0;
    for batch in data {
        let loss = model.forward(batch.images).mean();
        total += loss.clone().into_scalar().elem::<f32>();
        let grads = loss.backward();
        let grads = GradientsParams::from_grads(grads, &model);
        model = optim.step(1e-3, model, grads);
    }
}
"#;
        assert_eq!(hits("missing_zero_grad", src), []);
        assert_eq!(hits("graph_accumulation", src), []);
    }
}
