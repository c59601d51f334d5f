//! The host backend: device memory is host memory from the system allocator.
//!
//! It is the embedded default where no GPU is present, and it is real: tensors compute
//! on it. Work runs on the calling thread as it is issued, so a stream's work has always
//! finished and every event completes when it is recorded.

use std::alloc::{Layout, alloc, dealloc};
use std::sync::atomic::{AtomicU32, Ordering};

use super::{Backend, BackendError, DeviceAddr, DeviceKind, EventId, MemInfo, StreamId};

/// Alignment of every host allocation: what `cudaMalloc` guarantees.
pub const HOST_ALIGNMENT: usize = 256;

/// The host (CPU) backend. See the [module documentation](self).
///
/// ```
/// use gpuscope_runtime::backend::{Backend, host::HostBackend, StreamId};
/// let host = HostBackend::new();
/// let addr = host.malloc(1024).unwrap();
/// unsafe {
///     host.copy_host_to_device(addr, &[7u8; 1024], StreamId::DEFAULT).unwrap();
///     let mut back = [0u8; 4];
///     host.copy_device_to_host(&mut back, addr.offset(10), StreamId::DEFAULT).unwrap();
///     assert_eq!(back, [7; 4]);
///     host.free(addr, 1024).unwrap();
/// }
/// ```
#[derive(Debug)]
pub struct HostBackend {
    streams: AtomicU32,
    events: AtomicU32,
    capacity: Option<usize>,
    ordinal: usize,
}

impl Default for HostBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl HostBackend {
    /// A host backend whose capacity is the machine's memory.
    pub fn new() -> Self {
        HostBackend {
            streams: AtomicU32::new(1),
            events: AtomicU32::new(0),
            capacity: None,
            ordinal: 0,
        }
    }

    /// The same backend, numbered `ordinal` among host devices (`host:1 (host)`): a
    /// stand-in for a second GPU, so that tests and examples of several devices tell
    /// them apart by name. [`Device::host`](crate::Device::host) is `host:0`.
    pub fn with_ordinal(self, ordinal: usize) -> Self {
        HostBackend { ordinal, ..self }
    }

    /// A host backend that reports `bytes` as its total memory (the allocator's memory
    /// fraction and OOM messages use it).
    pub fn with_capacity(bytes: usize) -> Self {
        HostBackend {
            capacity: Some(bytes),
            ..Self::new()
        }
    }

    fn layout(size: usize) -> Result<Layout, BackendError> {
        Layout::from_size_align(size.max(1), HOST_ALIGNMENT)
            .map_err(|_| BackendError::OutOfMemory { requested: size })
    }

    fn check_stream(&self, stream: StreamId) -> Result<(), BackendError> {
        if stream.0 < self.streams.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(BackendError::InvalidHandle {
                what: "stream",
                detail: format!("{stream} was never created on the host backend"),
            })
        }
    }
}

/// Reads `MemTotal` and `MemAvailable` from `/proc/meminfo` (Linux), in bytes.
fn system_memory() -> Option<MemInfo> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<usize> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(MemInfo {
        total: field("MemTotal:")?,
        free: field("MemAvailable:")?,
    })
}

