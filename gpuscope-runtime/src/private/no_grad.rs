//! `#[no_grad]` on an `async fn` (or a function returning an async block): grad mode
//! is per thread, and a future may move between threads at each `.await`, so it is off
//! during each poll of the future only.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::grad::GradModeGuard;

/// `future`, with grad mode off during each of its polls.
#[inline]
pub fn no_grad_future<F: Future>(future: F) -> NoGradFuture<F> {
    NoGradFuture { future }
}

/// A future polled with grad mode off; made by [`no_grad_future`].
pub struct NoGradFuture<F> {
    future: F,
}

impl<F: Future> Future for NoGradFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _no_grad = GradModeGuard::no_grad();
        // SAFETY: `future` is structurally pinned: never moved out of the pinned wrapper.
        unsafe { self.map_unchecked_mut(|s| &mut s.future) }.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grad::is_grad_enabled;
    use std::task::Waker;

    #[test]
    fn off_during_polls_only() {
        let polls = std::cell::RefCell::new(Vec::new());
        let mut fut = std::pin::pin!(no_grad_future(std::future::poll_fn(|_| {
            polls.borrow_mut().push(is_grad_enabled());
            if polls.borrow().len() < 2 {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert!(is_grad_enabled());
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert!(is_grad_enabled());
        assert_eq!(*polls.borrow(), vec![false, false]);
    }
}
