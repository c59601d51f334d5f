#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

#[gpu_scope]
fn tensors(dev: &Device, n: usize) -> impl Iterator<Item = Tensor> + '_ {
    (0..n).map(move |i| Tensor::zeros(&[i + 1], dev).unwrap())
}

#[gpu_scope]
fn early(flag: bool) -> impl std::fmt::Debug {
    if flag {
        return 1;
    }
    2
}

#[gpu_scope]
fn boxed_closure() -> Box<dyn Fn(i32) -> i32> {
    Box::new(|x| x + 1)
}

fn main() {
    let dev = Device::host().unwrap();
    assert_eq!(tensors(&dev, 3).count(), 3);
    assert_eq!(format!("{:?}", early(true)), "1");
    assert_eq!(boxed_closure()(1), 2);
}
