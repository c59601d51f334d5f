//! burn (`burn`, `burn_tensor`, `burn_core`, ...): `loss.backward()` returns the gradients
//! as a value, `GradientsParams::from_grads(grads, &model)` takes them and
//! `optim.step(lr, model, grads)` consumes them: nothing accumulates between steps.
//! `into_scalar`, `into_data` and `to_data` read a tensor back to the host, and so do their
//! `_async` forms (the future they return waits for the device when awaited).

use super::{Framework, Gradients};

/// The methods that read a tensor back to the host, each a host value and a wait for the
/// device.
const READS: &[&str] = &[
    "into_scalar",
    "into_data",
    "to_data",
    "into_scalar_async",
    "into_data_async",
    "to_data_async",
];

/// burn's backend computing on the CPU, and its device: a tensor whose backend is it lives
/// in host memory, and reading it waits for no device.
pub(crate) const CPU_BACKENDS: &[&str] = &["NdArray", "NdArrayDevice"];

/// The traits a type parameter standing for a burn backend is bounded by (`B: Backend`,
/// `B: AutodiffBackend`): code generic over one runs wherever its caller's backend does.
pub(crate) const BACKEND_TRAITS: &[&str] = &["Backend", "AutodiffBackend"];

/// burn's backends that may compute on a GPU (or choose at run time), and their devices.
pub(crate) const OTHER_BACKENDS: &[&str] = &[
    "Wgpu",
    "WgpuDevice",
    "WebGpu",
    "Vulkan",
    "Metal",
    "Cuda",
    "CudaDevice",
    "CudaJit",
    "Rocm",
    "RocmDevice",
    "Hip",
    "HipJit",
    "LibTorch",
    "LibTorchDevice",
    "Candle",
    "CandleDevice",
    "Remote",
    "RemoteDevice",
    "Router",
    "Dispatch",
    "DispatchDevice",
    "CubeBackend",
    "JitBackend",
];

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
    to_host: READS,
    device_reads: READS,
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

    #[test]
    fn async_reads_are_reads() {
        // brush's shape: burn's `_async` reads, awaited, wait for the device as the others do.
        let src = r#"
use burn::tensor::Tensor;
async fn f<B: Backend>(epochs: usize, xs: &[Tensor<B, 2>]) {
    for _ in 0..epochs {
        for x in xs {
            log(x.clone().sum().into_scalar_async().await);
            let data = x.clone().into_data_async().await;
            show(x.to_data_async().await, data);
        }
    }
}
"#;
        assert_eq!(hits("item_in_hot_loop", src), [(6, 17), (7, 24), (8, 18)]);
    }
}
