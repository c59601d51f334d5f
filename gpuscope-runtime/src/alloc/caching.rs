//! The public face of the caching allocator: one per device, thread safe.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::backend::{Backend, DeviceAddr, StreamId};
use crate::trace_format::Trace;

use super::config::{AllocConfig, ConfigError};
use super::lock::{StateGuard, StateLock};
use super::oom::{AllocError, LiveAllocation};
use super::snapshot::SegmentInfo;
use super::state::{AllocState, Recording};
use super::stats::MemoryStats;
use super::summary;

static NEXT_ALLOCATOR_ID: AtomicU32 = AtomicU32::new(1);

/// A block handed out by [`CachingAllocator::allocate`]. It is not `Clone`: giving it
/// back to [`CachingAllocator::free`] consumes it, so a block cannot be freed twice.
/// Dropping it without freeing keeps the memory allocated (a leak the statistics show).
#[derive(Debug)]
#[must_use = "a block that is never freed stays allocated"]
pub struct RawBlock {
    addr: DeviceAddr,
    size: usize,
    stream: StreamId,
    index: u32,
    generation: u32,
    allocator: u32,
}

impl RawBlock {
    /// The block's device address.
    #[inline]
    pub fn addr(&self) -> DeviceAddr {
        self.addr
    }

    /// The bytes asked for (the block itself may be larger).
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The stream the block was allocated on.
    #[inline]
    pub fn stream(&self) -> StreamId {
        self.stream
    }
}

/// A caching device allocator with PyTorch's semantics: rounded sizes, small and large
/// pools, split and merged blocks, per-stream pools, cross-stream reuse through events,
/// `empty_cache`, a memory cap, out-of-memory recovery and PyTorch's statistics.
///
/// With a backend that has virtual memory (CUDA), each stream's pools grow in place at
/// the top of an address range reserved up front, one physical chunk per growth, and a
/// repeating workload makes no driver call after its first pass (see the
/// [module documentation](super)).
///
/// ```
/// use std::sync::Arc;
/// use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
/// use gpuscope_runtime::backend::{host::HostBackend, StreamId};
///
/// let alloc = CachingAllocator::new(Arc::new(HostBackend::new()), AllocConfig::default()).unwrap();
/// let a = alloc.allocate(1000, StreamId::DEFAULT).unwrap();
/// let b = alloc.allocate(3 << 20, StreamId::DEFAULT).unwrap();
/// assert_eq!(alloc.stats().allocated_bytes.all.current, 1024 + (3 << 20));
/// alloc.free(a).unwrap();
/// alloc.free(b).unwrap();
/// let again = alloc.allocate(3 << 20, StreamId::DEFAULT).unwrap(); // from the cache
/// assert_eq!(alloc.stats().num_device_alloc, 2);
/// alloc.free(again).unwrap();
/// alloc.empty_cache().unwrap();
/// assert_eq!(alloc.stats().reserved_bytes.all.current, 0);
/// ```
pub struct CachingAllocator {
    state: StateLock<AllocState>,
    id: u32,
}

impl std::fmt::Debug for CachingAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock();
        f.debug_struct("CachingAllocator")
            .field("device", &st.device_description())
            .field("config", &st.config.to_string())
            .field("allocated", &st.stats.allocated_bytes.current())
            .field("reserved", &st.stats.other.reserved_bytes.all.current)
            .finish()
    }
}

