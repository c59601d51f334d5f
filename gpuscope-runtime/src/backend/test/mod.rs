//! A deterministic backend for tests: fake addresses inside a capacity limit, optional
//! virtual memory, events that complete when the test says so, and injected faults.
//!
//! Faults: every `n`-th device allocation can fail with out-of-memory
//! ([`TestBackendBuilder::fail_every`]), and the `n`-th call of any kind ([`Call`]) can
//! fail with a driver error ([`TestBackend::fail_call`]), so tests can fail every call
//! of a run one at a time.
//!
//! It also checks its caller: a free of an address it never gave out, a mapping that
//! overlaps another, or an unmap of memory that is not mapped panics with a message,
//! so an allocator bug shows up as a failing test rather than as silent corruption.
//! A test can also [`launch`](TestBackend::launch) pretend work on memory: freeing or
//! unmapping that memory before the work completed panics too.
//! It never touches memory, so it can "hold" terabytes; copies are refused.
//!
//! ```
//! use gpuscope_runtime::backend::{Backend, test::TestBackend};
//! let dev = TestBackend::builder().capacity(64 << 20).fail_allocation(2).build();
//! let a = dev.malloc(1 << 20).unwrap();
//! assert!(dev.malloc(1 << 20).unwrap_err().is_out_of_memory()); // the 2nd fails
//! assert!(dev.malloc(128 << 20).unwrap_err().is_out_of_memory()); // over capacity
//! unsafe { dev.free(a, 1 << 20).unwrap() };
//! assert_eq!(dev.counters().device_allocs, 1);
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

pub use super::fault::Call;
use super::fault::FaultPlan;
use super::{
    Backend, BackendError, DeviceAddr, DeviceKind, EventId, MemInfo, PhysHandle, StreamId,
    VirtualMemory,
};

mod builder;
mod virtual_memory;

pub use builder::{EventMode, TestBackendBuilder};

/// What the test backend has been asked to do, for assertions.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Counters {
    /// Successful `malloc`s and chunk creations.
    pub device_allocs: u64,
    /// `free`s and chunk releases.
    pub device_frees: u64,
    /// Allocations refused (out of capacity or injected).
    pub failed_allocs: u64,
    /// `map` calls.
    pub maps: u64,
    /// `unmap` calls.
    pub unmaps: u64,
    /// `synchronize_stream` calls.
    pub stream_syncs: u64,
    /// `synchronize_device` calls.
    pub device_syncs: u64,
    /// `record_event` calls.
    pub event_records: u64,
}

const BASE_ADDR: u64 = 0x7000_0000_0000;

#[derive(Default, Debug)]
struct StreamState {
    issued: u64,
    completed: u64,
}

/// Pretend work queued on a stream (see [`TestBackend::launch`]).
#[derive(Debug)]
struct Work {
    start: u64,
    end: u64,
    stream: usize,
    seq: u64,
}

#[derive(Default, Debug)]
struct State {
    used: usize,
    next_addr: u64,
    allocations: BTreeMap<u64, usize>,
    reservations: BTreeMap<u64, usize>,
    chunks: HashMap<u64, usize>,
    mapped_chunks: HashSet<u64>,
    /// Mappings by address: (size, chunk, offset into the chunk).
    mappings: BTreeMap<u64, (usize, u64)>,
    /// Devices added with `add_peer`.
    peers: Vec<usize>,
    /// (mapping, peer device) pairs with access granted.
    peer_access: HashSet<(u64, usize)>,
    next_chunk: u64,
    streams: Vec<StreamState>,
    events: HashMap<u32, Option<(usize, u64)>>,
    next_event: u32,
    event_mode: EventMode,
    attempts: u64,
    fail_every: Option<u64>,
    fail_at: HashSet<u64>,
    counters: Counters,
    /// Launched work not known complete.
    in_flight: Vec<Work>,
    faults: FaultPlan,
}

