//! The CUDA backend, on cudarc's driver API (loaded at run time, so a program built
//! with it runs where no CUDA is installed and reports why it cannot use a GPU).
//!
//! Memory comes from `cuMemAlloc`, or with virtual memory from `cuMemCreate` chunks,
//! each mapped whole (`cuMemMap`) inside ranges from `cuMemAddressReserve` and made
//! accessible to this device and to its peers (`cuMemSetAccess`; peers are added when
//! a peer copy first needs them, see [`peer`]). Streams are cudarc streams (stream 0
//! is the legacy default stream); events are created without timing and pooled by the
//! allocator.
//!
//! [`CudaBackend::new`] first checks that the driver library can be loaded
//! ([`cudarc::driver::sys::is_culib_present`]): cudarc panics on the first driver call
//! when it cannot be.
//!
//! Errors that kernels find in their inputs (a loss target out of range, which the host
//! cannot check without waiting for the GPU) go to the device's error record: a few
//! bytes of mapped pinned host memory (`cuMemHostAlloc` with `DEVICEMAP | PORTABLE`),
//! allocated on first use and freed with the backend. A kernel claims it with an
//! `atomicCAS` from 0 (the first error wins) and fills it in; the host reads it, with one
//! load and no driver call, after each wait that reads results back
//! ([`CudaBackend::take_device_side_error`]), PyTorch's device-side assertions as an
//! error you can recover from.

use std::sync::{Arc, Mutex, RwLock};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaStream};

use super::{
    Backend, BackendError, DeviceAddr, DeviceKind, EventId, MemInfo, PhysHandle, StreamId,
    VirtualMemory,
};

mod error_record;
pub mod peer;
mod virtual_memory;

pub use error_record::DeviceSideError;
use error_record::ErrorRecordSlot;

/// Whether the CUDA driver library can be loaded on this machine. When it cannot, any
/// other cudarc call would panic.
pub fn driver_present() -> bool {
    // SAFETY: only tries to open the library by name.
    unsafe { sys::is_culib_present() }
}

/// Why CUDA cannot be used here, or `None` when a driver and at least one device are
/// present. Tests use it to skip with a printed reason.
pub fn unavailable_reason() -> Option<String> {
    if !driver_present() {
        return Some("the CUDA driver library (libcuda) is not installed on this machine".into());
    }
    if let Err(e) = result::init() {
        return Some(format!("cuInit failed: {}", describe(e)));
    }
    match result::device::get_count() {
        Ok(0) => Some("the CUDA driver reports no devices".into()),
        Ok(_) => None,
        Err(e) => Some(format!("cuDeviceGetCount failed: {}", describe(e))),
    }
}

/// `CUDA_ERROR_X: description`.
pub(super) fn describe(e: DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name}: {text}")
}

pub(super) fn driver(call: &'static str, e: DriverError) -> BackendError {
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        return BackendError::OutOfMemory { requested: 0 };
    }
    BackendError::Driver {
        call,
        message: describe(e),
    }
}

pub(super) fn oom_or(call: &'static str, requested: usize) -> impl Fn(DriverError) -> BackendError {
    move |e| match driver(call, e) {
        BackendError::OutOfMemory { .. } => BackendError::OutOfMemory { requested },
        other => other,
    }
}

/// A raw event handle, owned by the backend's table.
struct RawEvent(sys::CUevent);

// SAFETY: CUDA events may be used from any thread of the process.
unsafe impl Send for RawEvent {}
unsafe impl Sync for RawEvent {}

/// A CUDA device. See the [module documentation](self).
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    name: String,
    streams: RwLock<Vec<Arc<CudaStream>>>,
    events: Mutex<Vec<Option<RawEvent>>>,
    vmm: Option<Vmm>,
    /// Other devices (ordinals) that new mappings are made accessible to.
    peers: RwLock<Vec<i32>>,
    /// Where kernels report bad inputs; allocated on first use (`error_record_ptr`).
    errors: ErrorRecordSlot,
}

/// Virtual memory properties of the device.
struct Vmm {
    ordinal: i32,
    granularity: usize,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("ordinal", &self.ctx.ordinal())
            .field("name", &self.name)
            .field("virtual_memory", &self.vmm.as_ref().map(|v| v.granularity))
            .finish()
    }
}

