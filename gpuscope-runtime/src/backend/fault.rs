//! Fault injection for any backend: [`FaultyBackend`] wraps a backend and fails the
//! `n`-th call of a kind ([`Call`]) with a driver error, passing every other call
//! through. Wrapped around the host backend, it lets real tensor code (a training step)
//! run while any allocation, event record, stream wait, synchronisation or copy fails,
//! one at a time; the test backend ([`super::test::TestBackend`]) has the same faults
//! built in, for its virtual memory.
//!
//! ```
//! use std::sync::Arc;
//! use gpuscope_runtime::backend::{Backend, host::HostBackend};
//! use gpuscope_runtime::backend::fault::{Call, FaultyBackend};
//! let dev = FaultyBackend::new(Arc::new(HostBackend::new()));
//! dev.fail_call(Call::Allocate, 2);
//! let a = dev.malloc(64).unwrap();
//! assert!(dev.malloc(64).unwrap_err().to_string().contains("injected fault"));
//! unsafe { dev.free(a, 64).unwrap() };
//! assert_eq!(dev.calls()[&Call::Allocate], 2);
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    Backend, BackendError, DeviceAddr, DeviceKind, EventId, MemInfo, StreamId, VirtualMemory,
};

/// A kind of backend call, for fault injection
/// ([`TestBackend::fail_call`](super::test::TestBackend::fail_call), [`FaultyBackend::fail_call`])
/// and counts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Call {
    /// `malloc` and `create_chunk`: device allocations.
    Allocate,
    /// `free` and `release_chunk`.
    Free,
    /// `reserve_address`.
    ReserveAddress,
    /// `map`.
    Map,
    /// `set_access`.
    SetAccess,
    /// `unmap`.
    Unmap,
    /// `create_event`.
    CreateEvent,
    /// `record_event`.
    RecordEvent,
    /// `query_event`.
    QueryEvent,
    /// `synchronize_event`.
    SyncEvent,
    /// `stream_wait_event`.
    StreamWait,
    /// `synchronize_stream` and `synchronize_device`.
    SyncStream,
    /// `query_stream`.
    QueryStream,
    /// The copies and `memset`.
    Copy,
}

impl Call {
    /// Every kind.
    pub const ALL: [Call; 14] = [
        Call::Allocate,
        Call::Free,
        Call::ReserveAddress,
        Call::Map,
        Call::SetAccess,
        Call::Unmap,
        Call::CreateEvent,
        Call::RecordEvent,
        Call::QueryEvent,
        Call::SyncEvent,
        Call::StreamWait,
        Call::SyncStream,
        Call::QueryStream,
        Call::Copy,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Call::Allocate => "test allocate",
            Call::Free => "test free",
            Call::ReserveAddress => "test reserve_address",
            Call::Map => "test map",
            Call::SetAccess => "test set_access",
            Call::Unmap => "test unmap",
            Call::CreateEvent => "test create_event",
            Call::RecordEvent => "test record_event",
            Call::QueryEvent => "test query_event",
            Call::SyncEvent => "test synchronize_event",
            Call::StreamWait => "test stream_wait_event",
            Call::SyncStream => "test synchronize_stream",
            Call::QueryStream => "test query_stream",
            Call::Copy => "test copy",
        }
    }
}

/// Counts calls by kind and fails the ones a test asked to fail.
#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    calls: std::collections::BTreeMap<Call, u64>,
    /// Kind -> the call numbers (1-based, counted from when the fault was set) to fail.
    fail: HashMap<Call, Vec<u64>>,
    base: HashMap<Call, u64>,
    failed: u64,
}

impl FaultPlan {
    /// Counts a call of `kind`; `Err` when it is one to fail.
    pub(crate) fn enter(&mut self, kind: Call) -> Result<(), BackendError> {
        let n = self.calls.entry(kind).or_insert(0);
        *n += 1;
        let nth = *n - self.base.get(&kind).copied().unwrap_or(0);
        if let Some(list) = self.fail.get_mut(&kind) {
            if let Some(pos) = list.iter().position(|&k| k == nth) {
                list.swap_remove(pos);
                self.failed += 1;
                return Err(BackendError::Driver {
                    call: kind.name(),
                    message: format!("injected fault (call {nth} of this kind)"),
                });
            }
        }
        Ok(())
    }

    /// Fails the `n`-th call of `kind` from now on (1-based).
    pub(crate) fn fail(&mut self, kind: Call, n: u64) {
        let made = self.calls.get(&kind).copied().unwrap_or(0);
        self.base.insert(kind, made);
        self.fail.entry(kind).or_default().push(n);
    }

    /// Calls made so far, by kind.
    pub(crate) fn calls(&self) -> std::collections::BTreeMap<Call, u64> {
        self.calls.clone()
    }

