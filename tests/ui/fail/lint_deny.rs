use gpuscope::{Device, Tensor, gpu_scope};

// `forget_tensor` is `deny` by default: one error at the call, and the function is
// still emitted (no "cannot find function `make`" below).
#[gpu_scope]
fn make(dev: &Device) -> usize {
    let t = Tensor::zeros(&[4], dev).unwrap();
    let n = t.numel();
    std::mem::forget(t);
    n
}

fn main() {
    let _ = make(&Device::host().unwrap());
}