impl CudaBackend {
    /// Opens CUDA device `ordinal`. Fails with [`BackendError::Unavailable`] and the
    /// reason when there is no driver or no such device.
    pub fn new(ordinal: usize) -> Result<CudaBackend, BackendError> {
        if let Some(reason) = unavailable_reason() {
            return Err(BackendError::Unavailable(reason));
        }
        let count = result::device::get_count().map_err(|e| driver("cuDeviceGetCount", e))?;
        if ordinal >= count as usize {
            return Err(BackendError::Unavailable(format!(
                "CUDA device {ordinal} does not exist ({count} present)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("cuDevicePrimaryCtxRetain", e))?;
        let name = ctx.name().map_err(|e| driver("cuDeviceGetName", e))?;
        let vmm = Self::probe_vmm(&ctx, ordinal as i32)?;
        let default = ctx.default_stream();
        Ok(CudaBackend {
            ctx,
            name,
            streams: RwLock::new(vec![default]),
            events: Mutex::new(Vec::new()),
            vmm,
            peers: RwLock::new(Vec::new()),
            errors: ErrorRecordSlot::default(),
        })
    }

    fn probe_vmm(ctx: &Arc<CudaContext>, ordinal: i32) -> Result<Option<Vmm>, BackendError> {
        let supported = ctx
            .attribute(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
            )
            .map_err(|e| driver("cuDeviceGetAttribute", e))?;
        if supported == 0 {
            return Ok(None);
        }
        let prop = allocation_prop(ordinal);
        let mut granularity = 0usize;
        // SAFETY: `prop` describes pinned memory on this device; the output is a usize.
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        }
        .result()
        .map_err(|e| driver("cuMemGetAllocationGranularity", e))?;
        Ok(Some(Vmm {
            ordinal,
            granularity,
        }))
    }

    /// The cudarc context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The cudarc stream behind `stream`, for launching kernels on it.
    pub fn cuda_stream(&self, stream: StreamId) -> Result<Arc<CudaStream>, BackendError> {
        self.streams
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(stream.index())
            .cloned()
            .ok_or_else(|| unknown_stream(stream))
    }

    /// The device address of this device's error record, for kernels that report
    /// errors in their inputs (see the [module documentation](self)). Allocates and
    /// zeroes the record on first use.
    pub fn error_record_ptr(&self) -> Result<sys::CUdeviceptr, BackendError> {
        self.errors.device_ptr(|| self.bind())
    }

    /// The error a kernel recorded on this device since the last call, cleared so the
    /// next one can be recorded; `None` when there is none (or no record was ever
    /// needed). Call it after waiting for the work that may have reported: one load of
    /// host memory, no driver call.
    pub fn take_device_side_error(&self) -> Option<DeviceSideError> {
        self.errors.take()
    }

    /// The devices, other than this one, that new mappings are made accessible to.
    fn access_peers(&self) -> Vec<i32> {
        self.peers.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn bind(&self) -> Result<(), BackendError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver("cuCtxSetCurrent", e))
    }

    fn raw_stream(&self, stream: StreamId) -> Result<sys::CUstream, BackendError> {
        // The handle only: no clone of the stream's `Arc` (two atomic operations on the
        // allocator's poll and on every launch).
        self.streams
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(stream.index())
            .map(|s| s.cu_stream())
            .ok_or_else(|| unknown_stream(stream))
    }

    /// The driver handle of `event` (for cross-device waits).
    pub fn raw_event(&self, event: EventId) -> Result<sys::CUevent, BackendError> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(event.0 as usize)
            .and_then(|e| e.as_ref().map(|e| e.0))
            .ok_or_else(|| BackendError::InvalidHandle {
                what: "event",
                detail: format!("event {} does not exist", event.0),
            })
    }
}

/// A stream id this device never created.
fn unknown_stream(stream: StreamId) -> BackendError {
    BackendError::InvalidHandle {
        what: "stream",
        detail: format!("{stream} was never created on this CUDA device"),
    }
}

/// The properties of a physical chunk of device `ordinal`'s memory (`cuMemCreate`).
fn allocation_prop(ordinal: i32) -> sys::CUmemAllocationProp {
    // SAFETY: the struct is plain data for which all-zero is a valid value (no handle
    // types, no flags); the fields that matter are set below.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    prop
}

impl Backend for CudaBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn mem_info(&self) -> Result<MemInfo, BackendError> {
        self.bind()?;
        let (free, total) = result::mem_get_info().map_err(|e| driver("cuMemGetInfo", e))?;
        Ok(MemInfo { free, total })
    }

    fn malloc(&self, size: usize) -> Result<DeviceAddr, BackendError> {
        self.bind()?;
        // SAFETY: a plain device allocation; the result is checked.
        let ptr = unsafe { result::malloc_sync(size) }.map_err(oom_or("cuMemAlloc", size))?;
        Ok(DeviceAddr(ptr))
    }

    unsafe fn free(&self, addr: DeviceAddr, _size: usize) -> Result<(), BackendError> {
        self.bind()?;
        // SAFETY: the caller promises `addr` came from `malloc` and is idle.
        unsafe { result::free_sync(addr.0) }.map_err(|e| driver("cuMemFree", e))
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        self.vmm.as_ref().map(|_| self as &dyn VirtualMemory)
    }

    fn create_stream(&self) -> Result<StreamId, BackendError> {
        let stream = self
            .ctx
            .new_stream()
            .map_err(|e| driver("cuStreamCreate", e))?;
        let mut streams = self.streams.write().unwrap_or_else(|e| e.into_inner());
        streams.push(stream);
        Ok(StreamId((streams.len() - 1) as u32))
    }

    fn has_stream(&self, stream: StreamId) -> bool {
        (stream.0 as usize) < self.streams.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), BackendError> {
        self.cuda_stream(stream)?
            .synchronize()
            .map_err(|e| driver("cuStreamSynchronize", e))
    }

