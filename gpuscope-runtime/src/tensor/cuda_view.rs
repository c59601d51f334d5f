//! Tensors handed to your own CUDA kernels through cudarc.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};

use crate::backend::cuda::CudaBackend;

use super::{Element, Tensor, TensorError};

/// A typed view of a CUDA tensor that cudarc's launch builder accepts (it implements
/// `DeviceSlice`, `DevicePtr` and `DevicePtrMut`). It borrows the tensor, so the memory
/// stays alive while the view exists; work launched through it runs on the tensor's
/// stream (use that stream for the launch: the view's `stream()`).
pub struct CudaView<'a, T> {
    ptr: CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    _tensor: PhantomData<&'a mut T>,
}

impl Tensor {
    /// A view of this tensor for cudarc kernels. Fails when the tensor is not on CUDA or
    /// `T` is not its dtype.
    pub fn cuda_view<T: Element>(&self) -> Result<CudaView<'_, T>, TensorError> {
        if T::DTYPE != self.dtype() {
            return Err(TensorError::DType {
                actual: self.dtype(),
                asked: T::DTYPE,
            });
        }
        let backend = self.device().backend();
        let cuda = backend
            .as_any()
            .downcast_ref::<CudaBackend>()
            .ok_or_else(|| TensorError::Unsupported(format!("cuda_view of a tensor on {}", self.device().description())))?;
        Ok(CudaView {
            ptr: self.addr().0,
            len: self.numel(),
            stream: cuda.cuda_stream(self.stream())?,
            _tensor: PhantomData,
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
        (self.ptr, SyncOnDrop::Sync(None))
    }
}
