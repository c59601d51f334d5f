#![deny(warnings)]
use gpuscope::{Device, ScopeValue, Tensor};

#[derive(ScopeValue)]
struct Pair(Tensor, #[scope_value(skip)] std::time::Instant, Tensor);

fn count(v: &impl ScopeValue) -> usize {
    let mut n = 0;
    v.for_each_tensor(&mut |_| n += 1);
    n
}

fn main() {
    let dev = Device::host().unwrap();
    let p = Pair(
        Tensor::zeros(&[1], &dev).unwrap(),
        std::time::Instant::now(),
        Tensor::zeros(&[1], &dev).unwrap(),
    );
    assert_eq!(count(&p), 2);
    let _ = p.1;
}