    fn synchronize_device(&self) -> Result<(), BackendError> {
        self.ctx
            .synchronize()
            .map_err(|e| driver("cuCtxSynchronize", e))
    }

    fn query_stream(&self, stream: StreamId) -> Result<bool, BackendError> {
        let s = self.raw_stream(stream)?;
        self.bind()?;
        // SAFETY: the stream is live and belongs to this context.
        match unsafe { sys::cuStreamQuery(s) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            err => Err(driver("cuStreamQuery", DriverError(err))),
        }
    }

    fn create_event(&self) -> Result<EventId, BackendError> {
        self.bind()?;
        let event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| driver("cuEventCreate", e))?;
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let slot = match events.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                events.push(None);
                events.len() - 1
            }
        };
        events[slot] = Some(RawEvent(event));
        Ok(EventId(slot as u32))
    }

    fn destroy_event(&self, event: EventId) -> Result<(), BackendError> {
        let raw = {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            events.get_mut(event.0 as usize).and_then(Option::take)
        };
        let raw = raw.ok_or_else(|| BackendError::InvalidHandle {
            what: "event",
            detail: format!("event {} does not exist", event.0),
        })?;
        self.bind()?;
        // SAFETY: the event was created here and is no longer in the table.
        unsafe { result::event::destroy(raw.0) }.map_err(|e| driver("cuEventDestroy", e))
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), BackendError> {
        let (e, s) = (self.raw_event(event)?, self.raw_stream(stream)?);
        self.bind()?;
        // SAFETY: both handles are live and belong to this context.
        unsafe { result::event::record(e, s) }.map_err(|e| driver("cuEventRecord", e))
    }

    fn query_event(&self, event: EventId) -> Result<bool, BackendError> {
        let e = self.raw_event(event)?;
        self.bind()?;
        // SAFETY: the event is live.
        match unsafe { result::event::query(e) } {
            Ok(()) => Ok(true),
            Err(DriverError(sys::CUresult::CUDA_ERROR_NOT_READY)) => Ok(false),
            Err(err) => Err(driver("cuEventQuery", err)),
        }
    }

    fn synchronize_event(&self, event: EventId) -> Result<(), BackendError> {
        let e = self.raw_event(event)?;
        self.bind()?;
        // SAFETY: the event is live.
        unsafe { result::event::synchronize(e) }.map_err(|e| driver("cuEventSynchronize", e))
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), BackendError> {
        let (e, s) = (self.raw_event(event)?, self.raw_stream(stream)?);
        self.bind()?;
        // SAFETY: both handles are live and belong to this context.
        unsafe { result::stream::wait_event(s, e, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .map_err(|e| driver("cuStreamWaitEvent", e))
    }

    unsafe fn copy_host_to_device(
        &self,
        dst: DeviceAddr,
        src: &[u8],
        stream: StreamId,
    ) -> Result<(), BackendError> {
        let s = self.raw_stream(stream)?;
        self.bind()?;
        // SAFETY: the caller promises `dst` holds `src.len()` bytes. The source is
        // pageable host memory, which the driver copies out before the call returns.
        unsafe { result::memcpy_htod_async(dst.0, src, s) }
            .map_err(|e| driver("cuMemcpyHtoDAsync", e))
    }

    unsafe fn copy_device_to_host(
        &self,
        dst: &mut [u8],
        src: DeviceAddr,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        let s = self.raw_stream(stream)?;
        self.bind()?;
        // SAFETY: the caller promises `src` holds `dst.len()` bytes; the stream is
        // synchronised before `dst` is returned to the caller.
        unsafe { result::memcpy_dtoh_async(dst, src.0, s) }
            .map_err(|e| driver("cuMemcpyDtoHAsync", e))?;
        // SAFETY: the stream is live.
        unsafe { result::stream::synchronize(s) }.map_err(|e| driver("cuStreamSynchronize", e))
    }

    unsafe fn copy_device_to_device(
        &self,
        dst: DeviceAddr,
        src: DeviceAddr,
        len: usize,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        let s = self.raw_stream(stream)?;
        self.bind()?;
        // SAFETY: the caller promises both ranges are device memory of `len` bytes.
        unsafe { result::memcpy_dtod_async(dst.0, src.0, len, s) }
            .map_err(|e| driver("cuMemcpyDtoDAsync", e))
    }

    unsafe fn memset(
        &self,
        dst: DeviceAddr,
        value: u8,
        len: usize,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        let s = self.raw_stream(stream)?;
        self.bind()?;
        // SAFETY: the caller promises `dst` holds `len` bytes.
        unsafe { result::memset_d8_async(dst.0, value, len, s) }
            .map_err(|e| driver("cuMemsetD8Async", e))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let events = std::mem::take(self.events.get_mut().unwrap_or_else(|e| e.into_inner()));
        if self.bind().is_ok() {
            for e in events.into_iter().flatten() {
                // SAFETY: the event was created here; nothing uses it any more.
                let _ = unsafe { result::event::destroy(e.0) };
            }
        }
        // Kernels still queued may write the record: `free` waits for them first.
        self.errors.free(&self.ctx);
    }
}
