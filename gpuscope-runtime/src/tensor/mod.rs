//! Tensors: device storage from the caching allocator, a dtype, a shape, a device and a
//! stream, tracked by the [scopes](crate::scope) they are made in.
//!
//! A tensor is a strided view of its storage (as in PyTorch): a shape, strides in
//! elements ([`Tensor::strides`]) and a storage offset ([`Tensor::storage_offset`]).
//! Every tensor an operation or a constructor makes is contiguous (row-major);
//! [views](crate::ops) such as [`Tensor::transpose`], [`Tensor::permute`] or
//! [`Tensor::narrow`] share the storage under other strides and allocate nothing, and
//! [`Tensor::contiguous`] makes a contiguous copy when one is needed. Views share the
//! storage's version counter too ([`Tensor::version`]): an in-place write through any
//! of them counts for all, which autograd checks for the tensors it saved.
//!
//! ```
//! use gpuscope_runtime::{Device, Tensor};
//! let dev = Device::host().unwrap();
//! let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &dev).unwrap();
//! let wt = w.t().unwrap(); // a view: [3, 2], strides [1, 3]
//! assert!(wt.same_storage(&w) && !wt.is_contiguous());
//! wt.mul_scalar_(10.0).unwrap(); // in place through the view
//! assert_eq!(w.to_vec::<f32>().unwrap(), vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
//! assert_eq!(w.version(), 1); // one in-place write of the shared storage
//! ```
//!
//! Where things live:
//! - [`dtype`]: [`DType`] and [`Element`] (the Rust types that are elements).
//! - `storage`: the device buffer, and the tracking record it marks dropped.
//! - `create`: constructors (`zeros`, `ones`, `full`, `rand`, `randn`, `from_slice`...),
//!   all `#[track_caller]` so that each tensor knows the line that made it.
//! - `random`: the seedable generator behind `rand`/`randn`.
//! - `copy`: reading back (`to_vec`, `item`), copies between devices, `record_stream`
//!   (views are read and written in logical order).
//! - `cuda_view`: cudarc's `DevicePtr`/`DevicePtrMut` for contiguous tensors on CUDA, so
//!   your own kernels can take them.
//! - `autograd_meta`: the one thing the core knows of autograd, the node that made a
//!   tensor behind a small trait (the node itself is [`crate::autograd`]'s).
//! - `compute`: the kernels of every operation on the host and on CUDA (launching
//!   [`crate::kernels`] and cuBLAS), recording nothing; the operations of
//!   [`crate::ops`] (arithmetic, activations, reductions, losses, matmul, views, layer
//!   norm, embedding, attention) call them and record their backward steps.

mod autograd_meta;
pub(crate) mod compute;
mod copy;
mod create;
#[cfg(feature = "cuda")]
mod cuda_view;
pub mod dtype;
mod oom;
pub mod random;
mod storage;

use std::sync::{Arc, Mutex};

#[cfg(feature = "cuda")]
pub use cuda_view::CudaView;
pub use dtype::{DType, Element};
pub use oom::{LiveSite, TensorOom};
pub use random::{Generator, manual_seed};

use crate::alloc::AllocError;
use crate::backend::{BackendError, DeviceAddr, StreamId};
use crate::device::Device;
use crate::scope::TrackRecord;
use storage::Storage;

pub(crate) use autograd_meta::GradFn;

/// Errors of tensor operations. (`Debug` prints the message, so that a `main` returning
/// it says what went wrong.)
#[derive(thiserror::Error)]
pub enum TensorError {
    /// The allocator could not provide the memory.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// Out of memory while making a tensor: the allocator's report and the largest live
    /// tensors by the line that made them.
    #[error("{0}")]
    OutOfMemory(Box<TensorOom>),
    /// A device call failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// A device could not be opened (so that `Device::cuda(0)?` works in a function that
    /// returns tensor errors).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor, TensorError};
    /// fn first() -> Result<f64, TensorError> {
    ///     let dev = Device::cuda(0).or_else(|_| Device::host())?;
    ///     Tensor::ones(&[4], &dev)?.sum()?.item()
    /// }
    /// assert_eq!(first().unwrap(), 4.0);
    /// ```
    #[error(transparent)]
    Device(#[from] crate::device::DeviceError),
    /// Data and shape disagree.
    #[error("shape {shape:?} holds {expected} elements, but {got} were given")]
    Shape {
        /// The shape asked for.
        shape: Vec<usize>,
        /// Elements the shape holds.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// The tensor's dtype is not the one asked for.
    #[error("the tensor holds {actual} elements; asked for {asked} (convert it first)")]
    DType {
        /// The tensor's dtype.
        actual: DType,
        /// The dtype asked for.
        asked: DType,
    },
    /// `item()` on a tensor with more than one element.
    #[error(
        "item() needs a tensor of one element; this one has shape {0:?} — reduce it (sum/mean) or index it first"
    )]
    NotScalar(Vec<usize>),
    /// An operation needs tensors on one device.
    #[error("tensors are on different devices: {0} and {1}")]
    DeviceMismatch(String, String),
    /// The operation is not available on this device.
    #[error("{0}")]
    Unsupported(String),
    /// Shapes an operation cannot combine (broadcasting, matmul, losses).
    #[error("{op}: shapes {lhs:?} and {rhs:?} do not fit: {reason}")]
    ShapeMismatch {
        /// The operation.
        op: &'static str,
        /// The first operand's shape.
        lhs: Vec<usize>,
        /// The second operand's shape.
        rhs: Vec<usize>,
        /// Why they do not fit.
        reason: String,
    },
    /// An argument out of range: an axis, a class index, a reshape that changes the
    /// number of elements.
    #[error("{op}: {reason}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Autograd was used in a way it cannot follow: `backward()` twice through one
    /// graph, on a tensor that needs no gradient, through a tensor saved for backward
    /// and changed in place since (see [`Tensor::version`]), an in-place change of a
    /// tensor that requires grad while grad mode is on.
    #[error("autograd: {0}")]
    Autograd(String),
}