impl Backend for HostBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Host
    }

    fn name(&self) -> String {
        "host".to_string()
    }

    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn mem_info(&self) -> Result<MemInfo, BackendError> {
        let system = system_memory().unwrap_or(MemInfo {
            free: usize::MAX / 2,
            total: usize::MAX / 2,
        });
        Ok(match self.capacity {
            Some(total) => MemInfo {
                total,
                free: system.free.min(total),
            },
            None => system,
        })
    }

    fn malloc(&self, size: usize) -> Result<DeviceAddr, BackendError> {
        let layout = Self::layout(size)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            return Err(BackendError::OutOfMemory { requested: size });
        }
        Ok(DeviceAddr(ptr as u64))
    }

    unsafe fn free(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        let layout = Self::layout(size)?;
        // SAFETY: the caller promises addr/size came from `malloc` with this layout.
        unsafe { dealloc(addr.0 as *mut u8, layout) };
        Ok(())
    }

    fn create_stream(&self) -> Result<StreamId, BackendError> {
        Ok(StreamId(self.streams.fetch_add(1, Ordering::Relaxed)))
    }

    fn has_stream(&self, stream: StreamId) -> bool {
        self.check_stream(stream).is_ok()
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), BackendError> {
        self.check_stream(stream)
    }

    fn synchronize_device(&self) -> Result<(), BackendError> {
        Ok(())
    }

    fn query_stream(&self, stream: StreamId) -> Result<bool, BackendError> {
        self.check_stream(stream).map(|()| true)
    }

    fn create_event(&self) -> Result<EventId, BackendError> {
        Ok(EventId(self.events.fetch_add(1, Ordering::Relaxed)))
    }

    fn destroy_event(&self, _event: EventId) -> Result<(), BackendError> {
        Ok(())
    }

    fn record_event(&self, _event: EventId, stream: StreamId) -> Result<(), BackendError> {
        self.check_stream(stream)
    }

    fn query_event(&self, _event: EventId) -> Result<bool, BackendError> {
        Ok(true)
    }

    fn synchronize_event(&self, _event: EventId) -> Result<(), BackendError> {
        Ok(())
    }

    fn stream_wait_event(&self, stream: StreamId, _event: EventId) -> Result<(), BackendError> {
        self.check_stream(stream)
    }

    unsafe fn copy_host_to_device(
        &self,
        dst: DeviceAddr,
        src: &[u8],
        stream: StreamId,
    ) -> Result<(), BackendError> {
        self.check_stream(stream)?;
        // SAFETY: the caller promises dst..dst+len is memory of this backend.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.0 as *mut u8, src.len()) };
        Ok(())
    }

    unsafe fn copy_device_to_host(
        &self,
        dst: &mut [u8],
        src: DeviceAddr,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        self.check_stream(stream)?;
        // SAFETY: the caller promises src..src+len is memory of this backend.
        unsafe { std::ptr::copy_nonoverlapping(src.0 as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    unsafe fn copy_device_to_device(
        &self,
        dst: DeviceAddr,
        src: DeviceAddr,
        len: usize,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        self.check_stream(stream)?;
        // SAFETY: the caller promises both ranges are memory of this backend.
        unsafe { std::ptr::copy(src.0 as *const u8, dst.0 as *mut u8, len) };
        Ok(())
    }

    unsafe fn memset(
        &self,
        dst: DeviceAddr,
        value: u8,
        len: usize,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        self.check_stream(stream)?;
        // SAFETY: the caller promises dst..dst+len is memory of this backend.
        unsafe { std::ptr::write_bytes(dst.0 as *mut u8, value, len) };
        Ok(())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_round_trips_and_is_aligned() {
        let host = HostBackend::new();
        let a = host.malloc(3000).unwrap();
        assert_eq!(a.0 % HOST_ALIGNMENT as u64, 0);
        let data: Vec<u8> = (0..3000).map(|i| (i % 251) as u8).collect();
        let mut back = vec![0u8; 3000];
        unsafe {
            host.copy_host_to_device(a, &data, StreamId::DEFAULT)
                .unwrap();
            host.copy_device_to_host(&mut back, a, StreamId::DEFAULT)
                .unwrap();
            host.free(a, 3000).unwrap();
        }
        assert_eq!(back, data);
    }

    #[test]
    fn streams_must_exist() {
        let host = HostBackend::new();
        assert!(host.synchronize_stream(StreamId(3)).is_err());
        let s = host.create_stream().unwrap();
        assert_eq!(s, StreamId(1));
        host.synchronize_stream(s).unwrap();
    }

    #[test]
    fn capacity_is_reported() {
        let host = HostBackend::with_capacity(1 << 30);
        let info = host.mem_info().unwrap();
        assert_eq!(info.total, 1 << 30);
        assert!(info.free <= info.total);
    }
}
