//! gpuscope itself (`gpuscope`, `gpuscope_runtime`): PyTorch's semantics. `backward()`
//! adds into each parameter's gradient; `Optimizer::zero_grad` sets them to `None`;
//! `GradModeGuard::no_grad()` and `no_grad(|| ..)` turn recording off.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "gpuscope",
    crates: &["gpuscope", "gpuscope_runtime"],
    device_types: &["Tensor"],
    host_types: &[],
    gradients: Gradients::Accumulate,
    clear_grads: &["zero_grad"],
    backward_and_step: &[],
    steps: &["step"],
    to_host: &["item", "to_vec", "to_f64_vec", "numel", "nbytes"],
    device_reads: &["item", "to_vec", "to_f64_vec"],
    conversions_read: false,
    detach: &["detach"],
    no_grad_guards: &[&["GradModeGuard", "no_grad"], &["no_grad_guard"]],
    no_grad_closures: &["no_grad"],
    generic_type_names: false,
    in_place_ops: true,
};

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    #[test]
    fn zero_grad_clears_and_the_guard_turns_gradients_off() {
        let src = r#"
use gpuscope::{GradModeGuard, Tensor, optim::Optimizer};
fn train(model: &Model, opt: &mut Sgd, data: &[Tensor]) -> Result<(), TensorError> {
    for x in data {
        model.forward(x)?.mean()?.backward()?;
        opt.step()?;
        opt.zero_grad();
    }
    for x in data {
        model.forward(x)?.mean()?.backward()?;
        opt.step()?;
    }
    let _guard = GradModeGuard::no_grad();
    model.forward(&data[0])?.mean()?.backward()?;
    Ok(())
}
"#;
        assert_eq!(hits("missing_zero_grad", src), [(9, 5)]);
        assert_eq!(hits("backward_in_no_grad", src), [(14, 5)]);
    }
}
