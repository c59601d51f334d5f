//! Devices: a backend and its one caching allocator, shared by everything that uses
//! the device.
//!
//! [`Device::best`] picks CUDA device 0 when a driver and a GPU are present, else the
//! host, and says which through `tracing`. [`Device::cuda`] and [`Device::host`] return
//! the same device (and allocator) every time they are asked for the same one.
//! [`Device::opened`] lists the devices this process has opened and still holds.

use std::mem::ManuallyDrop;
use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::alloc::{AllocConfig, AllocError, CachingAllocator, ConfigError, RawBlock};
use crate::backend::host::HostBackend;
use crate::backend::{Backend, BackendError, DeviceAddr, DeviceKind, StreamId};
use crate::record::{HistoryAction, HistoryRecorder};

/// Why a device could not be opened. (`Debug` prints the message, so that a `main`
/// returning it says what to do.)
#[derive(thiserror::Error)]
pub enum DeviceError {
    /// `GPUSCOPE_ALLOC_CONF` is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The backend failed (e.g. no CUDA driver).
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The allocator could not start.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

crate::error_fmt::debug_as_display!(DeviceError);

struct DeviceInner {
    backend: Arc<dyn Backend>,
    allocator: CachingAllocator,
    /// [`Device::description`], interned (what tracking records point at).
    label: &'static str,
    /// [`Device::id`].
    id: u32,
    /// The allocation history, when one is being recorded
    /// ([`memory::record_history`](crate::memory::record_history)).
    history: HistoryRecorder,
}

/// Ids of devices, in the order they were made.
static NEXT_DEVICE_ID: AtomicU32 = AtomicU32::new(1);

/// A device and its caching allocator. Cloning is cheap (a reference count).
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.description())
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Device {}

static HOST: OnceLock<Device> = OnceLock::new();
static CUDA: Mutex<Vec<Option<Device>>> = Mutex::new(Vec::new());
/// Every device made in this process, by [`Device::id`] (kept in ascending order), as
/// weak references: listing a device does not keep
/// it alive. Dead entries are pruned whenever a device is added or the list is read.
static OPENED: Mutex<Vec<(u32, Weak<DeviceInner>)>> = Mutex::new(Vec::new());

fn opened_table() -> std::sync::MutexGuard<'static, Vec<(u32, Weak<DeviceInner>)>> {
    OPENED.lock().unwrap_or_else(|e| e.into_inner())
}

impl Device {
    /// A device over `backend` with its own allocator (not shared with
    /// [`Device::host`] / [`Device::cuda`]). Used by tests and by replay. It is listed
    /// by [`Device::opened`] while any clone of it is alive.
    pub fn with_backend(
        backend: Arc<dyn Backend>,
        config: AllocConfig,
    ) -> Result<Device, DeviceError> {
        let device = Device::unlisted(backend, config)?;
        device.list();
        Ok(device)
    }

    /// The devices this process has opened and that are still alive, in the order they
    /// were opened ([`id`](Device::id) order): the host device once [`Device::host`]
    /// (or [`Device::best`] without a GPU) opened it, each CUDA device once
    /// [`Device::cuda`] opened it (these live until the process ends), and each device
    /// made by [`Device::with_backend`] while a clone of it is alive.
    /// [`memory::snapshot_all`](crate::memory::snapshot_all) takes a snapshot of each.
    /// The list holds clones: a device lives at least as long as a list that has it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gpuscope_runtime::{alloc::AllocConfig, backend::host::HostBackend, Device};
    /// let host = Device::host().unwrap();
    /// let own = Device::with_backend(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
    /// let opened = Device::opened();
    /// assert!(opened.contains(&host) && opened.contains(&own));
    /// let id = own.id();
    /// drop((own, opened)); // no longer alive (the list held a clone): no longer listed
    /// assert!(Device::opened().iter().all(|d| d.id() != id));
    /// ```
    pub fn opened() -> Vec<Device> {
        let mut table = opened_table();
        let mut devices = Vec::with_capacity(table.len());
        table.retain(|(_, weak)| match weak.upgrade() {
            Some(inner) => {
                devices.push(Device { inner });
                true
            }
            None => false,
        });
        devices
    }

    /// Adds the device to [`Device::opened`]'s list.
    fn list(&self) {
        let mut table = opened_table();
        table.retain(|(_, weak)| weak.strong_count() > 0);
        // Ids are taken before the lock: keep the list sorted.
        let at = table.partition_point(|(id, _)| *id < self.id());
        table.insert(at, (self.id(), Arc::downgrade(&self.inner)));
    }

