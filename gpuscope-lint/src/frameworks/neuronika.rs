//! neuronika: `backward(seed)` adds into the leaves' gradients and `Optimizer::step`
//! does not clear them: `optimizer.zero_grad()` (or `var.zero_grad()`) must run between
//! steps, as PyTorch's.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "neuronika",
    crates: &["neuronika"],
    device_types: &["VarDiff"],
    host_types: &[],
    gradients: Gradients::Accumulate,
    clear_grads: &["zero_grad"],
    backward_and_step: &[],
    steps: &["step"],
    to_host: &[],
    device_reads: &[],
    conversions_read: false,
    detach: &[],
    no_grad_guards: &[],
    no_grad_closures: &[],
    generic_type_names: false,
    in_place_ops: true,
};

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    #[test]
    fn step_without_zero_grad_fires() {
        let src = r#"
use neuronika::optim;
fn train(model: &Net, optimizer: &optim::SGD, data: &[(Input, Target)]) {
    for (x, y) in data {
        let loss = model.loss(x, y);
        loss.forward();
        loss.backward(1.0);
        optimizer.step();
    }
}
"#;
        assert_eq!(hits("missing_zero_grad", src), [(4, 5)]);
    }
}
