//! dfdx (`dfdx`, `dfdx_core`): `loss.backward()` returns `Gradients`; `opt.update(&mut
//! model, &grads)` consumes them; a model reusing one gradient buffer clears it with
//! `model.zero_grads(&mut grads)`. `array()` and `as_vec()` read back to the host.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "dfdx",
    crates: &["dfdx", "dfdx_core", "dfdx_nn"],
    device_types: &["Tensor"],
    host_types: &[],
    gradients: Gradients::Returned,
    clear_grads: &["zero_grads"],
    backward_and_step: &[],
    steps: &["update"],
    to_host: &["array", "as_vec"],
    device_reads: &["array", "as_vec"],
    conversions_read: false,
    detach: &["retaped"],
    no_grad_guards: &[],
    no_grad_closures: &[],
    generic_type_names: false,
    in_place_ops: false,
};

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    #[test]
    fn returned_gradients_need_no_zero_grad() {
        let src = r#"
use dfdx::prelude::*;
fn train(model: &mut Model, opt: &mut Sgd<Model, f32, Cpu>, data: &[Tensor<Rank1<4>, f32, Cpu>]) {
    let mut grads = model.alloc_grads();
    for x in data {
        let loss = model.forward(x.trace(grads)).square().mean();
        grads = loss.backward();
        opt.update(model, &grads).unwrap();
        model.zero_grads(&mut grads);
    }
}
"#;
        assert_eq!(hits("missing_zero_grad", src), []);
    }
}
