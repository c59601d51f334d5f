#![deny(warnings)]
use gpuscope::{Device, ScopeValue, Tensor, gpu_scope};

#[gpu_scope]
fn first<T, U: Clone>(items: &[T], extra: U) -> Option<(T, U)>
where
    T: Clone + ScopeValue,
{
    items.first().cloned().map(|t| (t, extra))
}

#[gpu_scope]
fn pass_through<'a, T: ?Sized>(x: &'a T) -> &'a T {
    x
}

#[gpu_scope]
fn default_of<T: Default>() -> T {
    Default::default()
}

#[gpu_scope]
fn sized<const N: usize>(dev: &Device) -> [Tensor; N] {
    std::array::from_fn(|i| Tensor::zeros(&[i + 1], dev).unwrap())
}

fn main() {
    let dev = Device::host().unwrap();
    let ts = vec![Tensor::zeros(&[1], &dev).unwrap()];
    assert!(first(&ts, "x").is_some());
    assert_eq!(pass_through("str"), "str");
    assert_eq!(default_of::<Vec<u8>>(), Vec::<u8>::new());
    assert_eq!(sized::<3>(&dev)[2].shape(), &[3]);
}