    /// Faults injected so far.
    pub(crate) fn failed(&self) -> u64 {
        self.failed
    }

    /// Forgets the faults not yet injected.
    pub(crate) fn clear(&mut self) {
        self.fail.clear();
    }
}

/// A backend that fails chosen calls of the backend it wraps. See the
/// [module documentation](self).
#[derive(Debug)]
pub struct FaultyBackend {
    inner: Arc<dyn Backend>,
    plan: Mutex<FaultPlan>,
}

impl FaultyBackend {
    /// Wraps `inner`; no call fails until [`Self::fail_call`].
    pub fn new(inner: Arc<dyn Backend>) -> FaultyBackend {
        FaultyBackend {
            inner,
            plan: Mutex::new(FaultPlan::default()),
        }
    }

    fn plan(&self) -> MutexGuard<'_, FaultPlan> {
        self.plan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the `n`-th call of `kind` from now on (1-based) fail with a driver error;
    /// the wrapped backend is not called.
    pub fn fail_call(&self, kind: Call, n: u64) {
        self.plan().fail(kind, n.max(1));
    }

    /// Forgets the faults not injected yet.
    pub fn clear_faults(&self) {
        self.plan().clear();
    }

    /// Calls made so far, by kind (failed ones included).
    pub fn calls(&self) -> std::collections::BTreeMap<Call, u64> {
        self.plan().calls()
    }

    /// Faults injected so far.
    pub fn faults_injected(&self) -> u64 {
        self.plan().failed()
    }

    fn enter(&self, kind: Call) -> Result<(), BackendError> {
        self.plan().enter(kind)
    }
}

impl Backend for FaultyBackend {
    fn kind(&self) -> DeviceKind {
        self.inner.kind()
    }

    fn ordinal(&self) -> usize {
        self.inner.ordinal()
    }

    fn name(&self) -> String {
        format!("{} (with injected faults)", self.inner.name())
    }

    fn mem_info(&self) -> Result<MemInfo, BackendError> {
        self.inner.mem_info()
    }

    fn malloc(&self, size: usize) -> Result<DeviceAddr, BackendError> {
        self.enter(Call::Allocate)?;
        self.inner.malloc(size)
    }

    unsafe fn free(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        self.enter(Call::Free)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.free(addr, size) }
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        // Virtual memory calls would bypass the plan: the test backend injects those.
        None
    }

    fn create_stream(&self) -> Result<StreamId, BackendError> {
        self.inner.create_stream()
    }

    fn has_stream(&self, stream: StreamId) -> bool {
        self.inner.has_stream(stream)
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), BackendError> {
        self.enter(Call::SyncStream)?;
        self.inner.synchronize_stream(stream)
    }

    fn synchronize_device(&self) -> Result<(), BackendError> {
        self.enter(Call::SyncStream)?;
        self.inner.synchronize_device()
    }

    fn query_stream(&self, stream: StreamId) -> Result<bool, BackendError> {
        self.enter(Call::QueryStream)?;
        self.inner.query_stream(stream)
    }

    fn create_event(&self) -> Result<EventId, BackendError> {
        self.enter(Call::CreateEvent)?;
        self.inner.create_event()
    }

    fn destroy_event(&self, event: EventId) -> Result<(), BackendError> {
        self.inner.destroy_event(event)
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), BackendError> {
        self.enter(Call::RecordEvent)?;
        self.inner.record_event(event, stream)
    }

    fn query_event(&self, event: EventId) -> Result<bool, BackendError> {
        self.enter(Call::QueryEvent)?;
        self.inner.query_event(event)
    }

    fn synchronize_event(&self, event: EventId) -> Result<(), BackendError> {
        self.enter(Call::SyncEvent)?;
        self.inner.synchronize_event(event)
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), BackendError> {
        self.enter(Call::StreamWait)?;
        self.inner.stream_wait_event(stream, event)
    }

    unsafe fn copy_host_to_device(
        &self,
        dst: DeviceAddr,
        src: &[u8],
        stream: StreamId,
    ) -> Result<(), BackendError> {
        self.enter(Call::Copy)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.copy_host_to_device(dst, src, stream) }
    }

    unsafe fn copy_device_to_host(
        &self,
        dst: &mut [u8],
        src: DeviceAddr,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        self.enter(Call::Copy)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.copy_device_to_host(dst, src, stream) }
    }

    unsafe fn copy_device_to_device(
        &self,
        dst: DeviceAddr,
        src: DeviceAddr,
        len: usize,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        self.enter(Call::Copy)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.copy_device_to_device(dst, src, len, stream) }
    }

    unsafe fn memset(
        &self,
        dst: DeviceAddr,
        value: u8,
        len: usize,
        stream: StreamId,
    ) -> Result<(), BackendError> {
        self.enter(Call::Copy)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.memset(dst, value, len, stream) }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self.inner.as_any()
    }
}
