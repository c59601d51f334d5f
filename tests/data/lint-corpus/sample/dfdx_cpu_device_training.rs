//! False-alarm shape (`item_in_hot_loop`, off by default; `gpuscope.toml` here sets it to
//! `warn` for this file), as in a sentiment classifier trained on dfdx (2026-11-27,
//! twentieth round; fixed in the twenty-first): the training function declares its device
//! type as dfdx's `Cpu` (`type Device = dfdx::tensor::Cpu;`, with the device made by
//! `AutoDevice::default()` into a `Cpu` binding, which compiles only where `AutoDevice` is
//! the CPU) and adds every sample's loss to the epoch's total with `loss.array()`, in the
//! loop over samples inside the loop over epochs. Those tensors are in host memory: the
//! reads wait for no device.
//! Reported (true): the same loop on `AutoDevice` alone, which is `Cuda` where the crate is
//! built with dfdx's `cuda` feature, reads each sample's loss from the GPU.

use dfdx::losses::cross_entropy_with_logits_loss;
use dfdx::nn::{DeviceBuildExt, ModuleMut, ZeroGrads};
use dfdx::optim::{Adam, Optimizer};
use dfdx::shapes::{Const, Rank1};
use dfdx::tensor::{AsArray, AutoDevice, Tensor, TensorFrom, Trace};
use dfdx::tensor_ops::Backward;

pub const WORDS: usize = 16;
pub const CLASSES: usize = 2;

type Classifier = (dfdx::nn::builders::Embedding<512, 8>, dfdx::nn::builders::Linear<8, CLASSES>);

pub fn train_on_cpu(samples: &[([usize; WORDS], [f32; CLASSES])], epochs: usize) -> f32 {
    let dev: dfdx::tensor::Cpu = AutoDevice::default();
    type Device = dfdx::tensor::Cpu;
    let mut model = dev.build_module::<Classifier, f32>();
    let mut grads = model.alloc_grads();
    let mut opt = Adam::new(&model, Default::default());
    let mut total = 0.0;
    for _ in 0..epochs {
        total = 0.0;
        for (words, label) in samples {
            let x: Tensor<(Const<WORDS>,), usize, Device> = dev.tensor(*words);
            let y: Tensor<Rank1<CLASSES>, f32, Device> = dev.tensor(*label);
            let logits: Tensor<Rank1<CLASSES>, f32, Device, _> = model.forward_mut(x.traced(grads));
            let loss = cross_entropy_with_logits_loss(logits, y);
            total += loss.array();
            grads = loss.backward();
            opt.update(&mut model, &grads).unwrap();
            model.zero_grads(&mut grads);
        }
    }
    total
}

pub fn train_on_auto_device(samples: &[([usize; WORDS], [f32; CLASSES])], epochs: usize) -> f32 {
    let dev = AutoDevice::default();
    let mut model = dev.build_module::<Classifier, f32>();
    let mut grads = model.alloc_grads();
    let mut opt = Adam::new(&model, Default::default());
    let mut total = 0.0;
    for _ in 0..epochs {
        total = 0.0;
        for (words, label) in samples {
            let x: Tensor<(Const<WORDS>,), usize, AutoDevice> = dev.tensor(*words);
            let y: Tensor<Rank1<CLASSES>, f32, AutoDevice> = dev.tensor(*label);
            let logits: Tensor<Rank1<CLASSES>, f32, AutoDevice, _> = model.forward_mut(x.traced(grads));
            let loss = cross_entropy_with_logits_loss(logits, y);
            total += loss.array();
            grads = loss.backward();
            opt.update(&mut model, &grads).unwrap();
            model.zero_grads(&mut grads);
        }
    }
    total
}