impl State {
    /// Counts an allocation attempt and decides whether it fails.
    fn admit(&mut self, size: usize, capacity: usize) -> Result<(), BackendError> {
        self.attempts += 1;
        let injected = self.fail_at.remove(&self.attempts)
            || self.fail_every.is_some_and(|n| self.attempts % n == 0);
        if injected || self.used + size > capacity {
            self.counters.failed_allocs += 1;
            return Err(BackendError::OutOfMemory { requested: size });
        }
        self.used += size;
        self.counters.device_allocs += 1;
        Ok(())
    }

    fn fresh_range(&mut self, size: usize) -> u64 {
        let addr = self.next_addr;
        // Leave a gap so that neighbouring allocations are never contiguous by chance,
        // and keep every range aligned to 2 MiB.
        self.next_addr = (addr + size as u64 + (1 << 21)).next_multiple_of(1 << 21);
        addr
    }

    fn stream(&self, stream: StreamId) -> Result<usize, BackendError> {
        if stream.index() < self.streams.len() {
            Ok(stream.index())
        } else {
            Err(BackendError::InvalidHandle {
                what: "stream",
                detail: format!("{stream} was never created on the test backend"),
            })
        }
    }

    /// Whether `[start, end)` is inside one allocation, or mapped throughout.
    fn backed(&self, start: u64, end: u64) -> bool {
        if let Some((&a, &s)) = self.allocations.range(..=start).next_back() {
            if end <= a + s as u64 {
                return true;
            }
        }
        let mut cur = start;
        while cur < end {
            match self.mappings.range(..=cur).next_back() {
                Some((&m, &(ms, _))) if cur < m + ms as u64 => cur = m + ms as u64,
                _ => return false,
            }
        }
        true
    }

    /// Panics if launched work that has not completed uses memory in `[start, end)`.
    fn check_idle(&mut self, start: u64, end: u64, what: &str) {
        let streams = &self.streams;
        self.in_flight
            .retain(|w| w.seq > streams[w.stream].completed);
        if let Some(w) = self
            .in_flight
            .iter()
            .find(|w| w.start < end && start < w.end)
        {
            panic!(
                "test backend: {what} of {start:#x} (+{}) while work queued on stream {} still uses {:#x} (+{})",
                end - start,
                w.stream,
                w.start,
                w.end - w.start
            );
        }
    }

    /// Whether everything queued on stream `i` has finished.
    fn idle(&self, i: usize) -> bool {
        self.streams[i].completed == self.streams[i].issued
    }

    fn event_done(&self, event: EventId) -> Result<bool, BackendError> {
        match self.events.get(&event.0) {
            None => Err(BackendError::InvalidHandle {
                what: "event",
                detail: format!("event {} does not exist", event.0),
            }),
            Some(None) => Ok(true),
            Some(Some((stream, seq))) => Ok(self.streams[*stream].completed >= *seq),
        }
    }
}

/// The deterministic test backend. See the [module documentation](self).
#[derive(Debug)]
pub struct TestBackend {
    capacity: usize,
    granularity: Option<usize>,
    state: Mutex<State>,
}

