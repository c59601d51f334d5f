//! [`with_leaf_grad_hook`]: a call when a leaf's gradient is final in a backward pass
//! (what data parallelism needs to start communicating a bucket of gradients).

use crate::tensor::Tensor;

/// A leaf hook with its borrow erased (see [`with_leaf_grad_hook`]).
type ErasedHook = *const (dyn Fn(&Tensor) + 'static);

thread_local! {
    /// The hook of [`with_leaf_grad_hook`], while one runs on this thread.
    static LEAF_HOOK: std::cell::Cell<Option<ErasedHook>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` (which calls `backward()`) with `hook` called once per leaf of each
/// backward pass, when that leaf's gradient is final: after the last use of the leaf
/// in the graph has added to it (a tied weight used twice is reported once, after both
/// uses), or when no gradient reached that use. Distributed data parallelism starts
/// communicating a bucket of gradients the moment they are final.
///
/// ```
/// use gpuscope_runtime::{Device, Tensor};
/// use gpuscope_runtime::autograd::with_leaf_grad_hook;
/// let dev = Device::host().unwrap();
/// let w = Tensor::ones(&[3], &dev).unwrap().set_requires_grad(true);
/// let loss = w.mul(&w).unwrap().sum().unwrap(); // w used twice
/// let seen = std::cell::RefCell::new(Vec::new());
/// with_leaf_grad_hook(&|leaf: &Tensor| seen.borrow_mut().push(leaf.grad().unwrap().to_vec::<f32>().unwrap()), || {
///     loss.backward()
/// })
/// .unwrap();
/// assert_eq!(*seen.borrow(), vec![vec![2.0f32; 3]]); // once, with both uses added
/// ```
pub fn with_leaf_grad_hook<R>(hook: &dyn Fn(&Tensor), f: impl FnOnce() -> R) -> R {
    struct Restore(Option<ErasedHook>);
    impl Drop for Restore {
        fn drop(&mut self) {
            LEAF_HOOK.with(|h| h.set(self.0));
        }
    }
    // SAFETY: the pointer is only used while `f` runs (restored by the guard below,
    // also on panic), during which `hook` is borrowed.
    let erased: ErasedHook = unsafe { std::mem::transmute(hook) };
    let _restore = Restore(LEAF_HOOK.with(|h| h.replace(Some(erased))));
    f()
}

/// Calls the hook set on this thread, if any.
pub(crate) fn call(leaf: &Tensor) {
    if let Some(h) = LEAF_HOOK.with(|h| h.get()) {
        // SAFETY: set by `with_leaf_grad_hook`, whose borrow outlives this call.
        unsafe { (*h)(leaf) }
    }
}

/// Whether a hook is set on this thread.
pub(crate) fn is_set() -> bool {
    LEAF_HOOK.with(|h| h.get().is_some())
}
