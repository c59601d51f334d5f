//! Device backends: raw device memory, streams, events and memory information
//! behind one small trait.
//!
//! | backend | where | memory | streams and events |
//! |---|---|---|---|
//! | [`cuda::CudaBackend`] | an NVIDIA GPU through cudarc (feature `cuda`) | `cuMemAlloc`, or physical chunks mapped into reserved address ranges (CUDA virtual memory) | real CUDA streams and events |
//! | [`host::HostBackend`] | any machine: the embedded default | the system allocator | run in order on the calling thread: every event completes when recorded |
//! | [`test::TestBackend`] | tests | fake addresses inside a capacity limit, optional virtual memory | events complete when the test says so; faults on demand |
//! | [`fault::FaultyBackend`] | tests | any backend's, with the `n`-th call of a kind failing on demand | the wrapped backend's |
//!
//! The caching allocator ([`crate::alloc`]) calls a backend only on its slow paths
//! (a new segment, a released segment, an event), so one virtual call per operation
//! costs nothing measurable.

pub mod fault;
pub mod host;
pub mod test;

#[cfg(feature = "cuda")]
pub mod cuda;

use std::fmt;

/// A device address. On CUDA it is a `CUdeviceptr`; on the host a pointer value.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DeviceAddr(pub u64);

impl DeviceAddr {
    /// The address `bytes` past this one.
    #[inline]
    pub fn offset(self, bytes: usize) -> DeviceAddr {
        DeviceAddr(self.0 + bytes as u64)
    }
}

impl fmt::Debug for DeviceAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for DeviceAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A stream of a backend. Stream `0` is the device's default stream; further streams
/// come from [`Backend::create_stream`]. Work on one stream runs in order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct StreamId(pub u32);

impl StreamId {
    /// The default stream of every backend.
    pub const DEFAULT: StreamId = StreamId(0);

    /// The stream's index, for tables indexed by stream.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream {}", self.0)
    }
}

/// An event of a backend, created by [`Backend::create_event`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct EventId(pub u32);

/// A physical memory chunk of a backend's virtual memory (a `CUmemGenericAllocationHandle`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct PhysHandle(pub u64);

/// What kind of device a backend drives.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DeviceKind {
    /// An NVIDIA GPU through CUDA.
    Cuda,
    /// The CPU, with memory from the system allocator.
    Host,
    /// The deterministic test backend (fake addresses, fault injection).
    Test,
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Cuda => "cuda",
            DeviceKind::Host => "host",
            DeviceKind::Test => "test",
        })
    }
}

/// Free and total memory of a device, in bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MemInfo {
    /// Bytes the device could still hand out.
    pub free: usize,
    /// The device's capacity.
    pub total: usize,
}

/// An error from a backend (`Debug` prints its message, for a `main` that returns it).
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The device has no memory left for a request of this size.
    #[error("the device is out of memory: could not allocate {requested} bytes")]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
    },
    /// A driver call failed.
    #[error("{call} failed: {message}")]
    Driver {
        /// The driver function that failed.
        call: &'static str,
        /// The driver's own description of the failure.
        message: String,
    },
    /// The backend cannot do this at all (for example virtual memory on the host).
    #[error("the {backend} backend does not support {what}")]
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// What was asked for.
        what: &'static str,
    },
    /// A stream, event or handle that this backend never gave out, or already destroyed.
    #[error("invalid {what}: {detail}")]
    InvalidHandle {
        /// The kind of handle.
        what: &'static str,
        /// Which one, and why it is invalid.
        detail: String,
    },
    /// No device of that kind is present (no driver, or no GPU).
    #[error("no device available: {0}")]
    Unavailable(String),
}

crate::error_fmt::debug_as_display!(BackendError);

impl BackendError {
    /// Whether this error means the device ran out of memory, so that releasing cached
    /// memory and trying again can help.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, BackendError::OutOfMemory { .. })
    }
}

/// Raw device memory, streams, events and memory information: all that the caching
/// allocator and tensors need from a device.
///
/// Implementations are thread safe. Addresses handed out by [`Backend::malloc`] are
/// aligned to at least 256 bytes, as `cudaMalloc`'s are.
///
/// # Safety of the `unsafe` methods
/// Memory methods are `unsafe` where the caller must promise that an address came
/// from this backend and that no work still uses it.
pub trait Backend: Send + Sync + fmt::Debug {
    /// The kind of device.
    fn kind(&self) -> DeviceKind;

    /// The device's ordinal among devices of its kind.
    fn ordinal(&self) -> usize {
        0
    }

    /// A human-readable device name (e.g. `NVIDIA H100 80GB HBM3`).
    fn name(&self) -> String;

    /// Free and total device memory.
    fn mem_info(&self) -> Result<MemInfo, BackendError>;

    /// Allocates `size` bytes of device memory (a device allocation: `cudaMalloc`).
    fn malloc(&self, size: usize) -> Result<DeviceAddr, BackendError>;

    /// Returns memory from [`Backend::malloc`] to the device.
    ///
    /// # Safety
    /// `addr` and `size` are exactly those of one earlier `malloc` of this backend, not
    /// freed since, and no queued work still uses the memory.
    unsafe fn free(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError>;

    /// The backend's virtual memory, when it has one (CUDA's `cuMemCreate`/`cuMemMap`).
    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        None
    }

    /// Creates a new stream.
    fn create_stream(&self) -> Result<StreamId, BackendError>;

    /// Whether `stream` is a stream of this backend (the default stream, or one that
    /// [`Backend::create_stream`] returned).
    fn has_stream(&self, stream: StreamId) -> bool;

    /// Blocks until all work queued on `stream` has finished.
    fn synchronize_stream(&self, stream: StreamId) -> Result<(), BackendError>;

