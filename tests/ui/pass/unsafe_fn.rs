#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

/// # Safety
/// `n` must be at least 1.
#[gpu_scope]
unsafe fn make(dev: &Device, n: usize) -> Tensor {
    let v = [1.0f32; 4];
    // SAFETY: `n >= 1` by contract.
    let first = unsafe { *v.get_unchecked(n - 1) };
    Tensor::full(&[n], first, dev).unwrap()
}

fn main() {
    let dev = Device::host().unwrap();
    // SAFETY: 2 >= 1.
    let t = unsafe { make(&dev, 2) };
    assert_eq!(t.shape(), &[2]);
}
