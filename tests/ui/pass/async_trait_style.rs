#![deny(warnings)]
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use gpuscope::{Device, Tensor, gpu_scope, no_grad};

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

trait Load {
    fn load<'a>(&'a self, dev: &'a Device) -> Pin<Box<dyn Future<Output = Tensor> + Send + 'a>>;
}

struct L;

impl Load for L {
    // What `#[async_trait]` writes for `async fn load(&self, dev: &Device) -> Tensor`.
    #[gpu_scope(leaks = "deny")]
    fn load<'a>(&'a self, dev: &'a Device) -> Pin<Box<dyn Future<Output = Tensor> + Send + 'a>> {
        Box::pin(async move {
            let __ret: Tensor = { Tensor::zeros(&[2], dev).unwrap() };
            #[allow(unreachable_code)]
            __ret
        })
    }
}

#[gpu_scope]
#[no_grad]
fn later(dev: &Device) -> impl Future<Output = (Tensor, bool)> + '_ {
    async move {
        (
            Tensor::ones(&[1], dev).unwrap(),
            gpuscope::is_grad_enabled(),
        )
    }
}

fn main() {
    let dev = Device::host().unwrap();
    assert_eq!(block_on(L.load(&dev)).shape(), &[2]);
    let (t, grad) = block_on(later(&dev));
    assert_eq!((t.shape(), grad), (&[1][..], false));
}
