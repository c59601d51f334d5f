//! tract (`tract_core`, `tract_onnx`, ...): an inference engine whose `Tensor` lives in
//! host memory, and no autograd. In a file that uses tract, `Tensor` is not device memory.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "tract",
    crates: &[
        "tract_core",
        "tract_onnx",
        "tract_nnef",
        "tract_hir",
        "tract_data",
        "tract_linalg",
        "tract_tflite",
    ],
    device_types: &[],
    host_types: &["Tensor"],
    gradients: Gradients::None,
    clear_grads: &[],
    backward_and_step: &[],
    steps: &[],
    to_host: &["to_scalar", "as_slice", "to_array_view"],
    device_reads: &[],
    conversions_read: false,
    detach: &[],
    no_grad_guards: &[],
    no_grad_closures: &[],
    generic_type_names: false,
    in_place_ops: false,
};

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    #[test]
    fn a_tract_tensor_is_host_memory() {
        let src = r#"
use tract_core::prelude::*;
fn keep(t: Tensor) {
    std::mem::forget(t);
}
"#;
        assert_eq!(hits("forget_tensor", src), []);
    }
}
