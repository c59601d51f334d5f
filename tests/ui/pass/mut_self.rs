#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

struct Trainer {
    dev: Device,
    step: usize,
    history: Vec<usize>,
}

impl Trainer {
    #[gpu_scope(leaks = "deny")]
    fn step(&mut self) -> Tensor {
        self.step += 1;
        self.history.push(self.step);
        Tensor::zeros(&[self.step], &self.dev).unwrap()
    }
}

fn main() {
    let mut t = Trainer {
        dev: Device::host().unwrap(),
        step: 0,
        history: Vec::new(),
    };
    t.step();
    assert_eq!(t.step().shape(), &[2]);
    assert_eq!(t.history, vec![1, 2]);
}
