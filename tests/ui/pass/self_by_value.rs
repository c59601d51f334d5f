#![deny(warnings)]
use gpuscope::{Device, Tensor, gpu_scope};

struct Batch {
    x: Tensor,
    y: Tensor,
}

impl Batch {
    #[gpu_scope]
    fn into_parts(self) -> (Tensor, Tensor) {
        (self.x, self.y)
    }

    #[gpu_scope]
    fn consume(mut self: Box<Self>) -> Tensor {
        self.x = self.y.clone();
        self.x
    }
}

fn main() {
    let dev = Device::host().unwrap();
    let b = Batch {
        x: Tensor::zeros(&[1], &dev).unwrap(),
        y: Tensor::ones(&[2], &dev).unwrap(),
    };
    let (x, y) = b.into_parts();
    assert_eq!((x.shape(), y.shape()), (&[1][..], &[2][..]));
    let b = Box::new(Batch { x, y });
    assert_eq!(b.consume().shape(), &[2]);
}
