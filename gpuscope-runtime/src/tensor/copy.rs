//! Reading tensors back, copies between devices (peer to peer where the devices allow
//! it), and cross-stream use.
//!
//! Views are read and written in logical (row-major) order: a non-contiguous tensor is
//! gathered into a contiguous temporary on its device before it is read back or copied
//! elsewhere, and a copy into a view scatters into the storage it shares.
//!
//! Every read-back waits for the device; after that wait it checks the device's error
//! record (one load of host memory on CUDA): an error a kernel recorded since the last
//! check (a loss target out of range, see `ops::loss`) is returned instead of the data,
//! and cleared.

use std::panic::Location;

use crate::backend::StreamId;
use crate::device::Device;

use super::compute::{check_device_side, contiguous_raw, overlaps, strided_copy};
use super::dtype::{Element, read_scalar};
use super::{Tensor, TensorError};

impl Tensor {
    /// Copies the data to the host as `T` (which must be the tensor's dtype), in
    /// logical (row-major) order, also for a view.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1i64, 2, 3, 4], &[2, 2], &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4]);
    /// assert_eq!(t.t().unwrap().to_vec::<i64>().unwrap(), vec![1, 3, 2, 4]);
    /// ```
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, TensorError> {
        if T::DTYPE != self.dtype() {
            return Err(TensorError::DType {
                actual: self.dtype(),
                asked: T::DTYPE,
            });
        }
        if !self.is_contiguous() {
            return contiguous_raw(self, Location::caller())?.to_vec();
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
            check_device_side(self.device())?;
        }
        Ok(out)
    }

    /// Copies the data to the host converted to `f64`, whatever the dtype (in logical
    /// order, also for a view).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>, TensorError> {
        if !self.is_contiguous() {
            return contiguous_raw(self, Location::caller())?.to_f64_vec();
        }
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
            check_device_side(self.device())?;
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

