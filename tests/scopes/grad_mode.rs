//! Grad mode: `#[no_grad]` and scopes.

use super::support::*;
use super::*;

#[no_grad]
fn grad_inside() -> bool {
    is_grad_enabled()
}

#[no_grad]
fn grad_early(early: bool) -> bool {
    if early {
        return is_grad_enabled();
    }
    is_grad_enabled()
}

#[no_grad]
fn grad_panics() {
    assert!(!is_grad_enabled());
    panic!("no_grad panic");
}

#[no_grad]
async fn grad_async() -> (bool, bool) {
    let before = is_grad_enabled();
    yield_now().await;
    (before, is_grad_enabled())
}

#[gpu_scope(leaks = "deny")]
#[no_grad]
fn scoped_no_grad(dev: &Device) -> (Tensor, bool) {
    (Tensor::zeros(&[1], dev).unwrap(), is_grad_enabled())
}

#[test]
fn no_grad_restores_grad_mode() {
    let dev = dev();
    assert!(is_grad_enabled());
    assert!(!grad_inside());
    assert!(is_grad_enabled());
    assert!(!grad_early(true));
    assert!(is_grad_enabled());
    assert!(!grad_early(false));
    assert!(is_grad_enabled());
    assert!(std::panic::catch_unwind(grad_panics).is_err());
    assert!(is_grad_enabled());
    // Nested in a region with grad off: restored to off.
    no_grad(|| {
        assert!(!grad_inside());
        assert!(!is_grad_enabled());
    });

    // Async: off during each poll, back on between polls.
    let mut fut = std::pin::pin!(grad_async());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert!(is_grad_enabled());
    assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready((false, false)));
    assert!(is_grad_enabled());

    let ((t, grad), events) = capture(|| scoped_no_grad(&dev));
    assert_eq!((t.shape(), grad), (&[1][..], false));
    assert!(events.is_empty());
    assert!(is_grad_enabled());
}
