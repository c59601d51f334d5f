//! Tensors: device storage from the caching allocator, a dtype, a shape, a device and a
//! stream, tracked by the [scopes](crate::scope) they are made in.
//!
//! Where things live:
//! - [`dtype`]: [`DType`] and [`Element`] (the Rust types that are elements).
//! - `storage`: the device buffer, and the tracking record it marks dropped.
//! - `create`: constructors (`zeros`, `ones`, `full`, `rand`, `randn`, `from_slice`...),
//!   all `#[track_caller]` so that each tensor knows the line that made it.
//! - `random`: the seedable generator behind `rand`/`randn`.
//! - `copy`: reading back (`to_vec`, `item`), copies between devices, `record_stream`.
//! - `cuda_view`: cudarc's `DevicePtr`/`DevicePtrMut` for tensors on CUDA, so your own
//!   kernels can take them.

mod copy;
mod create;
#[cfg(feature = "cuda")]
mod cuda_view;
pub mod dtype;
pub mod random;
mod storage;

use std::sync::{Arc, Mutex};

pub use dtype::{DType, Element};
pub use random::{Generator, manual_seed};
#[cfg(feature = "cuda")]
pub use cuda_view::CudaView;

use crate::alloc::AllocError;
use crate::backend::{BackendError, DeviceAddr, StreamId};
use crate::device::Device;
use crate::scope::TrackRecord;
use storage::Storage;

/// Errors of tensor operations.
#[derive(Debug, thiserror::Error)]
pub enum TensorError {
    /// The allocator could not provide the memory.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// A device call failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
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
    #[error("item() needs a tensor of one element; this one has shape {0:?} — reduce it (sum/mean) or index it first")]
    NotScalar(Vec<usize>),
    /// An operation needs tensors on one device.
    #[error("tensors are on different devices: {0} and {1}")]
    DeviceMismatch(String, String),
    /// The operation is not available on this device.
    #[error("{0}")]
    Unsupported(String),
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
    storage: Storage,
    shape: Vec<usize>,
    dtype: DType,
    requires_grad: std::sync::atomic::AtomicBool,
    grad: Mutex<Option<Tensor>>,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({}{:?} on {}", self.dtype(), self.shape(), self.device().description())?;
        if self.requires_grad() {
            write!(f, ", requires_grad")?;
        }
        write!(f, ")")
    }
}

impl Tensor {
    pub(crate) fn from_storage(storage: Storage, shape: Vec<usize>, dtype: DType) -> Tensor {
        Tensor {
            inner: Arc::new(Inner {
                storage,
                shape,
                dtype,
                requires_grad: std::sync::atomic::AtomicBool::new(false),
                grad: Mutex::new(None),
            }),
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.inner.shape
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

    /// The device address of the first element.
    pub fn addr(&self) -> DeviceAddr {
        self.inner.storage.buffer.addr()
    }

    /// Whether gradients are computed for it.
    pub fn requires_grad(&self) -> bool {
        self.inner.requires_grad.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets whether gradients are computed for it (a leaf). Returns the tensor.
    pub fn set_requires_grad(self, on: bool) -> Tensor {
        self.inner.requires_grad.store(on, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Its accumulated gradient, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.inner.grad.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces its gradient (`None`: set-to-none, as `zero_grad` does).
    pub fn set_grad(&self, grad: Option<Tensor>) {
        *self.inner.grad.lock().unwrap_or_else(|e| e.into_inner()) = grad;
    }

    /// The tracking record of its storage (creation site, scope), when tracking was on
    /// as it was made.
    pub fn track_record(&self) -> Option<&Arc<TrackRecord>> {
        self.inner.storage.record.as_ref()
    }

    /// Whether two tensors share storage.
    pub fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
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