    /// A contiguous copy on `device` (the same device: a deep copy). A view's elements
    /// are copied in logical order.
    #[track_caller]
    pub fn to_device(&self, device: &Device) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let out = Tensor::empty_at(self.shape(), self.dtype(), device, StreamId::DEFAULT, site)?;
        if self.nbytes() == 0 {
            return Ok(out);
        }
        if !self.is_contiguous() {
            if device == self.device() {
                strided_copy(&out, self)?;
                return Ok(out);
            }
            // Gathered on this device, then copied across.
            out.copy_from_raw(&contiguous_raw(self, site)?)?;
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
            copy_across_devices(&out, self)?;
        }
        Ok(out)
    }

    /// A copy of the data in new (contiguous) storage on the same device.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &Device::host().unwrap()).unwrap();
    /// let c = t.t().unwrap().deep_clone().unwrap();
    /// assert!(c.is_contiguous() && !c.same_storage(&t));
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn deep_clone(&self) -> Result<Tensor, TensorError> {
        self.to_device(&self.device().clone())
    }

    /// Copies `src`'s data into this tensor (same dtype and number of elements; the
    /// elements in logical order, so the shapes may differ). Either may be a view: a
    /// copy into a view writes the storage it shares. An in-place operation: it adds
    /// one to the storage's [`version`](Tensor::version) (also when `src` holds the same
    /// elements), so a graph that saved this tensor refuses `backward()`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let t = Tensor::zeros(&[2, 2], &dev).unwrap();
    /// let src = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &dev).unwrap();
    /// t.t().unwrap().copy_from(&src).unwrap(); // written through the transposed view
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
    /// assert_eq!(t.version(), 1); // one in-place write
    /// ```
    pub fn copy_from(&self, src: &Tensor) -> Result<(), TensorError> {
        self.copy_from_raw(src)?;
        self.increment_version();
        Ok(())
    }

    /// [`copy_from`](Tensor::copy_from) without counting the write in the version (for
    /// tensors an operation has just made).
    pub(crate) fn copy_from_raw(&self, src: &Tensor) -> Result<(), TensorError> {
        if src.dtype() != self.dtype() {
            return Err(TensorError::DType {
                actual: src.dtype(),
                asked: self.dtype(),
            });
        }
        super::check_len(self.shape(), src.numel())?;
        if self.nbytes() == 0 {
            return Ok(());
        }
        let same_elements = self.addr() == src.addr()
            && ((self.is_contiguous() && src.is_contiguous())
                || (self.shape() == src.shape() && self.strides() == src.strides()));
        if src.device() == self.device() && same_elements {
            return Ok(());
        }
        if !self.is_contiguous() || !src.is_contiguous() {
            return self.copy_strided_from(src);
        }
        if src.device() == self.device() && overlaps(self, src) {
            // Contiguous ranges of one storage that overlap: through a temporary.
            return self.copy_from_raw(&contiguous_copy(src)?);
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
            copy_across_devices(self, src)?;
        }
        Ok(())
    }

    /// `copy_from_raw` where either tensor is a view.
    fn copy_strided_from(&self, src: &Tensor) -> Result<(), TensorError> {
        let site = Location::caller();
        if src.device() != self.device() {
            // Gathered on the source's device, copied across contiguous, scattered here.
            let src = contiguous_raw(src, site)?;
            if self.is_contiguous() {
                return self.copy_from_raw(&src);
            }
            let staged = Tensor::empty_at(
                self.shape(),
                self.dtype(),
                self.device(),
                self.stream(),
                site,
            )?;
            staged.copy_from_raw(&src)?;
            return strided_copy(self, &staged);
        }
        // One device: the elements of `src` in `self`'s shape (a gather when the
        // shapes differ), and not overlapping what is written.
        let apart = !overlaps(self, src);
        let src = if apart && src.shape() == self.shape() {
            src.clone()
        } else if apart && src.is_contiguous() {
            src.view_with(self.shape().to_vec(), None)
        } else {
            contiguous_copy(src)?.view_with(self.shape().to_vec(), None)
        };
        strided_copy(self, &src)
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

/// A contiguous copy of `t` in new storage on its device and stream (even when `t` is
/// contiguous).
fn contiguous_copy(t: &Tensor) -> Result<Tensor, TensorError> {
    let out = Tensor::empty_at(
        t.shape(),
        t.dtype(),
        t.device(),
        t.stream(),
        Location::caller(),
    )?;
    strided_copy(&out, t)?;
    Ok(out)
}

/// Copies contiguous `src` into contiguous `dst` (as many bytes) on another device:
/// peer to peer where the two devices allow it ([`Device::enable_peer_access`]; queued
/// on `dst`'s stream after the work queued on `src`'s, and `src`'s stream waits for it,
/// so nothing waits on the host), else through the host (a read-back, which waits and
/// checks `src`'s device's error record, then a write).
fn copy_across_devices(dst: &Tensor, src: &Tensor) -> Result<(), TensorError> {
    #[cfg(feature = "cuda")]
    {
        use crate::backend::cuda::peer::copy_from_peer;
        let (to, from) = (dst.device().cuda_backend(), src.device().cuda_backend());
        if let (Some(to), Some(from)) = (to, from) {
            if dst.device().enable_peer_access(src.device())? {
                // SAFETY: two live storages of `nbytes` bytes on their devices; the copy
                // is ordered after the work queued on `src`'s stream, and `src`'s stream
                // waits for it before anything later (a free) reuses the memory.
                unsafe {
                    copy_from_peer(
                        to,
                        dst.addr(),
                        dst.stream(),
                        from,
                        src.addr(),
                        src.stream(),
                        src.nbytes(),
                    )?
                };
                return Ok(());
            }
        }
    }
    let mut bytes = vec![0u8; src.nbytes()];
    // SAFETY: reads `src`'s storage.
    unsafe {
        src.device()
            .backend()
            .copy_device_to_host(&mut bytes, src.addr(), src.stream())?
    };
    check_device_side(src.device())?;
    // SAFETY: writes `dst`'s storage.
    unsafe {
        dst.device()
            .backend()
            .copy_host_to_device(dst.addr(), &bytes, dst.stream())?
    };
    Ok(())
}
