//! cudarc, and Rust-CUDA's `cust`: device buffers without autograd. A `CudaSlice` or a
//! `DeviceBuffer` owns device memory; forgetting one leaks it.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "cudarc",
    crates: &["cudarc", "cust"],
    device_types: &[
        "CudaSlice",
        "DeviceBuffer",
        "DeviceBox",
        "DeviceVariable",
        "UnifiedBuffer",
        "UnifiedBox",
    ],
    host_types: &[],
    gradients: Gradients::None,
    clear_grads: &[],
    backward_and_step: &[],
    steps: &[],
    to_host: &["dtoh_sync_copy", "memcpy_dtov", "clone_dtoh", "as_host_vec"],
    device_reads: &["dtoh_sync_copy", "memcpy_dtov", "clone_dtoh"],
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
    fn forgetting_a_device_buffer_fires() {
        let src = r#"
use cudarc::driver::{CudaSlice, CudaStream};
fn upload(stream: &CudaStream, host: &[f32]) {
    let buf: CudaSlice<f32> = stream.memcpy_stod(host).unwrap();
    std::mem::forget(buf);
}
"#;
        assert_eq!(hits("forget_tensor", src), [(5, 5)]);
    }
}
