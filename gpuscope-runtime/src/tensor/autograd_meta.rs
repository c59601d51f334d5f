//! What the tensor core knows of autograd (PyTorch's `AutogradMetaInterface`): a tensor
//! made by a recorded operation holds that operation's node behind this trait, and
//! nothing more. The node itself ([`crate::autograd`]'s `Node`: the backward step, its
//! saved tensors, the edges to the inputs) lives above the tensor core, so the core
//! does not depend on autograd; autograd gets its node back with [`GradFn::as_any`].

use std::any::Any;

/// The node that made a tensor, seen from the tensor core.
pub(crate) trait GradFn: Send + Sync + 'static {
    /// The operation's name (`"matmul"`, `"add"`...), for `Debug` and
    /// [`Tensor::grad_fn_name`](super::Tensor::grad_fn_name).
    fn name(&self) -> &'static str;

    /// The node as `Any`, for autograd to downcast to its own type.
    fn as_any(&self) -> &dyn Any;
}
