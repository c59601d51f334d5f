#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

#[gpu_scope]
fn make(dev: &Device) -> Tensor {
    Tensor::zeros(&[2, 2], dev).unwrap()
}

#[gpu_scope]
fn unit(dev: &Device) {
    let _t = Tensor::zeros(&[1], dev).unwrap();
}

#[gpu_scope(leaks = "deny")]
fn macro_tail(dev: &Device) -> Vec<Tensor> {
    #![allow(clippy::useless_vec)]
    vec![Tensor::zeros(&[1], dev).unwrap()]
}

#[gpu_scope]
fn label(n: usize) -> String {
    format!("step {n}")
}

#[gpu_scope]
pub(crate) extern "C" fn c_abi(x: u32) -> u32 {
    x + 1
}

fn main() {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host().unwrap();
    assert_eq!(make(&dev).shape(), &[2, 2]);
    unit(&dev);
    assert_eq!(c_abi(1), 2);
    assert_eq!(macro_tail(&dev).len(), 1);
    assert_eq!(label(3), "step 3");
}