    /// A device not (yet) in [`Device::opened`]'s list: the process-wide devices are
    /// listed only once they are the ones kept.
    fn unlisted(backend: Arc<dyn Backend>, config: AllocConfig) -> Result<Device, DeviceError> {
        let allocator = CachingAllocator::new(backend.clone(), config)?;
        let label = crate::intern::label(format!(
            "{}:{} ({})",
            backend.kind(),
            backend.ordinal(),
            backend.name()
        ));
        Ok(Device {
            inner: Arc::new(DeviceInner {
                backend,
                allocator,
                label,
                id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
                history: HistoryRecorder::default(),
            }),
        })
    }

    /// The host device (one per process), configured by `GPUSCOPE_ALLOC_CONF`.
    pub fn host() -> Result<Device, DeviceError> {
        if let Some(d) = HOST.get() {
            return Ok(d.clone());
        }
        let device = Device::unlisted(Arc::new(HostBackend::new()), AllocConfig::from_env()?)?;
        // Two threads may both make one; only the one kept is listed.
        Ok(HOST
            .get_or_init(|| {
                device.list();
                device
            })
            .clone())
    }

    /// CUDA device `ordinal` (one per process and ordinal), configured by
    /// `GPUSCOPE_ALLOC_CONF`. Fails with a reason when there is no driver or device.
    pub fn cuda(ordinal: usize) -> Result<Device, DeviceError> {
        let mut table = CUDA.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Some(d)) = table.get(ordinal) {
            return Ok(d.clone());
        }
        let backend = open_cuda(ordinal)?;
        let device = Device::unlisted(backend, AllocConfig::from_env()?)?;
        device.list();
        if table.len() <= ordinal {
            table.resize(ordinal + 1, None);
        }
        table[ordinal] = Some(device.clone());
        Ok(device)
    }

    /// CUDA device 0 when a driver and a GPU are present, else the host. Logs the
    /// choice (and why CUDA was not chosen) at `info` level, target `gpuscope::device`.
    pub fn best() -> Result<Device, DeviceError> {
        match Device::cuda(0) {
            Ok(d) => {
                tracing::info!(target: "gpuscope::device", device = %d.description(), "using CUDA device 0");
                Ok(d)
            }
            Err(DeviceError::Backend(e)) => {
                tracing::info!(target: "gpuscope::device", reason = %e, "no CUDA device; using the host backend");
                Device::host()
            }
            Err(e) => Err(e),
        }
    }

    /// Parses `host`, `cuda` or `cuda:N` and opens that device.
    pub fn by_name(name: &str) -> Result<Device, DeviceError> {
        match name {
            "host" | "cpu" => Device::host(),
            "cuda" => Device::cuda(0),
            _ => match name.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
                Some(n) => Device::cuda(n),
                None => Err(DeviceError::Backend(BackendError::Unavailable(format!(
                    "unknown device `{name}`: expected host, cuda or cuda:N"
                )))),
            },
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// The device's caching allocator.
    pub fn allocator(&self) -> &CachingAllocator {
        &self.inner.allocator
    }

    /// The kind of device.
    pub fn kind(&self) -> DeviceKind {
        self.inner.backend.kind()
    }

    /// `cuda:0 (NVIDIA H100 80GB HBM3)`, `host:0 (host)`.
    pub fn description(&self) -> String {
        self.inner.label.to_string()
    }

    /// [`description`](Device::description) without a copy.
    pub fn label(&self) -> &'static str {
        self.inner.label
    }

    /// A number unique to this device in the process (devices are numbered from 1 in
    /// the order they were opened); tracking records name their device by it.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// Whether this device and `peer` can read and write each other's memory directly,
    /// enabling it on first use: both are CUDA devices with a path between them in
    /// hardware (NVLink, or PCIe peer to peer), their contexts get peer access both
    /// ways, and with virtual memory each allocator makes its memory accessible to the
    /// other device, now and for every later growth
    /// ([`CachingAllocator::grant_peer_access`]). `Ok(false)` when there is no such path
    /// or a device is not CUDA: copies between the two then go through the host.
    /// [`Tensor::to_device`](crate::Tensor::to_device) and
    /// [`Tensor::copy_from`](crate::Tensor::copy_from) call it, so a program needs it
    /// only to know which path its copies take.
    ///
    /// ```
    /// use gpuscope_runtime::Device;
    /// let host = Device::host().unwrap();
    /// assert!(!host.enable_peer_access(&host).unwrap()); // not CUDA: no peer access
    /// ```
    pub fn enable_peer_access(&self, peer: &Device) -> Result<bool, AllocError> {
        #[cfg(feature = "cuda")]
        {
            use crate::backend::cuda::peer::enable_context_peer_access;
            let (Some(a), Some(b)) = (self.cuda_backend(), peer.cuda_backend()) else {
                return Ok(false);
            };
            if !(enable_context_peer_access(a, b)? && enable_context_peer_access(b, a)?) {
                return Ok(false);
            }
            self.allocator().grant_peer_access(b.ordinal())?;
            peer.allocator().grant_peer_access(a.ordinal())?;
            Ok(true)
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = peer;
            Ok(false)
        }
    }

    /// The CUDA backend, when this is a CUDA device.
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_backend(&self) -> Option<&crate::backend::cuda::CudaBackend> {
        self.backend().as_any().downcast_ref()
    }

    /// The device's allocation history recorder.
    pub(crate) fn history(&self) -> &HistoryRecorder {
        &self.inner.history
    }

    /// Allocates a buffer on the default stream, returned to the cache when dropped.
    #[track_caller]
    pub fn alloc(&self, size: usize) -> Result<DeviceBuffer, AllocError> {
        self.alloc_at(size, StreamId::DEFAULT, Location::caller())
    }

    /// Allocates a buffer for use on `stream`.
    #[track_caller]
    pub fn alloc_on(&self, size: usize, stream: StreamId) -> Result<DeviceBuffer, AllocError> {
        self.alloc_at(size, stream, Location::caller())
    }

    /// Allocates a buffer for use on `stream`, asked for by the code at `site` (what
    /// the allocation history records).
    pub(crate) fn alloc_at(
        &self,
        size: usize,
        stream: StreamId,
        site: &'static Location<'static>,
    ) -> Result<DeviceBuffer, AllocError> {
        let block = self.inner.allocator.allocate(size, stream)?;
        if self.inner.history.is_on() {
            self.record_event(HistoryAction::Alloc, &block, Some(site));
        }
        Ok(DeviceBuffer {
            block: ManuallyDrop::new(block),
            device: self.clone(),
        })
    }

    #[cold]
    fn record_event(
        &self,
        action: HistoryAction,
        block: &RawBlock,
        site: Option<&'static Location<'static>>,
    ) {
        let reserved = self
            .inner
            .allocator
            .stats()
            .reserved_bytes
            .all
            .current
            .max(0) as u64;
        self.inner.history.record(
            action,
            block.addr().0,
            block.size(),
            block.stream().0,
            site,
            reserved,
        );
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(ordinal: usize) -> Result<Arc<dyn Backend>, BackendError> {
    Ok(Arc::new(crate::backend::cuda::CudaBackend::new(ordinal)?))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_ordinal: usize) -> Result<Arc<dyn Backend>, BackendError> {
    Err(BackendError::Unavailable(
        "gpuscope-runtime was built without the `cuda` feature".into(),
    ))
}

/// Device memory from a device's caching allocator, returned to the cache when dropped.
pub struct DeviceBuffer {
    block: ManuallyDrop<RawBlock>,
    device: Device,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("addr", &self.block.addr())
            .field("size", &self.block.size())
            .field("device", &self.device)
            .finish()
    }
}