crate::error_fmt::debug_as_display!(TensorError);

impl TensorError {
    /// Whether this error is the allocator running out of memory (what
    /// [`fit_batch_size`](crate::optim::fit_batch_size) catches).
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            TensorError::Alloc(AllocError::OutOfMemory(_)) => true,
            TensorError::OutOfMemory(_) => true,
            TensorError::Alloc(AllocError::Backend(b)) | TensorError::Backend(b) => {
                b.is_out_of_memory()
            }
            _ => false,
        }
    }
}

/// A tensor. Cloning it is cheap and shares the storage (like a PyTorch tensor
/// handle); [`Tensor::deep_clone`] copies the data.
///
/// ```
/// use gpuscope_runtime::{Device, Tensor};
/// let dev = Device::host().unwrap();
/// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &dev).unwrap();
/// assert_eq!(t.shape(), &[2, 2]);
/// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
/// ```
#[derive(Clone)]
pub struct Tensor {
    inner: Arc<Inner>,
}

struct Inner {
    /// Shared by views ([`Tensor::reshape`], [`Tensor::transpose`], [`Tensor::detach`]...).
    storage: Arc<Storage>,
    shape: Vec<usize>,
    /// Elements to step in the storage for one step along each dimension.
    strides: Vec<usize>,
    /// Elements between the storage's start and the first element.
    offset: usize,
    /// Whether `strides` are the row-major ones of `shape` (dimensions of size 1 aside).
    contiguous: bool,
    dtype: DType,
    requires_grad: std::sync::atomic::AtomicBool,
    grad: Mutex<Option<Tensor>>,
    /// The autograd node that made it (`None`: a leaf, or made while nothing recorded).
    grad_fn: Option<Arc<dyn GradFn>>,
}

/// A handle to a tensor that does not keep it alive (autograd's edge to a leaf).
#[derive(Clone)]
pub(crate) struct WeakTensor(std::sync::Weak<Inner>);

impl WeakTensor {
    /// The tensor, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<Tensor> {
        self.0.upgrade().map(|inner| Tensor { inner })
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({}{:?} on {}",
            self.dtype(),
            self.shape(),
            self.device().description()
        )?;
        if let Some(node) = &self.inner.grad_fn {
            write!(f, ", grad_fn={}", node.name())?;
        } else if self.requires_grad() {
            write!(f, ", requires_grad")?;
        }
        write!(f, ")")
    }
}

impl Tensor {
    pub(crate) fn from_storage(storage: Storage, shape: Vec<usize>, dtype: DType) -> Tensor {
        let strides = contiguous_strides(&shape);
        Tensor::view_of(Arc::new(storage), shape, strides, 0, dtype, None)
    }

    fn view_of(
        storage: Arc<Storage>,
        shape: Vec<usize>,
        strides: Vec<usize>,
        offset: usize,
        dtype: DType,
        grad_fn: Option<Arc<dyn GradFn>>,
    ) -> Tensor {
        debug_assert_eq!(shape.len(), strides.len());
        let contiguous = is_contiguous_layout(&shape, &strides);
        Tensor {
            inner: Arc::new(Inner {
                storage,
                shape,
                strides,
                offset,
                contiguous,
                dtype,
                requires_grad: std::sync::atomic::AtomicBool::new(false),
                grad: Mutex::new(None),
                grad_fn,
            }),
        }
    }

