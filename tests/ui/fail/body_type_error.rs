use gpuscope::{Device, Tensor, gpu_scope};

#[gpu_scope]
fn step(dev: &Device) -> Tensor {
    let t = Tensor::zeros(&[2], dev).unwrap();
    let n: usize = t.shape();
    let _ = n;
    t
}

fn main() {
    let _ = step(&Device::host().unwrap());
}
