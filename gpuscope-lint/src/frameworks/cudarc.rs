//! cudarc, and Rust-CUDA's `cust`: device buffers without autograd. A `CudaSlice` or a
//! `DeviceBuffer` owns device memory; forgetting one leaks it. Reads to the host:
//! cudarc's `dtoh_sync_copy`, `memcpy_dtov` and `clone_dtoh`, `cust`'s `copy_to` and
//! `as_host_vec`.

use super::{Framework, Gradients};

pub(crate) const TABLE: Framework = Framework {
    name: "cudarc",
    crates: &["cudarc", "cust"],
    device_types: &[
        "CudaSlice",
        "DeviceBuffer",
        "DeviceBox",
        "DeviceVariable",
        "DeviceSlice",
        "UnifiedBuffer",
        "UnifiedBox",
    ],
    host_types: &[],
    gradients: Gradients::None,
    clear_grads: &[],
    backward_and_step: &[],
    steps: &[],
    to_host: &["dtoh_sync_copy", "memcpy_dtov", "clone_dtoh", "as_host_vec"],
    // `cust`'s `copy_to(&mut host)` (`CopyDestination`) reads only from device memory: host
    // slices and raw pointers have a `copy_to` too (`item_in_hot_loop`'s common names).
    device_reads: &["dtoh_sync_copy", "memcpy_dtov", "clone_dtoh", "copy_to"],
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

    /// llm.rs copies every validation batch's per-token losses to the host with `cust`'s
    /// `copy_to`; a host slice's or a raw pointer's `copy_to` reads no device.
    #[test]
    fn custs_copy_to_reads_device_memory() {
        let src = r#"
use cust::memory::{DeviceBuffer, DeviceSlice};
struct Acts { losses: DeviceBuffer<f32>, probs: DeviceSlice<f32> }
fn f(acts: &Acts, host: &mut [f32], staged: &[f32], p: *const f32, q: *mut f32, n: usize) {
    for _ in 0..n {
        for _ in 0..n {
            acts.losses.copy_to(host).unwrap();
            acts.probs.copy_to(host).unwrap();
            staged.copy_to(&mut acts.losses).unwrap();
            unsafe { p.copy_to(q, 4) };
        }
    }
}
"#;
        assert_eq!(hits("item_in_hot_loop", src), [(7, 13), (8, 13)]);
    }
}
