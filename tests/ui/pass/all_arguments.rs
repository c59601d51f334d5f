#![deny(warnings)]
use std::sync::Arc;

use gpuscope::{Device, Tensor, gpu_scope};

struct Model {
    device: Device,
    shared: Arc<Device>,
}

impl Model {
    #[gpu_scope(name = "train_step", leaks = "deny", sync, device = &self.device)]
    fn step(&self) -> Tensor {
        Tensor::zeros(&[1], &self.device).unwrap()
    }

    #[gpu_scope(device = self.shared, sync = true, leaks = "warn")]
    fn by_arc(&mut self) -> usize {
        Arc::strong_count(&self.shared)
    }

    #[gpu_scope(sync = false, leaks = "allow", device = self.device,)]
    fn by_value_expr(self) -> Device {
        self.device
    }
}

#[gpu_scope(device = dev, sync)]
fn owned(dev: Device) -> Device {
    dev
}

fn main() {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host().unwrap();
    let mut m = Model {
        device: dev.clone(),
        shared: Arc::new(dev.clone()),
    };
    assert_eq!(m.step().shape(), &[1]);
    assert_eq!(m.by_arc(), 1);
    assert_eq!(m.by_value_expr(), dev);
    assert_eq!(owned(dev.clone()), dev);
}