impl TestBackend {
    /// Starts building a test backend.
    pub fn builder() -> TestBackendBuilder {
        TestBackendBuilder::new()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic inside the backend (a detected misuse) poisons the lock; the state is
        // still consistent enough to read counters, so recover it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the backend has been asked to do so far.
    pub fn counters(&self) -> Counters {
        self.state().counters
    }

    /// Bytes currently held by allocations and chunks.
    pub fn used(&self) -> usize {
        self.state().used
    }

    /// Whether all work queued on `stream` has finished: what
    /// [`Backend::query_stream`] answers, without counting a call or injecting a fault.
    pub fn is_idle(&self, stream: StreamId) -> bool {
        let st = self.state();
        st.stream(stream).is_ok_and(|i| st.idle(i))
    }

    /// Marks all work recorded so far on `stream` as finished.
    pub fn complete_stream(&self, stream: StreamId) {
        let mut st = self.state();
        if let Some(s) = st.streams.get_mut(stream.index()) {
            s.completed = s.issued;
        }
    }

    /// Marks the `n` oldest unfinished steps queued on `stream` as finished: launches
    /// and event records, in the order they were queued.
    pub fn complete_steps(&self, stream: StreamId, n: u64) {
        let mut st = self.state();
        if let Some(s) = st.streams.get_mut(stream.index()) {
            s.completed = (s.completed + n).min(s.issued);
        }
    }

    /// Pretends work using `[addr, addr + size)` is queued on `stream` (a kernel
    /// launch). Until it completes (the stream is synchronised or
    /// [completed](Self::complete_stream), or an event recorded on the stream after it
    /// is waited for), freeing or unmapping any of that memory panics. In
    /// [`EventMode::Immediate`] it completes at once.
    ///
    /// Panics if the memory is not allocated or mapped now (the kernel would fault).
    pub fn launch(
        &self,
        stream: StreamId,
        addr: DeviceAddr,
        size: usize,
    ) -> Result<(), BackendError> {
        let mut st = self.state();
        let i = st.stream(stream)?;
        let (start, end) = (addr.0, addr.0 + size as u64);
        assert!(
            st.backed(start, end),
            "test backend: work launched on {addr} (+{size}), which is not allocated or mapped"
        );
        st.streams[i].issued += 1;
        let seq = st.streams[i].issued;
        if st.event_mode == EventMode::Immediate {
            st.streams[i].completed = seq;
            return Ok(());
        }
        st.in_flight.push(Work {
            start,
            end,
            stream: i,
            seq,
        });
        Ok(())
    }

    /// Changes fault injection: every `n`-th allocation attempt from now on fails
    /// (`None` turns it off).
    pub fn set_fail_every(&self, n: Option<u64>) {
        let mut st = self.state();
        st.fail_every = n.map(|n| n.max(1));
        st.attempts = 0;
    }

    /// Makes the `n`-th call of `kind` from now on (1-based) fail with a driver error
    /// (the call has no effect). Several may be pending at once.
    ///
    /// ```
    /// use gpuscope_runtime::backend::{Backend, StreamId};
    /// use gpuscope_runtime::backend::test::{Call, TestBackend};
    /// let dev = TestBackend::builder().build();
    /// let e = dev.create_event().unwrap();
    /// dev.fail_call(Call::RecordEvent, 2);
    /// assert!(dev.record_event(e, StreamId::DEFAULT).is_ok());
    /// let err = dev.record_event(e, StreamId::DEFAULT).unwrap_err();
    /// assert!(err.to_string().contains("injected fault"));
    /// assert!(dev.record_event(e, StreamId::DEFAULT).is_ok());
    /// assert_eq!(dev.calls()[&Call::RecordEvent], 3);
    /// ```
    pub fn fail_call(&self, kind: Call, n: u64) {
        self.state().faults.fail(kind, n.max(1));
    }

    /// Forgets the faults set with [`Self::fail_call`] that have not happened yet.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Calls made so far, by kind (failed ones included).
    pub fn calls(&self) -> std::collections::BTreeMap<Call, u64> {
        self.state().faults.calls()
    }

    /// Faults injected so far by [`Self::fail_call`].
    pub fn faults_injected(&self) -> u64 {
        self.state().faults.failed()
    }

    /// Number of live device allocations and chunks.
    pub fn live_allocations(&self) -> usize {
        let st = self.state();
        st.allocations.len() + st.chunks.len()
    }
}

impl Backend for TestBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Test
    }

    fn name(&self) -> String {
        "test".to_string()
    }

    fn mem_info(&self) -> Result<MemInfo, BackendError> {
        let st = self.state();
        Ok(MemInfo {
            free: self.capacity - st.used,
            total: self.capacity,
        })
    }

    fn malloc(&self, size: usize) -> Result<DeviceAddr, BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::Allocate)?;
        st.admit(size, self.capacity)?;
        let addr = st.fresh_range(size);
        st.allocations.insert(addr, size);
        Ok(DeviceAddr(addr))
    }

    unsafe fn free(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::Free)?;
        st.check_idle(addr.0, addr.0 + size as u64, "free");
        match st.allocations.remove(&addr.0) {
            Some(s) if s == size => {
                st.used -= size;
                st.counters.device_frees += 1;
                Ok(())
            }
            Some(s) => panic!("test backend: free of {addr} with size {size}, allocated {s}"),
            None => panic!("test backend: free of {addr}, which is not allocated"),
        }
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        self.granularity.map(|_| self as &dyn VirtualMemory)
    }

    fn create_stream(&self) -> Result<StreamId, BackendError> {
        let mut st = self.state();
        st.streams.push(StreamState::default());
        Ok(StreamId((st.streams.len() - 1) as u32))
    }

    fn has_stream(&self, stream: StreamId) -> bool {
        (stream.0 as usize) < self.state().streams.len()
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::SyncStream)?;
        let i = st.stream(stream)?;
        st.streams[i].completed = st.streams[i].issued;
        st.counters.stream_syncs += 1;
        Ok(())
    }

    fn query_stream(&self, stream: StreamId) -> Result<bool, BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::QueryStream)?;
        let i = st.stream(stream)?;
        Ok(st.idle(i))
    }

    fn synchronize_device(&self) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::SyncStream)?;
        for s in &mut st.streams {
            s.completed = s.issued;
        }
        st.counters.device_syncs += 1;
        Ok(())
    }

    fn create_event(&self) -> Result<EventId, BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::CreateEvent)?;
        let id = st.next_event;
        st.next_event += 1;
        st.events.insert(id, None);
        Ok(EventId(id))
    }

    fn destroy_event(&self, event: EventId) -> Result<(), BackendError> {
        let mut st = self.state();
        st.events
            .remove(&event.0)
            .map(|_| ())
            .ok_or(BackendError::InvalidHandle {
                what: "event",
                detail: format!("event {} does not exist", event.0),
            })
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::RecordEvent)?;
        let i = st.stream(stream)?;
        if !st.events.contains_key(&event.0) {
            return Err(BackendError::InvalidHandle {
                what: "event",
                detail: format!("event {} does not exist", event.0),
            });
        }
        st.counters.event_records += 1;
        st.streams[i].issued += 1;
        let seq = st.streams[i].issued;
        if st.event_mode == EventMode::Immediate {
            st.streams[i].completed = seq;
        }
        st.events.insert(event.0, Some((i, seq)));
        Ok(())
    }

    fn query_event(&self, event: EventId) -> Result<bool, BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::QueryEvent)?;
        st.event_done(event)
    }

    fn synchronize_event(&self, event: EventId) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::SyncEvent)?;
        st.event_done(event)?;
        if let Some(Some((stream, seq))) = st.events.get(&event.0).copied() {
            let s = &mut st.streams[stream];
            s.completed = s.completed.max(seq);
        }
        Ok(())
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), BackendError> {
        let mut st = self.state();
        st.faults.enter(Call::StreamWait)?;
        st.stream(stream)?;
        st.event_done(event).map(|_| ())
    }

    unsafe fn copy_host_to_device(
        &self,
        _dst: DeviceAddr,
        _src: &[u8],
        _stream: StreamId,
    ) -> Result<(), BackendError> {
        self.state().faults.enter(Call::Copy)?;
        Err(unsupported_contents())
    }

    unsafe fn copy_device_to_host(
        &self,
        _dst: &mut [u8],
        _src: DeviceAddr,
        _stream: StreamId,
    ) -> Result<(), BackendError> {
        self.state().faults.enter(Call::Copy)?;
        Err(unsupported_contents())
    }

    unsafe fn copy_device_to_device(
        &self,
        _dst: DeviceAddr,
        _src: DeviceAddr,
        _len: usize,
        _stream: StreamId,
    ) -> Result<(), BackendError> {
        self.state().faults.enter(Call::Copy)?;
        Err(unsupported_contents())
    }

    unsafe fn memset(
        &self,
        _dst: DeviceAddr,
        _value: u8,
        _len: usize,
        _stream: StreamId,
    ) -> Result<(), BackendError> {
        self.state().faults.enter(Call::Copy)?;
        Err(unsupported_contents())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn unsupported_contents() -> BackendError {
    BackendError::Unsupported {
        backend: "test",
        what: "memory contents (it hands out fake addresses; use the host backend)",
    }
}

#[cfg(test)]
mod tests;
