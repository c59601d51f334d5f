//! Scopes over `async` code: the scope stays open across `.await`s and closes when the
//! future completes or is dropped. While the future is not being polled its frame is
//! kept aside, so other tasks on the same thread never see it.
//!
//! [`ScopeFuture`] (from [`scope_future`], what `#[gpu_scope]` on an `async fn` expands
//! to) hands its output, of any type, to an escape function inside the scope when it
//! completes (`crate::escape::scoped` passes one that escapes its tensors).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::stack::{Frame, ScopeGuard, ScopeOptions, with_scopes};

/// A future running inside a scope, whose output (of any type) is handed to an escape
/// function inside the scope when it completes. Made by [`scope_future`].
#[doc(hidden)]
pub struct ScopeFuture<F, E> {
    // First, as in `Scoped`.
    state: ScopeState,
    future: F,
    escape: Option<E>,
}

/// Runs `future` inside a scope described by `options`; when it completes, `escape`
/// gets its output and the scope's guard, to mark the tensors the output holds as
/// returned (`#[gpu_scope]` passes its autoref dispatch, which works for any type).
#[doc(hidden)]
pub fn scope_future<F, E>(options: ScopeOptions, future: F, escape: E) -> ScopeFuture<F, E>
where
    F: Future,
    E: FnOnce(&F::Output, &ScopeGuard),
{
    ScopeFuture {
        state: ScopeState::open(options),
        future,
        escape: Some(escape),
    }
}

impl<F, E> Future for ScopeFuture<F, E>
where
    F: Future,
    E: FnOnce(&F::Output, &ScopeGuard),
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned; the other fields are never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        let escape = &mut this.escape;
        this.state.poll(future, cx, |out, guard| {
            if let Some(escape) = escape.take() {
                escape(out, guard)
            }
        })
    }
}

/// The scope of a future: its frame while the future is not being polled.
struct ScopeState {
    /// The frame while the future is not being polled (`None` while it is, and after
    /// completion).
    frame: Option<Frame>,
    /// The scope is open (tracking was on, or `sync`) and has not closed yet.
    guard_open: bool,
}

impl ScopeState {
    /// Opens the scope and puts its frame aside until the first poll.
    fn open(options: ScopeOptions) -> ScopeState {
        let guard = ScopeGuard::enter(options);
        let open = guard.is_open();
        let frame = if open {
            super::stack::detach_top()
        } else {
            None
        };
        std::mem::forget(guard);
        ScopeState {
            frame,
            guard_open: open,
        }
    }

    /// Polls `future` with the scope's frame on top of this thread's stack. When it
    /// completes, `escape` gets the output and the scope's guard, then the scope closes.
    fn poll<F: Future>(
        &mut self,
        future: Pin<&mut F>,
        cx: &mut Context<'_>,
        escape: impl FnOnce(&F::Output, &ScopeGuard),
    ) -> Poll<F::Output> {
        if !self.guard_open {
            return future.poll(cx);
        }
        if let Some(frame) = self.frame.take() {
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
        let mut detach = Detach(&mut self.frame, false);
        match future.poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(out) => {
                detach.1 = true;
                drop(detach);
                self.guard_open = false;
                let guard = ScopeGuard::reopened();
                escape(&out, &guard);
                drop(guard);
                Poll::Ready(out)
            }
        }
    }
}

impl Drop for ScopeState {
    fn drop(&mut self) {
        if self.guard_open {
            if let Some(frame) = self.frame.take() {
                with_scopes(|st| st.frames.push(frame));
                drop(ScopeGuard::reopened());
            }
        }
    }
}