    /// Blocks until all work on every stream of the device has finished.
    fn synchronize_device(&self) -> Result<(), BackendError>;

    /// Whether all work queued on `stream` has finished (`cuStreamQuery`; never blocks).
    fn query_stream(&self, stream: StreamId) -> Result<bool, BackendError>;

    /// Creates an event (without timing).
    fn create_event(&self) -> Result<EventId, BackendError>;

    /// Destroys an event.
    fn destroy_event(&self, event: EventId) -> Result<(), BackendError>;

    /// Records `event` on `stream`: it completes when the work queued there before it has.
    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), BackendError>;

    /// Whether `event` has completed (never blocks).
    fn query_event(&self, event: EventId) -> Result<bool, BackendError>;

    /// Blocks until `event` has completed.
    fn synchronize_event(&self, event: EventId) -> Result<(), BackendError>;

    /// Makes future work on `stream` wait until `event` completes (never blocks the host).
    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), BackendError>;

    /// Copies host bytes to device memory, in order on `stream`. The copy has finished
    /// reading `src` when this returns.
    ///
    /// # Safety
    /// `dst..dst+src.len()` is device memory of this backend that nothing else writes.
    unsafe fn copy_host_to_device(
        &self,
        dst: DeviceAddr,
        src: &[u8],
        stream: StreamId,
    ) -> Result<(), BackendError>;

    /// Copies device memory to host bytes, in order on `stream`; waits for the copy.
    ///
    /// # Safety
    /// `src..src+dst.len()` is device memory of this backend.
    unsafe fn copy_device_to_host(
        &self,
        dst: &mut [u8],
        src: DeviceAddr,
        stream: StreamId,
    ) -> Result<(), BackendError>;

    /// Copies `len` bytes between device buffers, in order on `stream`.
    ///
    /// # Safety
    /// Both ranges are device memory of this backend, and they do not overlap.
    unsafe fn copy_device_to_device(
        &self,
        dst: DeviceAddr,
        src: DeviceAddr,
        len: usize,
        stream: StreamId,
    ) -> Result<(), BackendError>;

    /// Sets `len` bytes at `dst` to `value`, in order on `stream`.
    ///
    /// # Safety
    /// `dst..dst+len` is device memory of this backend that nothing else uses.
    unsafe fn memset(
        &self,
        dst: DeviceAddr,
        value: u8,
        len: usize,
        stream: StreamId,
    ) -> Result<(), BackendError>;

    /// Downcasting, so that code that knows the backend (CUDA kernels) can reach it.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Virtual memory of a device: physical chunks that can be mapped anywhere inside
/// reserved address ranges (CUDA's `cuMemCreate`, `cuMemAddressReserve`, `cuMemMap`).
///
/// The caching allocator uses it to build segments out of whichever chunks are free,
/// so freed memory is reused whatever its address was.
pub trait VirtualMemory: Send + Sync {
    /// Chunks and mappings are multiples of this many bytes (2 MiB on current GPUs).
    fn granularity(&self) -> usize;

    /// Reserves `size` bytes of address space (no memory behind it).
    fn reserve_address(&self, size: usize) -> Result<DeviceAddr, BackendError>;

    /// Returns a reservation.
    ///
    /// # Safety
    /// `addr`/`size` are one earlier reservation with nothing mapped in it.
    unsafe fn free_address(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError>;

    /// Creates a physical chunk of `size` bytes (a device allocation).
    fn create_chunk(&self, size: usize) -> Result<PhysHandle, BackendError>;

    /// Returns a physical chunk to the device (a device free).
    ///
    /// # Safety
    /// The chunk is not mapped anywhere.
    unsafe fn release_chunk(&self, chunk: PhysHandle, size: usize) -> Result<(), BackendError>;

    /// Maps the whole of `chunk` (`size` bytes, its size) at `addr`, inside a
    /// reservation; `addr` is a multiple of the granularity. The mapping is not
    /// accessible until [`VirtualMemory::set_access`].
    ///
    /// A chunk is always mapped whole: CUDA's `cuMemMap` accepts no offset into a
    /// physical allocation (it returns `CUDA_ERROR_NOT_SUPPORTED`, seen on an H100 with
    /// driver 580), so memory that must move on its own is a chunk of its own.
    ///
    /// # Safety
    /// `addr..addr+size` lies in a reservation and nothing is mapped there, and the
    /// chunk is not mapped anywhere else.
    unsafe fn map(
        &self,
        addr: DeviceAddr,
        size: usize,
        chunk: PhysHandle,
    ) -> Result<(), BackendError>;

    /// Makes `addr..addr+size` (fully mapped) readable and writable by the device, and
    /// by every peer added with [`VirtualMemory::add_peer`].
    ///
    /// # Safety
    /// The whole range is mapped.
    unsafe fn set_access(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError>;

    /// Adds `peer` (another device's ordinal) to the devices that every later
    /// [`VirtualMemory::set_access`] makes the mapping accessible to, besides this
    /// device: peer copies and kernels on `peer` may then use this device's memory.
    /// `Ok(false)` when it was already added. Mappings made before keep their access
    /// until [`VirtualMemory::set_peer_access`] grants it to them.
    fn add_peer(&self, peer: usize) -> Result<bool, BackendError>;

    /// Makes `addr..addr+size` (fully mapped) readable and writable by device `peer`
    /// too.
    ///
    /// # Safety
    /// The whole range is mapped.
    unsafe fn set_peer_access(
        &self,
        addr: DeviceAddr,
        size: usize,
        peer: usize,
    ) -> Result<(), BackendError>;

    /// Unmaps `addr..addr+size`, exactly one earlier mapping.
    ///
    /// # Safety
    /// No queued work still uses the range.
    unsafe fn unmap(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError>;
}
