//! Reverse-mode automatic differentiation: a tape recorded as operations run, walked
//! backwards by [`Tensor::backward`].
//!
//! An operation records a [`Node`] when grad mode is on ([`crate::grad`]) and one of
//! its inputs requires grad (a leaf marked with
//! [`set_requires_grad`](Tensor::set_requires_grad), or the output of a recorded
//! operation). The node keeps what its backward step needs (the *saved tensors*) and
//! edges to its inputs' nodes; its output tensor holds the node. Nothing else holds
//! device memory for the graph.
//!
//! Memory follows the graph exactly:
//! - `backward()` runs each node's backward step once, frees the node's saved tensors
//!   right after, and drops each intermediate gradient as soon as its last consumer has
//!   run. When it returns, the graph holds no device memory; what remains are the
//!   leaves' `.grad`.
//! - A graph that is never walked is freed when its last output is dropped.
//! - Under [`no_grad`](crate::no_grad) nothing is recorded, so intermediate results die
//!   as soon as the next operation has read them: evaluation peaks lower.
//! - [`Tensor::item`] and [`Tensor::detach`] keep no graph.
//!
//! Scopes: the saved tensors are made where the forward pass runs. A scope that
//! returns a tensor *with its graph* (a forward function whose caller calls
//! `backward()`) holds them past its exit; [`Tensor::for_each_graph_tensor`] lists
//! them so they can move along with the returned tensor (`keep` each one, or have the
//! scope's escape walk them).
//!
//! In-place changes (PyTorch's version counters): every storage counts the in-place
//! writes it has had ([`Tensor::version`]; views, clones and [`Tensor::detach`]ed
//! aliases share the count). A node notes the version of each tensor it saves, and
//! `backward()` checks them (one atomic load each) before it runs the node's step: a
//! saved tensor changed in the meantime — by an in-place operation on it or on any
//! view of its storage, by a `copy_from` into it, by an optimizer step between the
//! forward pass and `backward()` — would give wrong gradients, so `backward()` fails
//! with [`TensorError::Autograd`] naming the operation that saved it and its line, the
//! tensor's dtype and shape, and the versions then and now. Make the change out of
//! place, on a [`deep_clone`](Tensor::deep_clone) (a `clone()` shares storage), or
//! after `backward()`. The failed pass leaves the graph's memory to be freed as usual,
//! when its outputs are dropped. Changing tensors that no node saved (the inputs of
//! `add`, `sum`, views...) is fine. In-place operations on tensors that require grad
//! are refused while grad mode is on.
//!
//! Gradients of leaves are accumulated: a leaf without `.grad` gets the gradient
//! (a tensor of its own: made at the `backward()` line, and adopted by the scope
//! around the one it was made in, like [`keep`](crate::keep) does, so a training
//! step's scope does not report it); a leaf that has one gets the new gradient added
//! in place, without allocating. Set them to `None` between steps (the optimizers'
//! `zero_grad`).
//!
//! ```
//! use gpuscope_runtime::{Device, Tensor};
//! let dev = Device::host().unwrap();
//! let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap().set_requires_grad(true);
//! let x = Tensor::from_slice(&[4.0f32, 5.0, 6.0], &[3], &dev).unwrap();
//! let loss = w.mul(&x).unwrap().sum().unwrap(); // Σ w·x
//! loss.backward().unwrap();
//! assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![4.0, 5.0, 6.0]);
//! assert!(x.grad().is_none()); // x does not require grad
//! ```
//!
//! Where things live: `engine` (the backward pass), `checkpoint` ([`checkpoint()`]:
//! activation checkpointing, a function run again during `backward()` instead of
//! keeping its activations), `hook` ([`on_backward`]: a callback with the gradient at a
//! point of the backward pass). The tensor core holds a node behind its `GradFn` trait
//! (`tensor::autograd_meta`); the engine adds gradients through `tensor::compute`'s
//! kernels, which record nothing.
//!
//! A saved tensor changed before `backward()`:
//!
//! ```
//! use gpuscope_runtime::{Device, Tensor};
//! let dev = Device::host().unwrap();
//! let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap().set_requires_grad(true);
//! let x = Tensor::from_slice(&[4.0f32, 5.0, 6.0], &[3], &dev).unwrap();
//! let loss = w.mul(&x).unwrap().sum().unwrap(); // mul saves x (w's gradient is x)
//! x.mul_scalar_(2.0).unwrap(); // x is now at version 1
//! let err = loss.backward().unwrap_err().to_string();
//! assert!(err.contains("`mul`") && err.contains("version 1"), "{err}");
//! ```

