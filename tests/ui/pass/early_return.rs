#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

#[gpu_scope(leaks = "deny")]
fn pick(dev: &Device, which: u8) -> Tensor {
    let a = Tensor::zeros(&[1], dev).unwrap();
    match which {
        0 => return a,
        1 => {
            for i in 0.. {
                if i == 3 {
                    return Tensor::ones(&[i], dev).unwrap();
                }
            }
        }
        _ => {}
    }
    let r = 'found: {
        if which == 2 {
            break 'found a;
        }
        Tensor::full(&[2], 2.0, dev).unwrap()
    };
    r
}

#[gpu_scope]
fn forever(dev: &Device) -> Tensor {
    loop {
        return Tensor::zeros(&[1], dev).unwrap();
    }
}

#[gpu_scope]
#[allow(dead_code)]
fn not_yet(_dev: &Device) -> Tensor {
    todo!()
}

#[gpu_scope]
#[allow(dead_code)]
fn diverges() -> ! {
    panic!("never returns")
}

fn main() {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host().unwrap();
    assert_eq!(pick(&dev, 0).shape(), &[1]);
    assert_eq!(pick(&dev, 1).shape(), &[3]);
    assert_eq!(pick(&dev, 2).shape(), &[1]);
    assert_eq!(pick(&dev, 9).shape(), &[2]);
    assert_eq!(forever(&dev).shape(), &[1]);
}
