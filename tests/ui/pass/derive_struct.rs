#![deny(warnings)]
use gpuscope::{Device, ScopeValue, Tensor};

#[derive(ScopeValue)]
struct Output {
    logits: Tensor,
    hidden: Vec<Tensor>,
    loss: Option<Tensor>,
    #[scope_value(skip)]
    name: std::cell::Cell<u8>,
}

#[derive(ScopeValue)]
struct Unit;

fn count(v: &impl ScopeValue) -> usize {
    let mut n = 0;
    v.for_each_tensor(&mut |_| n += 1);
    n
}

fn main() {
    let dev = Device::host().unwrap();
    let o = Output {
        logits: Tensor::zeros(&[1], &dev).unwrap(),
        hidden: vec![Tensor::zeros(&[1], &dev).unwrap(); 2],
        loss: None,
        name: Default::default(),
    };
    assert_eq!(count(&o), 3);
    assert_eq!(o.name.get(), 0);
    assert_eq!(count(&Unit), 0);
}
