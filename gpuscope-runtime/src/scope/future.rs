//! Scopes over `async fn`: the scope stays open across `.await`s and closes when the
//! future completes or is dropped. While the future is not being polled its frame is
//! kept aside, so other tasks on the same thread never see it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::ScopeValue;
use super::stack::{Frame, ScopeGuard, ScopeOptions, with_scopes};

/// A future running inside a scope. Made by `#[gpu_scope]` on an `async fn`, or by
/// [`scoped`].
pub struct Scoped<F> {
    future: F,
    /// The frame while the future is not being polled (`None` while it is, and after
    /// completion).
    frame: Option<Frame>,
    guard_open: bool,
}

/// Runs `future` inside a scope described by `options`.
///
/// ```
/// use gpuscope_runtime::scope::{scoped, ScopeOptions, LeakPolicy, set_tracking};
/// use gpuscope_runtime::{Device, Tensor};
/// set_tracking(true);
/// let dev = Device::host().unwrap();
/// let fut = scoped(ScopeOptions::new("load").leaks(LeakPolicy::Deny), async move {
///     let t = Tensor::ones(&[8], &dev).unwrap();
///     t
/// });
/// let t = futures_lite_block_on(fut);
/// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0; 8]);
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
pub fn scoped<F: Future>(options: ScopeOptions, future: F) -> Scoped<F>
where
    F::Output: ScopeValue,
{
    let guard = ScopeGuard::enter(options);
    let open = guard.is_open();
    let frame = if open {
        super::stack::detach_top()
    } else {
        None
    };
    std::mem::forget(guard);
    Scoped {
        future,
        frame,
        guard_open: open,
    }
}

impl<F: Future> Future for Scoped<F>
where
    F::Output: ScopeValue,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned; the other fields are never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.guard_open {
            // SAFETY: as above.
            return unsafe { Pin::new_unchecked(&mut this.future) }.poll(cx);
        }
        if let Some(frame) = this.frame.take() {
            with_scopes(|st| st.frames.push(frame));
        }
        // Put the frame aside again even if the future panics.
        struct Detach<'a>(&'a mut Option<Frame>, bool);
        impl Drop for Detach<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    *self.0 = super::stack::detach_top();
                }
            }
        }
        let mut detach = Detach(&mut this.frame, false);
        // SAFETY: as above.
        let polled = unsafe { Pin::new_unchecked(&mut this.future) }.poll(cx);
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(out) => {
                detach.1 = true;
                drop(detach);
                this.guard_open = false;
                let guard = ScopeGuard::reopened();
                guard.escape(&out);
                drop(guard);
                Poll::Ready(out)
            }
        }
    }
}

impl<F> Drop for Scoped<F> {
    fn drop(&mut self) {
        if self.guard_open {
            if let Some(frame) = self.frame.take() {
                with_scopes(|st| st.frames.push(frame));
                drop(ScopeGuard::reopened());
            }
        }
    }
}