impl CachingAllocator {
    /// An allocator over `backend` with `config`.
    pub fn new(backend: Arc<dyn Backend>, config: AllocConfig) -> Result<Self, AllocError> {
        Ok(CachingAllocator {
            state: StateLock::new(AllocState::new(backend, config)?),
            id: NEXT_ALLOCATOR_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// An allocator over `backend` configured by `GPUSCOPE_ALLOC_CONF`.
    pub fn from_env(backend: Arc<dyn Backend>) -> Result<Self, AllocError> {
        Self::new(backend, AllocConfig::from_env()?)
    }

    #[inline]
    fn lock(&self) -> StateGuard<'_, AllocState> {
        // One compare-and-swap to take, a store to give back (`lock.rs`).
        self.state.lock()
    }

    /// Allocates at least `size` bytes for use on `stream`.
    ///
    /// Fails with [`AllocError::OutOfMemory`] only after cached memory has been released
    /// and the device asked again; the report says what is held and what to try.
    #[inline]
    pub fn allocate(&self, size: usize, stream: StreamId) -> Result<RawBlock, AllocError> {
        let mut st = self.lock();
        let index = st.malloc(size, stream)?;
        let b = st.slab.get(index);
        Ok(RawBlock {
            addr: DeviceAddr(b.addr),
            size,
            stream,
            index,
            generation: b.generation,
            allocator: self.id,
        })
    }

    /// Frees a block. Memory other streams used (see [`Self::record_stream`]) is reused
    /// only after those streams' work queued before the next allocation has completed:
    /// the free makes no driver call, and that allocation asks each such stream once for
    /// all the frees since the last (an idle stream gives the blocks back at once; a busy
    /// one gets one event, polled on later allocations).
    #[inline]
    pub fn free(&self, block: RawBlock) -> Result<(), AllocError> {
        self.check_owner(&block)?;
        self.lock().free(block.index, block.generation)
    }

    fn check_owner(&self, block: &RawBlock) -> Result<(), AllocError> {
        if block.allocator == self.id {
            Ok(())
        } else {
            Err(AllocError::InvalidBlock(format!(
                "the block at {} belongs to another allocator (another device)",
                block.addr
            )))
        }
    }

    /// Notes that `block` is used on `stream` too: when it is freed, it is reused only
    /// after the work queued on `stream` by the next allocation has completed (PyTorch's
    /// `Tensor.record_stream`, which records an event at the free itself: work queued
    /// between the free and the next allocation can only delay the reuse here).
    pub fn record_stream(&self, block: &RawBlock, stream: StreamId) -> Result<(), AllocError> {
        self.check_owner(block)?;
        self.lock()
            .record_stream(block.index, block.generation, stream)
    }

    /// Records a fence on `stream`: an event after all work queued on it so far. Memory
    /// of `stream` freed before the fence may be given to other streams (chunks released,
    /// released segments) once the event completes, without waiting for the stream.
    ///
    /// Returns `Ok(true)` when an event was recorded; `Ok(false)` when none was needed
    /// (nothing freed on `stream` since its last fence), the stream's previous fence
    /// has not completed yet (at most one outstanding fence per stream is kept; a later
    /// fence covers the frees), or the last one was recorded less than
    /// `fence_interval_us` ago (configuration, default 1 ms: a fence costs an event
    /// record and a query on CUDA, so a loop of short scopes pays for one now and then).
    /// Fails on a stream the backend does not have, or when the backend cannot create
    /// or record the event.
    ///
    /// Whenever free memory of a stream goes away (chunks released for another request,
    /// `empty_cache`, garbage collection, the out-of-memory path), the allocator waits
    /// for nothing if a completed fence came after the memory was freed, for the
    /// outstanding fence's event if that came after, and for the whole stream otherwise;
    /// [`MemoryStats::num_fences`], [`MemoryStats::num_fence_waits`] and
    /// [`MemoryStats::num_stream_syncs`] count them. Fences are only queried there,
    /// never on `allocate` or `free`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gpuscope_runtime::alloc::CachingAllocator;
    /// use gpuscope_runtime::backend::test::{EventMode, TestBackend};
    /// use gpuscope_runtime::backend::{Backend, StreamId};
    ///
    /// // Virtual memory, and events that complete only when the test says so.
    /// let dev = Arc::new(
    ///     TestBackend::builder()
    ///         .virtual_memory(2 << 20)
    ///         .event_mode(EventMode::Manual)
    ///         .build(),
    /// );
    /// let alloc = CachingAllocator::new(dev.clone(), "memory_limit_mb:8".parse().unwrap()).unwrap();
    /// let (a, b) = (StreamId::DEFAULT, dev.create_stream().unwrap());
    ///
    /// let x = alloc.allocate(8 << 20, a).unwrap();
    /// alloc.free(x).unwrap(); // work queued on `a` may still use the memory
    /// assert!(alloc.record_fence(a).unwrap()); // e.g. at scope exit
    /// assert!(!alloc.record_fence(a).unwrap()); // nothing freed since
    /// dev.complete_stream(a); // the fence's event completes
    ///
    /// // The cap leaves no room to grow: `a`'s free chunk goes back and `b` gets one, without
    /// // synchronising `a`.
    /// let y = alloc.allocate(8 << 20, b).unwrap();
    /// assert_eq!(dev.counters().stream_syncs, 0);
    /// let s = alloc.stats();
    /// assert_eq!((s.num_fences, s.num_fence_waits, s.num_stream_syncs), (1, 0, 0));
    /// alloc.free(y).unwrap();
    /// ```
    pub fn record_fence(&self, stream: StreamId) -> Result<bool, AllocError> {
        self.lock().record_fence(stream)
    }

    /// Returns every unused cached segment to the device (after waiting for the
    /// streams that last used them).
    pub fn empty_cache(&self) -> Result<(), AllocError> {
        Ok(self.lock().empty_cache()?)
    }

    /// All statistics.
    pub fn stats(&self) -> MemoryStats {
        self.lock().stats.snapshot()
    }

    /// Sets every peak statistic to its current value.
    pub fn reset_peak_stats(&self) {
        self.lock().stats.reset_peak();
    }

    /// Zeroes accumulated statistics and counters.
    pub fn reset_accumulated_stats(&self) {
        self.lock().stats.reset_accumulated();
    }

    /// A table of the statistics a person can read, like `torch.cuda.memory_summary()`.
    pub fn memory_summary(&self) -> String {
        let st = self.lock();
        summary::render(&st.device_description(), &st.stats.snapshot(), &st.config)
    }

    /// Caps reserved memory at `fraction` of the device's capacity (0 < f ≤ 1).
    pub fn set_memory_fraction(&self, fraction: f64) -> Result<(), ConfigError> {
        let mut st = self.lock();
        let text = format!("per_process_memory_fraction:{fraction}");
        let parsed = AllocConfig::parse_from(&text, "set_memory_fraction")?;
        st.config.per_process_memory_fraction = parsed.per_process_memory_fraction;
        st.update_limit();
        Ok(())
    }

    /// Caps reserved memory at `bytes` (`None`: no byte cap).
    pub fn set_memory_limit(&self, bytes: Option<usize>) {
        let mut st = self.lock();
        st.config.memory_limit = bytes;
        st.update_limit();
    }

    /// The cap on reserved memory in effect, if any.
    pub fn memory_limit(&self) -> Option<usize> {
        self.lock().limit()
    }

    /// The configuration in effect.
    pub fn config(&self) -> AllocConfig {
        self.lock().config.clone()
    }

    /// The device backend.
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.lock().backend().clone()
    }

    /// Whether segments are built from the backend's virtual memory.
    pub fn uses_virtual_memory(&self) -> bool {
        self.lock().uses_virtual_memory()
    }

    /// Every segment and its blocks, in address order.
    pub fn snapshot(&self) -> Vec<SegmentInfo> {
        self.lock().snapshot()
    }

    /// The `n` largest live allocations, largest first.
    pub fn largest_live(&self, n: usize) -> Vec<LiveAllocation> {
        self.lock().largest_live(n)
    }

    /// Gives device `peer` (the ordinal of another device of the same kind) access to
    /// this allocator's memory, for peer copies and kernels there. With virtual memory,
    /// every chunk mapped now and every chunk mapped later is made accessible to it (one
    /// `cuMemSetAccess` per chunk now, counted in `num_set_access`); without, there is
    /// nothing to do (device allocations are reached through the two contexts' peer
    /// access). Once per peer: later calls return at once.
    /// [`Device::enable_peer_access`](crate::Device::enable_peer_access) calls it for
    /// both devices.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
    /// use gpuscope_runtime::backend::{test::TestBackend, StreamId};
    ///
    /// let backend = Arc::new(TestBackend::builder().virtual_memory(2 << 20).build());
    /// let alloc = CachingAllocator::new(backend.clone(), AllocConfig::default()).unwrap();
    /// let a = alloc.allocate(30 << 20, StreamId::DEFAULT).unwrap(); // one chunk mapped
    /// alloc.grant_peer_access(1).unwrap(); // that chunk: accessible to device 1
    /// let b = alloc.allocate(100 << 20, StreamId::DEFAULT).unwrap(); // a new chunk: too
    /// assert!(backend.mappings_without_access(1).is_empty());
    /// # alloc.free(a).unwrap(); alloc.free(b).unwrap();
    /// ```
    pub fn grant_peer_access(&self, peer: usize) -> Result<(), AllocError> {
        Ok(self.lock().grant_peer_access(peer)?)
    }

    /// Bytes of physical memory held outside any segment: chunks a failed driver call
    /// (an unmap or a release) left behind. They count as reserved and go back with the
    /// next `empty_cache` (or release under pressure); 0 unless a driver call failed.
    pub fn orphan_bytes(&self) -> usize {
        self.lock().orphan_bytes()
    }

    /// Checks the allocator's invariants: blocks tile their segments, free neighbours
    /// are merged, free blocks are indexed, segments do not overlap, and every
    /// statistic equals a recount. A debugging aid; `Err` describes the first breach.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.lock().validate()
    }

    /// Starts recording every allocation and free as a trace (see [`crate::trace`]).
    /// Restarting discards what was recorded.
    pub fn start_recording(&self) {
        self.lock().recording = Some(Recording::default());
    }

    /// Stops recording and returns the trace (empty if recording was not started).
    pub fn stop_recording(&self) -> Trace {
        let ops = self
            .lock()
            .recording
            .take()
            .map(|r| r.ops)
            .unwrap_or_default();
        Trace::from_ops(ops)
    }
}

impl Drop for CachingAllocator {
    fn drop(&mut self) {
        let st = self.state.get_mut();
        let live = st.shutdown();
        if live > 0 {
            tracing::warn!(
                target: "gpuscope::alloc",
                live_blocks = live,
                device = %st.device_description(),
                "allocator dropped with blocks still allocated; their segments stay with the device"
            );
        }
    }
}
