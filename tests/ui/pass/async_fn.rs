#![deny(warnings)]
use std::future::Future;
use std::task::{Context, Poll, Waker};

use gpuscope::{Device, Tensor, TensorError, gpu_scope};

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

struct Loader {
    dev: Device,
}

impl Loader {
    #[gpu_scope(leaks = "deny")]
    async fn load(&self, n: usize) -> Result<Tensor, TensorError> {
        std::future::ready(()).await;
        let t = Tensor::zeros(&[n], &self.dev)?;
        if n == 0 {
            return Ok(t);
        }
        Ok(t)
    }

    #[gpu_scope]
    async fn consume(self) -> Device {
        self.dev
    }

    #[gpu_scope]
    async fn bump(&mut self) {}
}

// `?` converting the error: the async block's output type must be known.
#[gpu_scope]
async fn parse_and_make(
    dev: &Device,
    text: &str,
) -> Result<Vec<Tensor>, Box<dyn std::error::Error>> {
    let n: usize = text.parse()?;
    std::future::ready(()).await;
    Ok((0..n)
        .map(|_| Tensor::zeros(&[1], dev))
        .collect::<Result<_, _>>()?)
}

#[gpu_scope(name = "free_async")]
async fn free(dev: &Device) -> Tensor {
    Tensor::ones(&[1], dev).unwrap()
}

trait Source {
    fn device(&self) -> &Device;

    // An `async fn` with a default body in a trait.
    #[gpu_scope]
    async fn fetch(&self, n: usize) -> Tensor {
        std::future::ready(()).await;
        Tensor::zeros(&[n], self.device()).unwrap()
    }
}

impl Source for Loader {
    fn device(&self) -> &Device {
        &self.dev
    }
}

fn assert_send<T: Send>(t: T) -> T {
    t
}

fn main() {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host().unwrap();
    let mut l = Loader { dev: dev.clone() };
    assert_eq!(block_on(l.load(3)).unwrap().shape(), &[3]);
    block_on(l.bump());
    assert_eq!(block_on(assert_send(free(&dev))).shape(), &[1]);
    assert_eq!(block_on(parse_and_make(&dev, "3")).unwrap().len(), 3);
    assert!(block_on(parse_and_make(&dev, "x")).is_err());
    assert_eq!(block_on(l.fetch(2)).shape(), &[2]);
    assert_eq!(block_on(l.consume()), dev);
}
