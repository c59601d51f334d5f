//! `async fn` scopes: open across `.await`s, closed when the future completes or is
//! dropped.

use super::support::*;
use super::*;

struct Loader {
    dev: Device,
}

impl Loader {
    #[gpu_scope(name = "load", allow(scope_escape))]
    async fn load(&self, sink: &mut Vec<Tensor>) -> Result<Tensor, TensorError> {
        let a = Tensor::zeros(&[1], &self.dev)?;
        yield_now().await;
        // Made after an await: still owned by this scope.
        assert_eq!(current_scope().as_deref(), Some("load"));
        let leaked = Tensor::ones(&[6], &self.dev)?;
        sink.push(leaked);
        yield_now().await;
        drop(a);
        let out = Tensor::zeros(&[2], &self.dev)?;
        Ok(out)
    }

    #[gpu_scope(name = "load_forever", allow(scope_escape))]
    async fn never_finishes(&self, sink: &mut Vec<Tensor>) -> Tensor {
        sink.push(Tensor::zeros(&[3], &self.dev).unwrap());
        std::future::pending::<()>().await;
        unreachable!()
    }

    /// What `#[async_trait]` generates for an `async fn` in a trait.
    #[gpu_scope(name = "boxed_load", leaks = "deny")]
    fn boxed_load(&self) -> Pin<Box<dyn Future<Output = Tensor> + '_>> {
        Box::pin(async move {
            yield_now().await;
            assert_eq!(current_scope().as_deref(), Some("boxed_load"));
            Tensor::zeros(&[4], &self.dev).unwrap()
        })
    }
}

/// A return type that is not a `ScopeValue`: let through untouched.
struct Opaque(u32);

#[gpu_scope(name = "async_opaque", leaks = "deny")]
async fn async_opaque(dev: Device) -> Opaque {
    yield_now().await;
    let t = Tensor::zeros(&[1], &dev).unwrap();
    Opaque(t.numel() as u32)
}

#[test]
fn async_scope_stays_open_across_awaits() {
    let dev = dev();
    let loader = Loader { dev: dev.clone() };
    let mut sink = Vec::new();
    let (t, events) = capture(|| {
        let mut fut = std::pin::pin!(loader.load(&mut sink));
        let mut cx = Context::from_waker(Waker::noop());
        let mut polls = 0;
        loop {
            polls += 1;
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                break v;
            }
            // Between polls, the scope is put aside: this thread sees none.
            assert_eq!(scope_depth(), 0);
            assert_eq!(current_scope(), None);
            assert!(polls < 10);
        }
    });
    assert_eq!(t.unwrap().shape(), &[2]);
    let leaks = leaks_of(&events, "load");
    assert_eq!(leaks.len(), 1, "{events:?}");
    assert_eq!(leaks[0].get("shape"), "[6]");
    assert_eq!(scope_depth(), 0);

    let (t, events) = capture(|| block_on(loader.boxed_load()));
    assert_eq!(t.shape(), &[4]);
    assert!(events.is_empty(), "{events:?}");

    let (o, events) = capture(|| block_on(async_opaque(dev.clone())));
    assert_eq!(o.0, 1);
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn dropping_an_async_scope_closes_it() {
    let dev = dev();
    let loader = Loader { dev };
    let mut sink = Vec::new();
    let (_, events) = capture(|| {
        let mut fut = Box::pin(loader.never_finishes(&mut sink));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(scope_depth(), 0);
        drop(fut); // closes the scope: its leak is reported now
    });
    let leaks = leaks_of(&events, "load_forever");
    assert_eq!(leaks.len(), 1, "{events:?}");
    assert_eq!(leaks[0].get("shape"), "[3]");
    assert_eq!(scope_depth(), 0);
}

#[gpu_scope(name = "async_escape", leaks = "deny")]
async fn async_escape(dev: &Device) -> (Tensor, Vec<Tensor>) {
    yield_now().await;
    let a = Tensor::zeros(&[1], dev).unwrap();
    if a.numel() == 1 {
        return (a, vec![Tensor::ones(&[2], dev).unwrap()]);
    }
    (a, Vec::new())
}

#[test]
fn async_return_escapes() {
    let dev = dev();
    let ((a, v), events) = capture(|| block_on(async_escape(&dev)));
    assert_eq!((a.shape(), v.len()), (&[1][..], 1));
    assert!(events.is_empty(), "{events:?}");
}

impl Loader {
    /// A returned future with `device` and `sync`: evaluated at the first poll, inside
    /// the scope.
    #[gpu_scope(name = "boxed_on_device", leaks = "deny", sync, device = &self.dev)]
    fn boxed_on_device(&self) -> Pin<Box<dyn Future<Output = Tensor> + '_>> {
        Box::pin(async move {
            yield_now().await;
            assert_eq!(current_scope().as_deref(), Some("boxed_on_device"));
            Tensor::zeros(&[19], &self.dev).unwrap()
        })
    }
}

#[test]
fn returned_future_with_device() {
    let loader = Loader { dev: dev() };
    let fut = loader.boxed_on_device();
    // Building the future opens nothing.
    assert_eq!(scope_depth(), 0);
    let (t, events) = capture(|| block_on(fut));
    assert_eq!(t.shape(), &[19]);
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(scope_depth(), 0);
}

fn assert_send<T: Send>(_: &T) {}

#[gpu_scope(device = dev, sync)]
async fn send_future(dev: Device) -> Tensor {
    yield_now().await;
    Tensor::zeros(&[1], &dev).unwrap()
}

#[test]
fn async_scopes_stay_send() {
    let dev = dev();
    let fut = send_future(dev);
    assert_send(&fut);
    let t = std::thread::spawn(move || block_on(fut)).join().unwrap();
    assert_eq!(t.shape(), &[1]);
}
