#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

struct Model {
    dev: Device,
}

impl Model {
    #[gpu_scope]
    fn forward(&self, n: usize) -> Tensor {
        Tensor::zeros(&[n], &self.dev).unwrap()
    }

    #[gpu_scope]
    fn device(&self) -> &Device {
        &self.dev
    }
}

fn main() {
    let m = Model {
        dev: Device::host().unwrap(),
    };
    assert_eq!(m.forward(3).shape(), &[3]);
    assert_eq!(m.device(), &m.dev);
}
