#![deny(warnings)]
use gpuscope::{Device, Tensor, TensorError, gpu_scope};

#[derive(Debug)]
enum MyError {
    Tensor(TensorError),
    Empty,
}

impl From<TensorError> for MyError {
    fn from(e: TensorError) -> Self {
        MyError::Tensor(e)
    }
}

#[gpu_scope(leaks = "deny")]
fn load(dev: &Device, n: usize) -> Result<Tensor, MyError> {
    if n == 0 {
        return Err(MyError::Empty);
    }
    let t = Tensor::zeros(&[n], dev)?;
    Ok(t)
}

#[gpu_scope]
fn boxed(dev: &Device) -> Result<Vec<Tensor>, Box<dyn std::error::Error>> {
    let a = Tensor::ones(&[1], dev)?;
    let parsed: u32 = "7".parse()?;
    Ok(vec![a; parsed as usize])
}

fn main() {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host().unwrap();
    assert_eq!(load(&dev, 2).unwrap().shape(), &[2]);
    assert!(matches!(load(&dev, 0), Err(MyError::Empty)));
    if let Err(MyError::Tensor(e)) = load(&dev, 1) {
        panic!("{e}");
    }
    assert_eq!(boxed(&dev).unwrap().len(), 7);
}
