//! candle (`candle_core`, `candle_nn`, `candle_transformers`, ...): `backward()` returns
//! a `GradStore` that `optimizer.step(&grads)` consumes, so nothing accumulates between
//! steps; `backward_step(&loss)` does both. `Var` wraps a trainable `Tensor`.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "candle",
    crates: &[
        "candle",
        "candle_core",
        "candle_nn",
        "candle_transformers",
        "candle_flash_attn",
    ],
    device_types: &["Tensor", "Var", "CudaStorage", "MetalStorage", "Storage"],
    host_types: &[],
    gradients: Gradients::Returned,
    clear_grads: &[],
    backward_and_step: &["backward_step"],
    steps: &["step"],
    to_host: &[
        "to_scalar",
        "to_vec0",
        "to_vec1",
        "to_vec2",
        "to_vec3",
        "elem_count",
        "dims",
        "rank",
    ],
    device_reads: &["to_scalar", "to_vec0", "to_vec1", "to_vec2", "to_vec3"],
    conversions_read: false,
    detach: &["detach"],
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
use candle_core::{Tensor, Var};
use candle_nn::{AdamW, Optimizer};
fn train(opt: &mut AdamW, xs: &[Tensor], w: &Var) -> candle_core::Result<f32> {
    let mut sum = 0f32;
    for x in xs {
        let loss = x.matmul(w.as_tensor())?.sum_all()?;
        let grads = loss.backward()?;
        opt.step(&grads)?;
        sum += loss.to_scalar::<f32>()?;
    }
    for x in xs {
        let loss = x.matmul(w.as_tensor())?.sum_all()?;
        opt.backward_step(&loss)?;
    }
    Ok(sum)
}
"#;
        assert_eq!(hits("missing_zero_grad", src), []);
        assert_eq!(hits("graph_accumulation", src), []);
    }
}