mod checkpoint;
mod engine;
mod hook;
mod leaf_hook;

pub use checkpoint::checkpoint;
pub use hook::on_backward;
pub use leaf_hook::with_leaf_grad_hook;

use std::sync::{Arc, Mutex};

use crate::grad::is_grad_enabled;
use crate::tensor::compute::Site;
use crate::tensor::{GradFn, Tensor, TensorError, WeakTensor};

/// Gradients for a node's inputs, in order (`None`: no gradient for that input).
pub(crate) type Grads = Vec<Option<Tensor>>;

/// A node's backward step: given the gradient of its output, which inputs need a
/// gradient, and the creation site for what it allocates, the inputs' gradients.
pub(crate) type BackwardFn =
    Box<dyn FnOnce(&Tensor, &[bool], Site) -> Result<Grads, TensorError> + Send>;

/// Where a gradient goes.
pub(crate) enum Edge {
    /// The input needs no gradient.
    None,
    /// A leaf that requires grad: the gradient accumulates into its `.grad` (weak, so
    /// the graph does not keep parameters alive).
    Leaf(WeakTensor),
    /// The output of another recorded operation (a [`Node`], as the tensor core holds
    /// it).
    Node(Arc<dyn GradFn>),
}

/// The autograd node behind a tensor's `grad_fn`: every `GradFn` is a [`Node`] (only
/// [`record_saving`] makes them).
pub(crate) fn node_of(g: &Arc<dyn GradFn>) -> &Node {
    match g.as_any().downcast_ref::<Node>() {
        Some(node) => node,
        None => unreachable!("every grad_fn is an autograd Node"),
    }
}

impl GradFn for Node {
    fn name(&self) -> &'static str {
        self.name
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// One recorded operation.
pub struct Node {
    name: &'static str,
    site: Site,
    /// The output's shape (what the incoming gradient must have).
    shape: Vec<usize>,
    backward: Mutex<Option<BackwardFn>>,
    /// Views of the tensors `backward` holds, with their versions when saved (for
    /// [`Tensor::for_each_graph_tensor`], and checked before the step runs); emptied
    /// with it.
    saved: Mutex<Vec<Saved>>,
    edges: Vec<Edge>,
}

/// A tensor saved for a backward step, and its storage's version when it was saved.
pub(crate) struct Saved {
    tensor: Tensor,
    version: u64,
}

impl Saved {
    fn new(tensor: Tensor) -> Saved {
        let version = tensor.version();
        Saved { tensor, version }
    }
}

impl Node {
    /// The operation's name (`"matmul"`, `"add"`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The line that ran the operation.
    pub fn site(&self) -> Site {
        self.site
    }

    /// Whether its saved tensors are still held (not yet walked by `backward()`).
    pub fn is_pending(&self) -> bool {
        self.backward
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Node({} at {}:{})",
            self.name,
            self.site.file(),
            self.site.line()
        )
    }
}

/// A node's identity (the address of its allocation).
pub(crate) fn key(n: &Arc<dyn GradFn>) -> *const () {
    Arc::as_ptr(n) as *const ()
}

/// Whether an operation on `inputs` records its backward step now.
#[inline]
pub(crate) fn should_record(inputs: &[&Tensor]) -> bool {
    is_grad_enabled() && inputs.iter().any(|t| t.requires_grad())
}

fn edge_of(t: &Tensor) -> Edge {
    match t.grad_fn() {
        Some(node) => Edge::Node(node.clone()),
        None if t.requires_grad() => Edge::Leaf(t.downgrade()),
        None => Edge::None,
    }
}

/// Makes `out` the output of a new node named `name` over `inputs` whose backward step
/// is `backward` (which saves no tensor).
pub(crate) fn record(
    out: Tensor,
    name: &'static str,
    inputs: &[&Tensor],
    site: Site,
    backward: impl FnOnce(&Tensor, &[bool], Site) -> Result<Grads, TensorError> + Send + 'static,
) -> Tensor {
    record_saving(out, name, inputs, std::iter::empty(), site, backward)
}

