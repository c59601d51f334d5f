//! tch (`tch`, PyTorch's C++ API): PyTorch's semantics. `backward()` adds into
//! gradients; `opt.zero_grad()` clears them; `opt.backward_step(&loss)` (and its `_clip`
//! forms) clears, runs backward and steps in one call. `double_value`, `int64_value` and
//! `f64::try_from(&t)` read back to the host; `tch::no_grad(|| ..)` and `no_grad_guard()`
//! turn recording off.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "tch",
    crates: &["tch"],
    device_types: &["Tensor", "PyTensor"],
    host_types: &[],
    gradients: Gradients::Accumulate,
    clear_grads: &["zero_grad"],
    backward_and_step: &[
        "backward_step",
        "backward_step_clip",
        "backward_step_clip_norm",
    ],
    steps: &["step"],
    to_host: &[
        "double_value",
        "int64_value",
        "f_double_value",
        "f_int64_value",
        "numel",
        "size",
        "dim",
    ],
    device_reads: &[
        "double_value",
        "int64_value",
        "f_double_value",
        "f_int64_value",
    ],
    conversions_read: true,
    detach: &["detach", "detach_"],
    no_grad_guards: &[&["no_grad_guard"], &["NoGradGuard", "new"]],
    no_grad_closures: &["no_grad"],
    generic_type_names: false,
    in_place_ops: true,
};

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    #[test]
    fn backward_step_clears_and_plain_step_does_not() {
        let src = r#"
use tch::{nn, nn::OptimizerConfig, Tensor};
fn train(opt: &mut nn::Optimizer, net: &impl nn::Module, xs: &[Tensor]) {
    for x in xs {
        let loss = net.forward(x).mean(tch::Kind::Float);
        opt.backward_step(&loss);
    }
    for x in xs {
        let loss = net.forward(x).mean(tch::Kind::Float);
        loss.backward();
        opt.step();
    }
}
"#;
        assert_eq!(hits("missing_zero_grad", src), [(8, 5)]);
    }
}
