//! Two CUDA devices working on each other's memory: peer access between their
//! contexts, and copies from one device's memory to the other's.
//!
//! A copy runs on the destination's stream, after the source's stream has reached the
//! copy (an event), and the source's stream then waits for the copy (another event).
//! Nothing waits on the host. The source's memory, freed later on its own stream, is
//! never given to other work before the copy has read it, so the source's allocator
//! needs to know of no foreign stream.
//!
//! Context peer access ([`enable_context_peer_access`]) covers memory from
//! `cuMemAlloc`. Memory mapped through virtual memory is accessible only to the devices
//! its mappings name (`cuMemSetAccess`); the allocator grants a peer access to its
//! mappings (`CachingAllocator::grant_peer_access`), and `Device::enable_peer_access`
//! does both.

use std::collections::HashMap;
use std::sync::Mutex;

use cudarc::driver::result;
use cudarc::driver::sys;

use super::{CudaBackend, driver};
use crate::backend::{Backend as _, BackendError, DeviceAddr, StreamId};

/// Context peer access per (accessing ordinal, peer ordinal): enabled, or impossible.
static CONTEXT_PEERS: Mutex<Option<HashMap<(usize, usize), bool>>> = Mutex::new(None);

/// Whether `dst`'s context may access `src`'s memory directly, enabling it on first
/// use (`cuDeviceCanAccessPeer`, then `cuCtxEnablePeerAccess`). `Ok(false)`: the
/// hardware has no path between the two (copies between them go through the host).
pub fn enable_context_peer_access(
    dst: &CudaBackend,
    src: &CudaBackend,
) -> Result<bool, BackendError> {
    let key = (dst.ordinal(), src.ordinal());
    if key.0 == key.1 {
        return Ok(true);
    }
    let mut table = CONTEXT_PEERS.lock().unwrap_or_else(|e| e.into_inner());
    let table = table.get_or_insert_with(HashMap::new);
    if let Some(&known) = table.get(&key) {
        return Ok(known);
    }
    let mut can = 0;
    // SAFETY: writes one int; both devices exist.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, dst.ctx.cu_device(), src.ctx.cu_device()) }
        .result()
        .map_err(|e| driver("cuDeviceCanAccessPeer", e))?;
    let enabled = can != 0 && {
        dst.bind()?;
        // SAFETY: enables access from the current (dst) context to src's context.
        match unsafe { sys::cuCtxEnablePeerAccess(src.ctx.cu_ctx(), 0) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
                true
            }
            r => return Err(driver("cuCtxEnablePeerAccess", result::DriverError(r))),
        }
    };
    table.insert(key, enabled);
    Ok(enabled)
}

/// An event recorded on `stream` of `on`, waited for by `waiter`'s stream `wait_on`,
/// then destroyed (the driver keeps it until the wait is done).
fn order_after(
    on: &CudaBackend,
    stream: StreamId,
    waiter: &CudaBackend,
    wait_on: StreamId,
) -> Result<(), BackendError> {
    let (recorded, waiting) = (on.raw_stream(stream)?, waiter.raw_stream(wait_on)?);
    on.bind()?;
    let event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
        .map_err(|e| driver("cuEventCreate", e))?;
    // SAFETY: a live event and a live stream of the current context.
    let recorded =
        unsafe { result::event::record(event, recorded) }.map_err(|e| driver("cuEventRecord", e));
    let waited = recorded.and_then(|()| {
        waiter.bind()?;
        // SAFETY: an event of another context, waited on by a stream of this one
        // (cross-device waits are allowed).
        unsafe { sys::cuStreamWaitEvent(waiting, event, 0) }
            .result()
            .map_err(|e| driver("cuStreamWaitEvent", e))
    });
    // SAFETY: created above; a destroyed event stays valid for the waits queued on it.
    let destroyed =
        unsafe { result::event::destroy(event) }.map_err(|e| driver("cuEventDestroy", e));
    waited.and(destroyed)
}

/// Copies `size` bytes from `src` (memory of `from`, used on its stream `src_stream`)
/// to `dst` (memory of `to`, on its stream `dst_stream`), ordered as the module docs
/// say. Peer to peer where the two contexts have peer access and the memory is
/// accessible to the other device; otherwise the driver stages it.
///
/// # Safety
/// Both ranges are live device memory of `size` bytes of their devices, and neither
/// is written by other work while the copy runs.
pub unsafe fn copy_from_peer(
    to: &CudaBackend,
    dst: DeviceAddr,
    dst_stream: StreamId,
    from: &CudaBackend,
    src: DeviceAddr,
    src_stream: StreamId,
    size: usize,
) -> Result<(), BackendError> {
    order_after(from, src_stream, to, dst_stream)?;
    let stream = to.raw_stream(dst_stream)?;
    to.bind()?;
    // SAFETY: as the caller promises; ordered on the destination's stream.
    unsafe {
        sys::cuMemcpyPeerAsync(
            dst.0,
            to.ctx.cu_ctx(),
            src.0,
            from.ctx.cu_ctx(),
            size,
            stream,
        )
    }
    .result()
    .map_err(|e| driver("cuMemcpyPeerAsync", e))?;
    order_after(to, dst_stream, from, src_stream)
}
