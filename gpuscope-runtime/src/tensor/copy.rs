//! Reading tensors back, copies between devices, and cross-stream use.

use std::panic::Location;

use crate::backend::StreamId;
use crate::device::Device;

use super::dtype::{Element, read_scalar};
use super::{Tensor, TensorError};

impl Tensor {
    /// Copies the data to the host as `T` (which must be the tensor's dtype).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, TensorError> {
        if T::DTYPE != self.dtype() {
            return Err(TensorError::DType {
                actual: self.dtype(),
                asked: T::DTYPE,
            });
        }
        let mut out: Vec<T> = Vec::with_capacity(self.numel());
        if self.numel() > 0 {
            // SAFETY: the destination has room for `numel` elements, written in full below.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), self.nbytes())
            };
            // SAFETY: reads the tensor's own storage.
            unsafe {
                self.device()
                    .backend()
                    .copy_device_to_host(dst, self.addr(), self.stream())?
            };
            // SAFETY: the copy initialised every element.
            unsafe { out.set_len(self.numel()) };
        }
        Ok(out)
    }

    /// Copies the data to the host converted to `f64`, whatever the dtype.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>, TensorError> {
        let mut bytes = vec![0u8; self.nbytes()];
        if !bytes.is_empty() {
            // SAFETY: reads the tensor's own storage.
            unsafe {
                self.device().backend().copy_device_to_host(
                    &mut bytes,
                    self.addr(),
                    self.stream(),
                )?
            };
        }
        let size = self.dtype().size();
        Ok(bytes
            .chunks_exact(size)
            .map(|b| read_scalar(self.dtype(), b))
            .collect())
    }

    /// The value of a one-element tensor, as `f64`. Keeps no graph.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::scalar(2.5f32, &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.item().unwrap(), 2.5);
    /// ```
    pub fn item(&self) -> Result<f64, TensorError> {
        if self.numel() != 1 {
            return Err(TensorError::NotScalar(self.shape().to_vec()));
        }
        Ok(self.to_f64_vec()?[0])
    }

    /// A copy on `device` (the same device: a deep copy).
    #[track_caller]
    pub fn to_device(&self, device: &Device) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let out = Tensor::empty_at(self.shape(), self.dtype(), device, StreamId::DEFAULT, site)?;
        if self.nbytes() == 0 {
            return Ok(out);
        }
        if device == self.device() {
            // SAFETY: two distinct storages of the same size on one device.
            unsafe {
                device.backend().copy_device_to_device(
                    out.addr(),
                    self.addr(),
                    self.nbytes(),
                    out.stream(),
                )?
            };
        } else {
            let mut bytes = vec![0u8; self.nbytes()];
            // SAFETY: reads this tensor's storage, then writes the new one's.
            unsafe {
                self.device().backend().copy_device_to_host(
                    &mut bytes,
                    self.addr(),
                    self.stream(),
                )?;
                device
                    .backend()
                    .copy_host_to_device(out.addr(), &bytes, out.stream())?;
            }
        }
        Ok(out)
    }

    /// A copy of the data in new storage on the same device.
    #[track_caller]
    pub fn deep_clone(&self) -> Result<Tensor, TensorError> {
        self.to_device(&self.device().clone())
    }

    /// Copies `src`'s data into this tensor (same dtype and number of elements).
    pub fn copy_from(&self, src: &Tensor) -> Result<(), TensorError> {
        if src.dtype() != self.dtype() {
            return Err(TensorError::DType {
                actual: src.dtype(),
                asked: self.dtype(),
            });
        }
        super::check_len(self.shape(), src.numel())?;
        if self.nbytes() == 0 || self.same_storage(src) {
            return Ok(());
        }
        if src.device() == self.device() {
            // SAFETY: distinct storages of the same size on one device.
            unsafe {
                self.device().backend().copy_device_to_device(
                    self.addr(),
                    src.addr(),
                    self.nbytes(),
                    self.stream(),
                )?
            };
        } else {
            let mut bytes = vec![0u8; self.nbytes()];
            // SAFETY: as in `to_device`.
            unsafe {
                src.device()
                    .backend()
                    .copy_device_to_host(&mut bytes, src.addr(), src.stream())?;
                self.device()
                    .backend()
                    .copy_host_to_device(self.addr(), &bytes, self.stream())?;
            }
        }
        Ok(())
    }

    /// Notes that `stream` uses this tensor: when it is freed, its memory is reused only
    /// after the work queued on `stream` by then completes (PyTorch's `record_stream`).
    pub fn record_stream(&self, stream: StreamId) -> Result<(), TensorError> {
        self.inner.storage.buffer.record_stream(stream)?;
        // The scope open now fences `stream` too when it exits.
        crate::scope::note_stream(self.device(), stream);
        Ok(())
    }
}
