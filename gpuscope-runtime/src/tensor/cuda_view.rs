//! Tensors handed to your own CUDA kernels through cudarc.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice, SyncOnDrop};

use crate::backend::cuda::CudaBackend;

use super::{Element, Tensor, TensorError};

/// A typed view of a CUDA tensor for your own kernels. It implements cudarc's
/// `DeviceSlice`, `DevicePtr` and `DevicePtrMut`, and passes straight to a launch
/// builder (`builder.arg(&view)`: the kernel receives a `T*`). It borrows the tensor, so
/// the memory stays alive while the view exists; launch on the tensor's stream (the
/// view's `stream()`), or order other streams yourself (`record_stream` and events).
///
/// The kernel sees `numel()` elements in row-major order from the tensor's first
/// element, so only a contiguous tensor has one: a non-contiguous view (a transpose,
/// a permutation, a narrowed column) is refused with [`TensorError::InvalidArgument`].
/// Take the view of `t.contiguous()?` instead, and after a kernel that writes it, copy
/// the result back with `t.copy_from(&dense)`.
///
/// Writes and autograd: cudarc calls that write through `device_ptr_mut` (copies into
/// the view, memsets, cuBLAS outputs) add one to the tensor's
/// [`version`](Tensor::version), like gpuscope's in-place operations. A kernel argument
/// (`arg(&view)`) is a bare pointer that may be read or written: after a kernel that
/// writes the tensor, call [`t.increment_version()`](Tensor::increment_version), so that
/// a graph that saved the old values refuses `backward()`.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cudarc::driver::{LaunchConfig, PushKernelArg, DeviceSlice};
/// use gpuscope_runtime::{Device, Tensor};
/// let dev = Device::cuda(0)?;
/// let t = Tensor::ones(&[1024], &dev)?;
/// let ptx = cudarc::nvrtc::compile_ptx("extern \"C\" __global__ void twice(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }")?;
/// let view = t.cuda_view::<f32>()?;
/// let module = view.stream().context().load_module(ptx)?;
/// let f = module.load_function("twice")?;
/// let n = 1024i32;
/// let stream = view.stream().clone();
/// let mut launch = stream.launch_builder(&f);
/// launch.arg(&view).arg(&n);
/// unsafe { launch.launch(LaunchConfig::for_num_elems(1024))? };
/// drop(view);
/// t.increment_version(); // the kernel wrote `t`
/// assert_eq!(t.to_vec::<f32>()?, vec![2.0; 1024]);
/// # Ok(()) }
/// ```
#[repr(C)]
pub struct CudaView<'a, T> {
    /// First, so that a pointer to the view is a pointer to the device pointer (how
    /// cudarc passes `DeviceRepr` kernel arguments).
    ptr: CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    /// The tensor whose version a write through `device_ptr_mut` counts.
    tensor: &'a Tensor,
    _elem: PhantomData<&'a mut T>,
}

impl Tensor {
    /// A view of this tensor for cudarc kernels: a pointer to its first element (the
    /// storage offset included) and `numel()` elements. Fails when the tensor is not on
    /// CUDA, `T` is not its dtype, or the tensor is not contiguous.
    pub fn cuda_view<T: Element>(&self) -> Result<CudaView<'_, T>, TensorError> {
        if T::DTYPE != self.dtype() {
            return Err(TensorError::DType {
                actual: self.dtype(),
                asked: T::DTYPE,
            });
        }
        if !self.is_contiguous() {
            return Err(TensorError::InvalidArgument {
                op: "cuda_view",
                reason: format!(
                    "the tensor {:?} is not contiguous (strides {:?}): a kernel would index \
                     it wrongly; take the view of .contiguous() (and copy_from it back after \
                     a kernel that writes it)",
                    self.shape(),
                    self.strides()
                ),
            });
        }
        let backend = self.device().backend();
        let cuda = backend
            .as_any()
            .downcast_ref::<CudaBackend>()
            .ok_or_else(|| {
                TensorError::Unsupported(format!(
                    "cuda_view of a tensor on {}",
                    self.device().description()
                ))
            })?;
        Ok(CudaView {
            ptr: self.addr().0,
            len: self.numel(),
            stream: cuda.cuda_stream(self.stream())?,
            tensor: self,
            _elem: PhantomData,
        })
    }
}

impl<T> DeviceSlice<T> for CudaView<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<T> DevicePtr<T> for CudaView<'_, T> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        // Work on the tensor's own stream is ordered already; on another stream the
        // caller must order it (record_stream and events), as with raw pointers.
        let _ = stream;
        (self.ptr, SyncOnDrop::Sync(None))
    }
}

impl<T> DevicePtrMut<T> for CudaView<'_, T> {
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        let _ = stream;
        // A write (cudarc's copies and memsets, cuBLAS outputs): one more version, as for
        // gpuscope's own in-place operations.
        self.tensor.increment_version();
        (self.ptr, SyncOnDrop::Sync(None))
    }
}

// SAFETY: `#[repr(C)]` with the device pointer first: cudarc passes the view's address as
// the kernel parameter's, and the kernel reads the pointer from it.
unsafe impl<T> DeviceRepr for CudaView<'_, T> {}
