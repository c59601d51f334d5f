#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

trait Module {
    fn device(&self) -> &Device;

    #[gpu_scope(name = "module_forward")]
    fn forward(&self, n: usize) -> Tensor {
        Tensor::zeros(&[n], self.device()).unwrap()
    }

    fn make() -> Self
    where
        Self: Sized;
}

struct Linear(Device);

impl Module for Linear {
    fn device(&self) -> &Device {
        &self.0
    }

    #[gpu_scope]
    fn make() -> Self {
        Linear(Device::host().unwrap())
    }
}

fn main() {
    let l = Linear::make();
    assert_eq!(l.forward(4).shape(), &[4]);
}