impl DeviceBuffer {
    /// The buffer's device address.
    pub fn addr(&self) -> DeviceAddr {
        self.block.addr()
    }

    /// Its size in bytes (as asked for).
    pub fn size(&self) -> usize {
        self.block.size()
    }

    /// The stream it was allocated on.
    pub fn stream(&self) -> StreamId {
        self.block.stream()
    }

    /// The device it lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Notes a use on another stream (see [`CachingAllocator::record_stream`]).
    pub fn record_stream(&self, stream: StreamId) -> Result<(), AllocError> {
        self.device.allocator().record_stream(&self.block, stream)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: the block is taken exactly once, here.
        let block = unsafe { ManuallyDrop::take(&mut self.block) };
        let recording = self.device.inner.history.is_on();
        let (addr, size, stream) = (block.addr(), block.size(), block.stream());
        let freed = self.device.allocator().free(block);
        if recording {
            let reserved = self
                .device
                .allocator()
                .stats()
                .reserved_bytes
                .all
                .current
                .max(0) as u64;
            self.device.inner.history.record(
                HistoryAction::Free,
                addr.0,
                size,
                stream.0,
                None,
                reserved,
            );
        }
        if let Err(e) = freed {
            tracing::error!(target: "gpuscope::alloc", error = %e, "could not free a device buffer");
        }
    }
}
