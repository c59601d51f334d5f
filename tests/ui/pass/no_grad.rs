#![deny(warnings)]
use std::future::Future;
use std::task::{Context, Poll, Waker};

use gpuscope::{Device, Tensor, gpu_scope, is_grad_enabled, no_grad};

#[no_grad]
fn eval() -> bool {
    is_grad_enabled()
}

struct Model(Device);

impl Model {
    #[no_grad]
    #[gpu_scope]
    fn predict(&self) -> (Tensor, bool) {
        (Tensor::zeros(&[1], &self.0).unwrap(), is_grad_enabled())
    }

    #[gpu_scope]
    #[no_grad]
    async fn predict_async(&self) -> bool {
        std::future::ready(()).await;
        is_grad_enabled()
    }
}

#[no_grad]
async fn parse(text: &str) -> Result<(u32, bool), Box<dyn std::error::Error>> {
    std::future::ready(()).await;
    let n: u32 = text.parse()?;
    Ok((n, is_grad_enabled()))
}

#[no_grad]
fn unit() {
    assert!(!is_grad_enabled());
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn main() {
    assert!(!eval());
    unit();
    // The runtime's `no_grad` function is still there beside the attribute.
    assert!(!no_grad(is_grad_enabled));
    let m = Model(Device::host().unwrap());
    assert!(!m.predict().1);
    assert!(!block_on(m.predict_async()));
    assert_eq!(block_on(parse("4")).unwrap(), (4, false));
    assert!(block_on(parse("x")).is_err());
    assert!(is_grad_enabled());
}
