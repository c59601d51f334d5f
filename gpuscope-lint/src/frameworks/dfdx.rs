//! dfdx (`dfdx`, `dfdx_core`): `loss.backward()` returns `Gradients`; `opt.update(&mut
//! model, &grads)` consumes them; a model reusing one gradient buffer clears it with
//! `model.zero_grads(&mut grads)`. `array()` and `as_vec()` read back to the host.

use super::{Framework, Gradients};

/// dfdx's device computing on the CPU: a tensor whose device type (its third type
/// parameter, `Tensor<Rank1<4>, f32, Cpu>`) is it lives in host memory, and reading it
/// waits for no device.
pub(crate) const CPU_DEVICES: &[&str] = &["Cpu"];

/// dfdx's devices that compute on a GPU. `AutoDevice` is in neither list: it is `Cpu` or
/// `Cuda` by a cargo feature, so naming it decides nothing (and a `Cpu` binding given an
/// `AutoDevice`, `let dev: Cpu = AutoDevice::default()`, compiles only where it is the CPU).
pub(crate) const OTHER_DEVICES: &[&str] = &["Cuda", "Webgpu"];

/// The trait a type parameter standing for a dfdx device is bounded by (`D: Device<f32>`).
pub(crate) const DEVICE_TRAITS: &[&str] = &["Device"];

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

    #[test]
    fn reads_on_the_cpu_device_wait_for_no_device() {
        // dfdx-transformer-sentiment's shape: the device type is dfdx's `Cpu` (an alias of it
        // in the function, or imported), so the loss read every sample is host memory.
        // `AutoDevice` is `Cpu` or `Cuda` by a cargo feature, so it decides nothing: given
        // to a `Cpu` binding, it is the CPU.
        let src = r#"
use dfdx::tensor::{AutoDevice, AsArray, Cpu, Tensor};
fn local_alias(epochs: usize, xs: &[Vec<u32>]) {
    let dev: dfdx::tensor::Cpu = AutoDevice::default();
    type Device = dfdx::tensor::Cpu;
    let mut model = dev.build_module::<Model, f32>();
    for _ in 0..epochs {
        for x in xs {
            let x: Tensor<Rank1<4>, f32, Device> = dev.tensor(x);
            let logits: Tensor<Rank1<1>, f32, Device> = model.forward_mut(x);
            let loss = bce_loss(logits, target(&dev));
            total += loss.array();
        }
    }
}
fn imported(n: usize) {
    let dev = Cpu::default();
    for i in 0..n {
        for j in 0..n {
            let t: Tensor<Rank1<4>, f32, Cpu> = cell(&dev, i, j);
            let v = t.as_vec();
        }
    }
}
fn auto_only(epochs: usize, xs: &[Vec<u32>]) {
    let dev = AutoDevice::default();
    for _ in 0..epochs {
        for x in xs {
            let t: Tensor<Rank1<4>, f32, AutoDevice> = model.loss(&dev, x);
            total += t.array();
        }
    }
}
fn generic<D: Device<f32>>(dev: &D, n: usize) {
    for i in 0..n {
        for j in 0..n {
            let t: Tensor<Rank1<4>, f32, D> = cell(dev, i, j);
            let v = t.array();
        }
    }
}
"#;
        // `AutoDevice` alone may be a GPU, and so may a generic device.
        assert_eq!(hits("item_in_hot_loop", src), [(30, 22), (38, 21)]);
        // On dfdx's `Cuda` every read waits.
        let gpu = src
            .replace("dfdx::tensor::Cpu", "dfdx::tensor::Cuda")
            .replace("Cpu::default()", "Cuda::default()");
        assert_eq!(
            hits("item_in_hot_loop", &gpu),
            [(12, 22), (21, 21), (30, 22), (38, 21)]
        );
    }
}