    /// A view of the same storage with the layout given (elements), made by `grad_fn`
    /// when it is given. Callers keep every element inside the storage.
    pub(crate) fn as_strided(
        &self,
        shape: Vec<usize>,
        strides: Vec<usize>,
        offset: usize,
        grad_fn: Option<Arc<dyn GradFn>>,
    ) -> Tensor {
        Tensor::view_of(
            self.inner.storage.clone(),
            shape,
            strides,
            offset,
            self.inner.dtype,
            grad_fn,
        )
    }

    /// The same storage under another shape (same number of elements), made by `node`
    /// when it is given. Only for contiguous tensors (row-major order is kept).
    pub(crate) fn view_with(&self, shape: Vec<usize>, grad_fn: Option<Arc<dyn GradFn>>) -> Tensor {
        debug_assert!(self.is_contiguous(), "view_with of a non-contiguous tensor");
        let strides = contiguous_strides(&shape);
        self.as_strided(shape, strides, self.inner.offset, grad_fn)
    }

    /// This tensor as the output of `node` (same storage and layout).
    pub(crate) fn with_grad_fn(self, node: Arc<dyn GradFn>) -> Tensor {
        self.alias(Some(node))
    }

    /// Another handle to the same elements (same storage and layout), made by `grad_fn`.
    pub(crate) fn alias(&self, grad_fn: Option<Arc<dyn GradFn>>) -> Tensor {
        self.as_strided(
            self.inner.shape.clone(),
            self.inner.strides.clone(),
            self.inner.offset,
            grad_fn,
        )
    }

    /// The autograd node that made it.
    pub(crate) fn grad_fn(&self) -> Option<&Arc<dyn GradFn>> {
        self.inner.grad_fn.as_ref()
    }

    pub(crate) fn downgrade(&self) -> WeakTensor {
        WeakTensor(Arc::downgrade(&self.inner))
    }

    /// Whether this handle is the only one to its storage (so autograd may hand it to a
    /// leaf as its gradient without copying).
    pub(crate) fn is_unique(&self) -> bool {
        Arc::strong_count(&self.inner) == 1 && Arc::strong_count(&self.inner.storage) == 1
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.inner.shape
    }

    /// The strides, in elements: how far apart in the storage two elements are whose
    /// indices differ by one along each dimension. Row-major (`[c, 1]` for `[r, c]`) for
    /// every tensor an operation makes; views ([`transpose`](Tensor::transpose),
    /// [`permute`](Tensor::permute), [`narrow`](Tensor::narrow)) have others.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::zeros(&[2, 3], &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.strides(), &[3, 1]);
    /// assert_eq!(t.t().unwrap().strides(), &[1, 3]);
    /// ```
    pub fn strides(&self) -> &[usize] {
        &self.inner.strides
    }

    /// Elements between the start of the storage and this tensor's first element
    /// (non-zero for some [`narrow`](Tensor::narrow)ed views).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::zeros(&[4, 3], &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.narrow(0, 1, 2).unwrap().storage_offset(), 3);
    /// ```
    pub fn storage_offset(&self) -> usize {
        self.inner.offset
    }

    /// Whether the elements lie in row-major order without gaps ([`strides`](Tensor::strides)
    /// are the row-major ones; dimensions of size 1 do not count), so that the tensor's
    /// memory is the `numel()` elements from [`addr`](Tensor::addr) on.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::zeros(&[2, 3], &Device::host().unwrap()).unwrap();
    /// assert!(t.is_contiguous());
    /// assert!(!t.t().unwrap().is_contiguous());
    /// assert!(t.t().unwrap().contiguous().unwrap().is_contiguous());
    /// ```
    pub fn is_contiguous(&self) -> bool {
        self.inner.contiguous
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.inner.shape.len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.inner.shape.iter().product()
    }

