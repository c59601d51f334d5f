//! The backward pass: orders the graph's nodes so that each runs after every node that
//! consumes its output, runs each once, and frees saved tensors and gradients as soon
//! as nothing needs them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::grad::GradModeGuard;
use crate::tensor::compute::{self as ops, Site};
use crate::tensor::{GradFn, Tensor, TensorError};

use super::{Edge, check_saved_versions, key, leaf_hook, node_of};

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
            leaf_hook::call(root);
            Ok(())
        }
        None => Err(TensorError::Autograd(
            "backward() on a tensor that does not require grad: no input of the computation required grad, or it ran under no_grad"
                .into(),
        )),
    }
}

fn run(root: Arc<dyn GradFn>, seed: Tensor, site: Site) -> Result<(), TensorError> {
    // How many recorded consumers each node's output has.
    let mut deps: HashMap<*const (), usize> = HashMap::new();
    // With a leaf hook: how many uses each leaf has, to know when its gradient is final.
    let hooked = leaf_hook::is_set();
    let mut leaf_uses: HashMap<crate::backend::DeviceAddr, usize> = HashMap::new();
    let mut seen: HashSet<*const ()> = HashSet::from([key(&root)]);
    let mut stack = vec![root.clone()];
    while let Some(n) = stack.pop() {
        for e in &node_of(&n).edges {
            match e {
                Edge::Node(c) => {
                    *deps.entry(key(c)).or_default() += 1;
                    if seen.insert(key(c)) {
                        stack.push(c.clone());
                    }
                }
                Edge::Leaf(l) if hooked => {
                    if let Some(l) = l.upgrade() {
                        *leaf_uses.entry(l.addr()).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
    }
    drop(seen);

    let mut grads: HashMap<*const (), Tensor> = HashMap::new();
    // Nodes whose consumers have all run, with their gradient (`None`: none reached
    // them; their saved tensors are freed all the same).
    let mut ready: Vec<(Arc<dyn GradFn>, Option<Tensor>)> = vec![(root, Some(seed))];
    while let Some((handle, grad)) = ready.pop() {
        let node = node_of(&handle);
        // The views listed for `for_each_graph_tensor` go with the step; first, the
        // step's inputs must be what they were when it was recorded. A failed check
        // frees nothing: the node (and what it saved) goes with the graph.
        let saved = {
            let mut listed = node.saved.lock().unwrap_or_else(|e| e.into_inner());
            if grad.is_some() {
                check_saved_versions(node, &listed)?;
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
                            leaf_hook::call(&leaf);
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
            crate::keep(&g);
            leaf.set_grad(Some(g));
            Ok(())
        }
    }
}
