//! CubeCL (`cubecl`, `cubecl_core`, ...): GPU kernels written in Rust (`#[cube]`
//! functions) and the host API that launches them. On the host, a `Handle` (or a
//! `TensorHandle`) owns device memory that `client.create` / `client.empty` allocated;
//! forgetting one leaks it. Inside a kernel, `Tensor`, `Array`, `SharedMemory` and `Line`
//! are views of memory the host allocated, or registers: arithmetic on them
//! (`acc = acc + input[i]`) allocates nothing, so in a file that uses CubeCL those names
//! are not device memory. There is no autograd.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "cubecl",
    crates: &[
        "cubecl",
        "cubecl_core",
        "cubecl_runtime",
        "cubecl_std",
        "cubecl_linalg",
        "cubecl_matmul",
        "cubecl_reduce",
        "cubecl_convolution",
        "cubecl_attention",
        "cubecl_random",
        "cubecl_cuda",
        "cubecl_hip",
        "cubecl_wgpu",
        "cubecl_cpu",
    ],
    device_types: &["Handle", "TensorHandle"],
    host_types: &[
        "Tensor",
        "Array",
        "SharedMemory",
        "Line",
        "Vector",
        "Slice",
        "SliceMut",
        "Sequence",
    ],
    gradients: Gradients::None,
    clear_grads: &[],
    backward_and_step: &[],
    steps: &[],
    to_host: &["read_one", "read_one_tensor", "read"],
    device_reads: &["read_one", "read_one_tensor"],
    conversions_read: false,
    detach: &[],
    no_grad_guards: &[],
    no_grad_closures: &[],
    generic_type_names: true,
    in_place_ops: false,
};

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    #[test]
    fn arithmetic_on_kernel_views_is_not_an_update_of_device_memory() {
        // The shape of the CubeCL book's reduction kernel (cubecl-book, getting-started).
        let src = r#"
use cubecl::prelude::*;
#[cube(launch_unchecked)]
fn reduce_matrix<F: Float>(input: &Tensor<Line<F>>, output: &mut Tensor<Line<F>>) {
    let mut acc = Line::new(F::new(0.0f32));
    for i in 0..input.shape(1) {
        acc = acc + input[UNIT_POS_X * input.stride(0) + i];
    }
    output[UNIT_POS_X] = acc;
}
"#;
        assert_eq!(hits("out_of_place_update", src), []);
    }

    #[test]
    fn forgetting_a_handle_fires() {
        let src = r#"
use cubecl::prelude::*;
use cubecl::server::Handle;
fn upload<R: Runtime>(client: &ComputeClient<R::Server>, data: &[f32]) {
    let handle: Handle = client.create(f32::as_bytes(data));
    std::mem::forget(handle);
}
"#;
        assert_eq!(hits("forget_tensor", src), [(6, 5)]);
    }

    #[test]
    fn a_handle_of_another_library_is_not_taken_for_cubecls() {
        // tensorflow's eager API (which no table knows) has a `TensorHandle` too; the
        // shape of its `MaybeUninit` array workaround, seen in tensorflow/rust.
        let src = r#"
use std::mem::{self, MaybeUninit};
fn handles(ctx: &Context) -> [TensorHandle; 2] {
    let mut uninit: [MaybeUninit<TensorHandle>; 2] = unsafe { MaybeUninit::uninit().assume_init() };
    let ptr = &mut uninit as *mut _ as *mut [TensorHandle; 2];
    let handles: [TensorHandle; 2] = unsafe { ptr.read() };
    mem::forget(uninit);
    handles
}
"#;
        assert_eq!(hits("forget_tensor", src), []);
    }

    #[test]
    fn a_burn_tensor_beside_cubecl_is_still_device_memory() {
        // Where two libraries disagree about a name, it is taken for device memory.
        let src = r#"
use burn::tensor::Tensor;
use cubecl::prelude::*;
fn keep<B: Backend>(t: Tensor<B, 2>) {
    std::mem::forget(t);
}
"#;
        assert_eq!(hits("forget_tensor", src), [(5, 5)]);
    }
}