    /// Bytes of data (elements × element size).
    pub fn nbytes(&self) -> usize {
        self.numel() * self.inner.dtype.size()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// The device it lives on.
    pub fn device(&self) -> &Device {
        self.inner.storage.buffer.device()
    }

    /// The stream its storage was allocated on (and its work runs on).
    pub fn stream(&self) -> StreamId {
        self.inner.storage.buffer.stream()
    }

    /// The device address of the first element (the storage's address plus the
    /// [`storage_offset`](Tensor::storage_offset)). The tensor's data is the `nbytes()`
    /// from there only when it [`is_contiguous`](Tensor::is_contiguous).
    pub fn addr(&self) -> DeviceAddr {
        self.inner
            .storage
            .buffer
            .addr()
            .offset(self.inner.offset * self.inner.dtype.size())
    }

    /// Whether gradients are computed for it: a leaf marked with
    /// [`set_requires_grad`](Tensor::set_requires_grad), or the output of an operation
    /// that recorded its backward step.
    pub fn requires_grad(&self) -> bool {
        self.inner.grad_fn.is_some()
            || self
                .inner
                .requires_grad
                .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether it is a leaf of the autograd graph: made by a constructor (or under
    /// `no_grad`, or by [`detach`](Tensor::detach)), not by a recorded operation. Only
    /// leaves that require grad get `.grad` from `backward()`.
    pub fn is_leaf(&self) -> bool {
        self.inner.grad_fn.is_none()
    }

    /// The name of the operation that made it, when it recorded one (`"matmul"`,
    /// `"add"`...).
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.inner.grad_fn.as_ref().map(|n| n.name())
    }

    /// Sets whether gradients are computed for it (a leaf). Returns the tensor.
    pub fn set_requires_grad(self, on: bool) -> Tensor {
        self.inner
            .requires_grad
            .store(on, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Its accumulated gradient, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.inner
            .grad
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces its gradient (`None`: set-to-none, as `zero_grad` does).
    pub fn set_grad(&self, grad: Option<Tensor>) {
        *self.inner.grad.lock().unwrap_or_else(|e| e.into_inner()) = grad;
    }

    /// The tracking record of its storage (creation site, scope), when tracking was on
    /// as it was made: a copy taken now.
    pub fn track_record(&self) -> Option<TrackRecord> {
        self.inner.storage.record.map(|r| r.snapshot())
    }

    /// The live record of its storage (valid while the storage is alive).
    #[inline]
    pub(crate) fn track_slot(&self) -> Option<crate::scope::SlotRef> {
        self.inner.storage.record
    }

    /// Whether two tensors share storage (clones and views of one another).
    pub fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.inner.storage, &other.inner.storage)
    }

    /// The version counter of its storage (PyTorch's `_version`): 0 when the storage is
    /// made, plus one for every in-place operation that has written it since, through
    /// this tensor or anything that shares its storage (clones, views such as
    /// [`t`](Tensor::t) or [`narrow`](Tensor::narrow), [`detach`](Tensor::detach)ed
    /// aliases). Counted: `add_`, `sub_`, `mul_`, `mul_scalar_`, `add_scalar_`,
    /// `add_scaled_`, `fill_`, `zero_`, [`copy_from`](Tensor::copy_from), the
    /// optimizers' updates of parameters and their state, gradient accumulation into an
    /// existing `.grad`, and cudarc writes through a `CudaView` (`device_ptr_mut`);
    /// a kernel of your own that writes a tensor it got as a launch argument
    /// (`arg(&view)`) should call [`increment_version`](Tensor::increment_version).
    ///
    /// [Autograd](crate::autograd) notes the version of every tensor it saves for
    /// backward, and `backward()` fails if it has changed: the gradient would be
    /// computed from the changed values.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let w = Tensor::zeros(&[2, 3], &dev).unwrap();
    /// assert_eq!(w.version(), 0);
    /// w.add_scalar_(1.0).unwrap();
    /// w.t().unwrap().mul_scalar_(2.0).unwrap(); // through a view: the same counter
    /// assert_eq!(w.version(), 2);
    /// assert_eq!(w.detach().version(), 2);
    /// let copy = w.deep_clone().unwrap(); // new storage, a counter of its own
    /// assert_eq!(copy.version(), 0);
    /// ```
    pub fn version(&self) -> u64 {
        self.inner.storage.version()
    }

    /// Counts a change of its elements that gpuscope did not make (PyTorch's
    /// `torch.autograd.graph.increment_version`): call it after your own kernel wrote
    /// the tensor through a `CudaView` passed as a launch argument, so that
    /// `backward()` refuses a graph that saved the old values.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::ones(&[4], &Device::host().unwrap()).unwrap();
    /// t.increment_version();
    /// assert_eq!(t.version(), 1);
    /// ```
    pub fn increment_version(&self) {
        self.inner.storage.bump_version();
    }
}

/// The row-major strides of `shape`, in elements.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc *= shape[i].max(1);
    }
    strides
}

/// Whether `strides` walk `shape` in row-major order without gaps (dimensions of size 1
/// may have any stride; an empty tensor is contiguous).
pub(crate) fn is_contiguous_layout(shape: &[usize], strides: &[usize]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected = 1;
    for i in (0..shape.len()).rev() {
        if shape[i] == 1 {
            continue;
        }
        if strides[i] != expected {
            return false;
        }
        expected *= shape[i];
    }
    true
}

pub(crate) fn check_len(shape: &[usize], got: usize) -> Result<usize, TensorError> {
    let expected: usize = shape.iter().product();
    if expected != got {
        return Err(TensorError::Shape {
            shape: shape.to_vec(),
            expected,
            got,
        });
    }
    Ok(expected)
}
