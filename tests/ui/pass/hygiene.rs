#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

// The expansion's locals cannot clash with the user's.
#[gpu_scope]
fn shadowing(dev: &Device) -> Tensor {
    let __gpuscope_scope = 1;
    let __gpuscope_ret = Tensor::zeros(&[__gpuscope_scope], dev).unwrap();
    __gpuscope_ret
}

#[gpu_scope]
fn r#match(x: u8) -> u8 {
    x
}

mod nested {
    // Items inside the body, and nested `#[gpu_scope]` functions.
    use gpuscope::{Device, Tensor, gpu_scope};

    #[gpu_scope]
    pub fn outer(dev: &Device) -> Tensor {
        #[gpu_scope]
        fn inner(dev: &Device) -> Tensor {
            Tensor::ones(&[2], dev).unwrap()
        }
        struct Local;
        impl Local {
            fn value() -> u8 {
                return 1;
            }
        }
        let _ = Local::value();
        inner(dev)
    }
}

fn main() {
    let dev = Device::host().unwrap();
    assert_eq!(shadowing(&dev).shape(), &[1]);
    assert_eq!(r#match(3), 3);
    assert_eq!(nested::outer(&dev).shape(), &[2]);
}
