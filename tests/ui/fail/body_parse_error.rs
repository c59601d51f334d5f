// A body that does not parse is reported once, by rustc, with or without the
// attributes: the expansion keeps the unparsed body as it is.
use gpuscope::{Device, Tensor, gpu_scope, no_grad};

#[gpu_scope]
fn step(dev: &Device) -> Tensor {
    let t = Tensor::zeros(&[1], dev).unwrap()
    t
}

#[gpu_scope(leaks = "deny", sync)]
async fn load(dev: &Device) -> Tensor {
    let n = ;
    Tensor::zeros(&[n], dev).unwrap()
}

#[no_grad]
fn eval(x: u32) -> u32 {
    x +
}

#[gpu_scope]
#[no_grad]
async fn both(x: u32) -> u32 {
    match x { 0 => 1, _ => }
}

// Two mistakes, two errors: the argument's (from the attribute) and the body's.
#[gpu_scope(leaks = "never")]
fn bad_argument_too() {
    let = 1;
}

fn main() {
    let dev = Device::host().unwrap();
    let _ = step(&dev);
    let _ = load(&dev);
    let _ = eval(1);
    let _ = both(1);
    bad_argument_too();
}
