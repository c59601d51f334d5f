//! Copies between two CUDA devices: peer to peer where the hardware allows it, with
//! the stream ordering both allocators rely on.
//!
//! The copy runs on the destination's stream, after the source's stream has reached
//! the copy (an event), and the source's stream then waits for the copy (another
//! event): the source's memory, freed later on its own stream, is never given to other
//! work before the copy has read it, and the source allocator needs to know of no
//! foreign stream. Peer access is enabled once per device pair, on first use.
//!
//! Virtual-memory segments (the default `expandable_segments:True`) are mapped for
//! their own device only, so peer copies between them go through the host (staged)
//! unless peer access to the mappings is granted; [`peer_copy_possible`] says which
//! path a pair takes.

use std::collections::HashMap;
use std::sync::Mutex;

use cudarc::driver::sys;

use crate::backend::cuda::CudaBackend;
use crate::backend::{Backend as _, BackendError};
use crate::device::Device;
use crate::tensor::Tensor;

/// Peer access per (accessing ordinal, peer ordinal): enabled, or not possible.
static PEERS: Mutex<Option<HashMap<(usize, usize), bool>>> = Mutex::new(None);

fn cuda(device: &Device) -> Option<&CudaBackend> {
    device.backend().as_any().downcast_ref::<CudaBackend>()
}

fn driver(call: &'static str, r: sys::CUresult) -> BackendError {
    BackendError::Driver {
        call,
        message: format!("{r:?}"),
    }
}

/// Whether `dst` can read and write `src`'s memory directly, enabling it on first use.
pub fn enable_peer_access(dst: &Device, src: &Device) -> Result<bool, BackendError> {
    let (Some(d), Some(s)) = (cuda(dst), cuda(src)) else {
        return Ok(false);
    };
    let key = (d.ordinal(), s.ordinal());
    if key.0 == key.1 {
        return Ok(true);
    }
    let mut table = PEERS.lock().unwrap_or_else(|e| e.into_inner());
    let table = table.get_or_insert_with(HashMap::new);
    if let Some(&known) = table.get(&key) {
        return Ok(known);
    }
    let mut can = 0;
    // SAFETY: writes one int; both devices exist.
    let r = unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, d.context().cu_device(), s.context().cu_device())
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(driver("cuDeviceCanAccessPeer", r));
    }
    let enabled = if can == 0 {
        false
    } else {
        d.context()
            .bind_to_thread()
            .map_err(|e| driver("cuCtxSetCurrent", e.0))?;
        // SAFETY: enables access from the current (dst) context to src's context.
        let r = unsafe { sys::cuCtxEnablePeerAccess(s.context().cu_ctx(), 0) };
        match r {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
                true
            }
            r => return Err(driver("cuCtxEnablePeerAccess", r)),
        }
    };
    table.insert(key, enabled);
    Ok(enabled)
}

/// Whether a copy from `src` to `dst` can go peer to peer (both CUDA, peer access
/// possible, and neither allocator maps its memory through virtual memory, whose
/// mappings only their own device may touch).
pub fn peer_copy_possible(dst: &Device, src: &Device) -> Result<bool, BackendError> {
    if dst.backend().virtual_memory().is_some() && dst.allocator().uses_virtual_memory()
        || src.backend().virtual_memory().is_some() && src.allocator().uses_virtual_memory()
    {
        return Ok(false);
    }
    Ok(enable_peer_access(dst, src)? && enable_peer_access(src, dst)?)
}

/// Copies `src` (contiguous, another CUDA device) into `dst` (contiguous, same byte
/// size) peer to peer, ordered as the module docs say. `Ok(false)`: not possible for
/// this pair; the caller stages the copy through the host.
pub fn copy_peer(dst: &Tensor, src: &Tensor) -> Result<bool, BackendError> {
    let (dd, sd) = (dst.device(), src.device());
    let (Some(d), Some(s)) = (cuda(dd), cuda(sd)) else {
        return Ok(false);
    };
    if dd == sd || !dst.is_contiguous() || !src.is_contiguous() || dst.nbytes() != src.nbytes() {
        return Ok(false);
    }
    if !peer_copy_possible(dd, sd)? {
        return Ok(false);
    }
    let (dst_stream, src_stream) = (d.cuda_stream(dst.stream())?, s.cuda_stream(src.stream())?);
    // The destination's stream waits for the source's stream to reach this point.
    let ready = s.create_event()?;
    s.record_event(ready, src.stream())?;
    let ready_raw = s.raw_event(ready)?;
    d.context()
        .bind_to_thread()
        .map_err(|e| driver("cuCtxSetCurrent", e.0))?;
    // SAFETY: an event of the source's context, waited on by a stream of the
    // destination's (cross-device waits are allowed).
    let r = unsafe { sys::cuStreamWaitEvent(dst_stream.cu_stream(), ready_raw, 0) };
    s.destroy_event(ready)?; // released once complete; the wait is already queued
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(driver("cuStreamWaitEvent", r));
    }
    // SAFETY: both ranges are live device memory of `nbytes` bytes of their devices,
    // with peer access enabled both ways; ordered on the destination's stream.
    let r = unsafe {
        sys::cuMemcpyPeerAsync(
            dst.addr().0,
            d.context().cu_ctx(),
            src.addr().0,
            s.context().cu_ctx(),
            src.nbytes(),
            dst_stream.cu_stream(),
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(driver("cuMemcpyPeerAsync", r));
    }
    // The source's stream waits for the copy before anything it runs later (a free).
    let done = d.create_event()?;
    d.record_event(done, dst.stream())?;
    let done_raw = d.raw_event(done)?;
    s.context()
        .bind_to_thread()
        .map_err(|e| driver("cuCtxSetCurrent", e.0))?;
    // SAFETY: as above, the other way round.
    let r = unsafe { sys::cuStreamWaitEvent(src_stream.cu_stream(), done_raw, 0) };
    d.destroy_event(done)?;
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(driver("cuStreamWaitEvent", r));
    }
    Ok(true)
}
