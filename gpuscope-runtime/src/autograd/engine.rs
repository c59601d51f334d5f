//! The backward pass: orders the graph's nodes so that each runs after every node that
//! consumes its output, runs each once, and frees saved tensors and gradients as soon
//! as nothing needs them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::grad::GradModeGuard;
use crate::tensor::ops::{self, Site};
use crate::tensor::{Tensor, TensorError};

use super::{Edge, Node, check_saved_versions};

/// A leaf hook with its borrow erased (see [`with_leaf_grad_hook`]).
type ErasedHook = *const (dyn Fn(&Tensor) + 'static);

thread_local! {
    /// The hook of [`with_leaf_grad_hook`], while one runs on this thread.
    static LEAF_HOOK: std::cell::Cell<Option<ErasedHook>> =
        const { std::cell::Cell::new(None) };
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

fn call_leaf_hook(leaf: &Tensor) {
    if let Some(h) = LEAF_HOOK.with(|h| h.get()) {
        // SAFETY: set by `with_leaf_grad_hook`, whose borrow outlives this call.
        unsafe { (*h)(leaf) }
    }
}

fn hooked() -> bool {
    LEAF_HOOK.with(|h| h.get().is_some())
}

fn key(n: &Arc<Node>) -> *const Node {
    Arc::as_ptr(n)
}

pub(crate) fn backward(
    root: &Tensor,
    grad: Option<&Tensor>,
    site: Site,
) -> Result<(), TensorError> {
    // Backward steps compute with plain operations; none of them is recorded.
    let _mode = GradModeGuard::set(false);
    let seed = match grad {
        Some(g) => {
            if g.shape() != root.shape() || g.dtype() != root.dtype() {
                return Err(TensorError::Autograd(format!(
                    "backward_with: the gradient is {}{:?} but the tensor is {}{:?}",
                    g.dtype(),
                    g.shape(),
                    root.dtype(),
                    root.shape()
                )));
            }
            g.clone()
        }
        None => {
            if root.numel() != 1 {
                return Err(TensorError::Autograd(format!(
                    "backward() starts from a one-element tensor (a loss); this one has shape {:?}: reduce it (sum/mean) or use backward_with",
                    root.shape()
                )));
            }
            ops::full_like(root, 1.0, site)?
        }
    };
    match root.grad_fn() {
        Some(node) => run(node.clone(), seed, site),
        None if root.requires_grad() => {
            accumulate_leaf(root, seed, site)?;
            call_leaf_hook(root);
            Ok(())
        }
        None => Err(TensorError::Autograd(
            "backward() on a tensor that does not require grad: no input of the computation required grad, or it ran under no_grad"
                .into(),
        )),
    }
}

fn run(root: Arc<Node>, seed: Tensor, site: Site) -> Result<(), TensorError> {
    // How many recorded consumers each node's output has.
    let mut deps: HashMap<*const Node, usize> = HashMap::new();
    let mut seen: HashSet<*const Node> = HashSet::from([key(&root)]);
    let mut stack = vec![root.clone()];
    while let Some(n) = stack.pop() {
        for e in &n.edges {
            if let Edge::Node(c) = e {
                *deps.entry(key(c)).or_default() += 1;
                if seen.insert(key(c)) {
                    stack.push(c.clone());
                }
            }
        }
    }
    drop(seen);
    // With a leaf hook: how many uses each leaf has, to know when its gradient is final.
    let mut leaf_uses: HashMap<crate::backend::DeviceAddr, usize> = HashMap::new();
    if hooked() {
        let mut seen: HashSet<*const Node> = HashSet::from([key(&root)]);
        let mut stack = vec![root.clone()];
        while let Some(n) = stack.pop() {
            for e in &n.edges {
                match e {
                    Edge::Node(c) if seen.insert(key(c)) => stack.push(c.clone()),
                    Edge::Leaf(l) => {
                        if let Some(l) = l.upgrade() {
                            *leaf_uses.entry(l.addr()).or_default() += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    let mut grads: HashMap<*const Node, Tensor> = HashMap::new();
    // Nodes whose consumers have all run, with their gradient (`None`: none reached
    // them; their saved tensors are freed all the same).
    let mut ready: Vec<(Arc<Node>, Option<Tensor>)> = vec![(root, Some(seed))];
    while let Some((node, grad)) = ready.pop() {
        // The views listed for `for_each_graph_tensor` go with the step; first, the
        // step's inputs must be what they were when it was recorded. A failed check
        // frees nothing: the node (and what it saved) goes with the graph.
        let saved = {
            let mut listed = node.saved.lock().unwrap_or_else(|e| e.into_inner());
            if grad.is_some() {
                check_saved_versions(&node, &listed)?;
            }
            std::mem::take(&mut *listed)
        };
        let step = node
            .backward
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(saved);
        let Some(step) = step else {
            return Err(TensorError::Autograd(format!(
                "backward through the graph a second time: `{}` (at {}:{}) was freed by an earlier backward(); \
                 run the forward pass again",
                node.name,
                node.site.file(),
                node.site.line()
            )));
        };
        let input_grads: Vec<Option<Tensor>> = match grad {
            Some(g) => {
                if g.shape() != node.shape.as_slice() {
                    return Err(TensorError::Autograd(format!(
                        "the gradient reaching `{}` has shape {:?}, its output {:?}",
                        node.name,
                        g.shape(),
                        node.shape
                    )));
                }
                let needs: Vec<bool> = node
                    .edges
                    .iter()
                    .map(|e| !matches!(e, Edge::None))
                    .collect();
                let out = step(&g, &needs, site)?;
                if out.len() != node.edges.len() {
                    return Err(TensorError::Autograd(format!(
                        "`{}` returned {} gradients for {} inputs",
                        node.name,
                        out.len(),
                        node.edges.len()
                    )));
                }
                out
            }
            None => {
                drop(step);
                node.edges.iter().map(|_| None).collect()
            }
        };
        for (edge, g) in node.edges.iter().zip(input_grads) {
            match edge {
                Edge::None => {}
                Edge::Leaf(leaf) => {
                    let Some(leaf) = leaf.upgrade() else { continue };
                    if let Some(g) = g {
                        accumulate_leaf(&leaf, g, site)?;
                    }
                    if let Some(left) = leaf_uses.get_mut(&leaf.addr()) {
                        *left -= 1;
                        if *left == 0 {
                            call_leaf_hook(&leaf);
                        }
                    }
                }
                Edge::Node(child) => {
                    let k = key(child);
                    if let Some(g) = g {
                        let sum = match grads.remove(&k) {
                            Some(prev) => ops::add_raw(&prev, &g, site)?,
                            None => g,
                        };
                        grads.insert(k, sum);
                    }
                    let left = deps.get_mut(&k).map(|d| {
                        *d -= 1;
                        *d
                    });
                    if left == Some(0) {
                        ready.push((child.clone(), grads.remove(&k)));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Adds `g` to `leaf`'s gradient: in place when it has one, else `g` becomes it (a
/// contiguous copy when `g` is shared with anything else or is a view, such as the
/// gradient that comes back through a transpose).
fn accumulate_leaf(leaf: &Tensor, g: Tensor, site: Site) -> Result<(), TensorError> {
    if g.shape() != leaf.shape() || g.dtype() != leaf.dtype() {
        return Err(TensorError::Autograd(format!(
            "gradient {}{:?} does not match its leaf {}{:?}",
            g.dtype(),
            g.shape(),
            leaf.dtype(),
            leaf.shape()
        )));
    }
    match leaf.grad() {
        Some(existing) => ops::add_in_place_raw(&existing, &g),
        None => {
            let g = if g.is_unique() && g.is_leaf() && g.is_contiguous() {
                g
            } else {
                ops::copy_at(&g, site)?
            };
            crate::scope::keep(&g);
            leaf.set_grad(Some(g));
            Ok(())
        }
    }
}