/// As [`record`], for a backward step that holds the tensors `saved` (views of them,
/// every tensor it reads): they are listed by [`Tensor::for_each_graph_tensor`] until
/// the step runs, and their versions, noted now, are checked before it runs.
pub(crate) fn record_saving(
    out: Tensor,
    name: &'static str,
    inputs: &[&Tensor],
    saved: impl IntoIterator<Item = Tensor>,
    site: Site,
    backward: impl FnOnce(&Tensor, &[bool], Site) -> Result<Grads, TensorError> + Send + 'static,
) -> Tensor {
    let node = Node {
        name,
        site,
        shape: out.shape().to_vec(),
        backward: Mutex::new(Some(Box::new(backward))),
        saved: Mutex::new(saved.into_iter().map(Saved::new).collect()),
        edges: inputs.iter().map(|t| edge_of(t)).collect(),
    };
    out.with_grad_fn(Arc::new(node) as Arc<dyn GradFn>)
}

/// Checks that no tensor `node` saved has been changed in place since it was saved
/// (one atomic load each): the backward step would compute the gradient from the
/// changed values.
fn check_saved_versions(node: &Node, saved: &[Saved]) -> Result<(), TensorError> {
    for (i, s) in saved.iter().enumerate() {
        let now = s.tensor.version();
        if now != s.version {
            return Err(TensorError::Autograd(format!(
                "a tensor needed for gradient computation has been modified by an in-place \
                 operation: the {}{:?} tensor that `{}` at {}:{} saved for backward (saved \
                 tensor {} of {}) is at version {now}, but was saved at version {}. Something \
                 wrote it (or a view or detach() of its storage) in place after `{}` ran and \
                 before backward(): add_, mul_scalar_, copy_from, an optimizer's step()... \
                 Make that change out of place (x.add(..) rather than x.add_(..)), make it on \
                 a deep_clone() (clone() shares storage), or make it after backward() \
                 (optimizer.step() after loss.backward())",
                s.tensor.dtype(),
                s.tensor.shape(),
                node.name,
                node.site.file(),
                node.site.line(),
                i + 1,
                saved.len(),
                s.version,
                node.name,
            )));
        }
    }
    Ok(())
}

impl Tensor {
    /// Computes the gradient of this one-element tensor (a loss) with respect to every
    /// leaf that requires grad and adds it to the leaf's `.grad`. Frees the graph as it
    /// goes: a second `backward()` through it is an error. Tensors it allocates are
    /// created at the caller's line.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let x = Tensor::from_slice(&[3.0f64], &[1], &dev).unwrap().set_requires_grad(true);
    /// let y = x.mul(&x).unwrap().sum().unwrap(); // x²
    /// y.backward().unwrap();
    /// assert_eq!(x.grad().unwrap().item().unwrap(), 6.0);
    /// assert!(y.backward().is_err()); // the graph is gone
    /// ```
    #[track_caller]
    pub fn backward(&self) -> Result<(), TensorError> {
        engine::backward(self, None, std::panic::Location::caller())
    }

    /// Calls `f` on every tensor the graph behind this tensor still holds for its
    /// backward pass (the saved tensors of the nodes not yet walked; views that share
    /// their storage). A scope that lets a tensor with a graph escape can move these
    /// along with it: they live exactly as long as the graph.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let w = Tensor::ones(&[4], &dev).unwrap().set_requires_grad(true);
    /// let y = w.exp().unwrap().sum().unwrap(); // exp saves its output
    /// let mut n = 0;
    /// y.for_each_graph_tensor(&mut |_| n += 1);
    /// assert_eq!(n, 1);
    /// y.backward().unwrap();
    /// n = 0;
    /// y.for_each_graph_tensor(&mut |_| n += 1);
    /// assert_eq!(n, 0); // freed by backward
    /// ```
    pub fn for_each_graph_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        let Some(root) = self.grad_fn() else { return };
        let mut seen: std::collections::HashSet<*const ()> =
            std::collections::HashSet::from([key(root)]);
        let mut stack = vec![root.clone()];
        while let Some(node) = stack.pop() {
            let node = node_of(&node);
            if !node.is_pending() {
                // Walked already: neither it nor anything behind it holds memory.
                continue;
            }
            for s in node.saved.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                f(&s.tensor);
            }
            for e in &node.edges {
                if let Edge::Node(c) = e
                    && seen.insert(key(c))
                {
                    stack.push(c.clone());
                }
            }
        }
    }

    /// As [`backward`](Tensor::backward), starting from `grad` (the gradient of some
    /// scalar with respect to this tensor; same shape) instead of 1.
    #[track_caller]
    pub fn backward_with(&self, grad: &Tensor) -> Result<(), TensorError> {
        engine::backward(self, Some(grad), std::panic::Location::caller())
    }
}
