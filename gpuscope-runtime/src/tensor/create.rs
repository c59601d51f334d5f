//! Constructors. Each is `#[track_caller]`: with tracking on, the tensor remembers the
//! file:line:column of the call.

use std::panic::Location;

use crate::backend::StreamId;
use crate::device::Device;

use super::dtype::{DType, Element, write_scalar};
use super::random::{Generator, with_default};
use super::storage::Storage;
use super::{Tensor, TensorError, TensorOom, check_len};

impl Tensor {
    /// An uninitialised tensor on `stream` (its contents are whatever the cache held).
    #[track_caller]
    pub fn empty_on(
        shape: &[usize],
        dtype: DType,
        device: &Device,
        stream: StreamId,
    ) -> Result<Tensor, TensorError> {
        Tensor::empty_at(shape, dtype, device, stream, Location::caller())
    }

    pub(crate) fn empty_at(
        shape: &[usize],
        dtype: DType,
        device: &Device,
        stream: StreamId,
        site: &'static Location<'static>,
    ) -> Result<Tensor, TensorError> {
        let storage = Storage::new(device, dtype, shape, stream, site).map_err(|e| match e {
            TensorError::Alloc(a) if a.as_out_of_memory().is_some() => {
                TensorError::OutOfMemory(Box::new(TensorOom::new(a, device, dtype, shape, site)))
            }
            other => other,
        })?;
        Ok(Tensor::from_storage(storage, shape.to_vec(), dtype))
    }

    /// `f32` zeros.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::zeros(&[2, 3], &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    /// ```
    #[track_caller]
    pub fn zeros(shape: &[usize], device: &Device) -> Result<Tensor, TensorError> {
        Tensor::zeros_dtype(shape, DType::F32, device)
    }

    /// Zeros of `dtype`.
    #[track_caller]
    pub fn zeros_dtype(
        shape: &[usize],
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor, TensorError> {
        let t = Tensor::empty_at(shape, dtype, device, StreamId::DEFAULT, Location::caller())?;
        // SAFETY: the range is the tensor's own storage, which nothing else uses yet.
        unsafe {
            device
                .backend()
                .memset(t.addr(), 0, t.nbytes(), t.stream())?
        };
        Ok(t)
    }

    /// `f32` ones.
    #[track_caller]
    pub fn ones(shape: &[usize], device: &Device) -> Result<Tensor, TensorError> {
        Tensor::full_dtype(shape, 1.0, DType::F32, device)
    }

    /// `f32` filled with `value`.
    #[track_caller]
    pub fn full(shape: &[usize], value: f32, device: &Device) -> Result<Tensor, TensorError> {
        Tensor::full_dtype(shape, value as f64, DType::F32, device)
    }

    /// `dtype` filled with `value` (converted as `as` does).
    #[track_caller]
    pub fn full_dtype(
        shape: &[usize],
        value: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let mut one = vec![0u8; dtype.size()];
        write_scalar(dtype, value, &mut one);
        let numel: usize = shape.iter().product();
        let bytes = one.repeat(numel);
        Tensor::from_bytes(&bytes, shape, dtype, device, site)
    }

    /// Uniform in `[0, 1)`, `f32`, from the default generator ([`manual_seed`](super::manual_seed)).
    #[track_caller]
    pub fn rand(shape: &[usize], device: &Device) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let data: Vec<f32> = with_default(|g| fill(shape, || g.uniform() as f32));
        Tensor::from_bytes(as_bytes(&data), shape, DType::F32, device, site)
    }

    /// Standard normal, `f32`, from the default generator.
    #[track_caller]
    pub fn randn(shape: &[usize], device: &Device) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let data: Vec<f32> = with_default(|g| fill(shape, || g.normal() as f32));
        Tensor::from_bytes(as_bytes(&data), shape, DType::F32, device, site)
    }

    /// Standard normal of `dtype` from `generator`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor, tensor::{DType, Generator}};
    /// let dev = Device::host().unwrap();
    /// let a = Tensor::randn_with(&[4], DType::F64, &mut Generator::new(1), &dev).unwrap();
    /// let b = Tensor::randn_with(&[4], DType::F64, &mut Generator::new(1), &dev).unwrap();
    /// assert_eq!(a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    /// ```
    #[track_caller]
    pub fn randn_with(
        shape: &[usize],
        dtype: DType,
        generator: &mut Generator,
        device: &Device,
    ) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let values = fill(shape, || generator.normal());
        Tensor::from_f64s(&values, shape, dtype, device, site)
    }

    /// Uniform in `[0, 1)` of `dtype` from `generator`.
    #[track_caller]
    pub fn rand_with(
        shape: &[usize],
        dtype: DType,
        generator: &mut Generator,
        device: &Device,
    ) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let values = fill(shape, || generator.uniform());
        Tensor::from_f64s(&values, shape, dtype, device, site)
    }

    /// A tensor holding `data` (row-major) with `shape`.
    #[track_caller]
    pub fn from_slice<T: Element>(
        data: &[T],
        shape: &[usize],
        device: &Device,
    ) -> Result<Tensor, TensorError> {
        check_len(shape, data.len())?;
        Tensor::from_bytes(as_bytes(data), shape, T::DTYPE, device, Location::caller())
    }

    /// A tensor holding `data` with `shape`.
    #[track_caller]
    pub fn from_vec<T: Element>(
        data: Vec<T>,
        shape: &[usize],
        device: &Device,
    ) -> Result<Tensor, TensorError> {
        check_len(shape, data.len())?;
        Tensor::from_bytes(as_bytes(&data), shape, T::DTYPE, device, Location::caller())
    }

    /// A one-element tensor (shape `[]`).
    #[track_caller]
    pub fn scalar<T: Element>(value: T, device: &Device) -> Result<Tensor, TensorError> {
        Tensor::from_bytes(
            as_bytes(&[value]),
            &[],
            T::DTYPE,
            device,
            Location::caller(),
        )
    }

    pub(crate) fn from_f64s(
        values: &[f64],
        shape: &[usize],
        dtype: DType,
        device: &Device,
        site: &'static Location<'static>,
    ) -> Result<Tensor, TensorError> {
        check_len(shape, values.len())?;
        let size = dtype.size();
        let mut bytes = vec![0u8; values.len() * size];
        for (v, out) in values.iter().zip(bytes.chunks_exact_mut(size)) {
            write_scalar(dtype, *v, out);
        }
        Tensor::from_bytes(&bytes, shape, dtype, device, site)
    }

    pub(crate) fn from_bytes(
        bytes: &[u8],
        shape: &[usize],
        dtype: DType,
        device: &Device,
        site: &'static Location<'static>,
    ) -> Result<Tensor, TensorError> {
        let t = Tensor::empty_at(shape, dtype, device, StreamId::DEFAULT, site)?;
        debug_assert_eq!(bytes.len(), t.nbytes());
        if !bytes.is_empty() {
            // SAFETY: the tensor's own storage, at least `bytes.len()` long, unused yet.
            unsafe {
                device
                    .backend()
                    .copy_host_to_device(t.addr(), bytes, t.stream())?
            };
        }
        Ok(t)
    }
}

fn fill<T>(shape: &[usize], mut f: impl FnMut() -> T) -> Vec<T> {
    let n: usize = shape.iter().product();
    (0..n).map(|_| f()).collect()
}

/// The bytes of a slice of elements.
pub(crate) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: elements are plain numbers without padding; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}
