//! The CUDA backend's virtual memory: address ranges (`cuMemAddressReserve`), physical
//! chunks (`cuMemCreate`) and their mappings (`cuMemMap`, `cuMemSetAccess`, `cuMemUnmap`).

use super::*;

impl VirtualMemory for CudaBackend {
    fn granularity(&self) -> usize {
        self.vmm.as_ref().map_or(2 << 20, |v| v.granularity)
    }

    fn reserve_address(&self, size: usize) -> Result<DeviceAddr, BackendError> {
        self.bind()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: reserves address space only; the result is checked.
        unsafe { sys::cuMemAddressReserve(&mut ptr, size, self.granularity(), 0, 0) }
            .result()
            .map_err(|e| driver("cuMemAddressReserve", e))?;
        Ok(DeviceAddr(ptr))
    }

    unsafe fn free_address(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        self.bind()?;
        // SAFETY: the caller promises this is one reservation with nothing mapped.
        unsafe { sys::cuMemAddressFree(addr.0, size) }
            .result()
            .map_err(|e| driver("cuMemAddressFree", e))
    }

    fn create_chunk(&self, size: usize) -> Result<PhysHandle, BackendError> {
        let vmm = self.vmm.as_ref().ok_or(BackendError::Unsupported {
            backend: "cuda",
            what: "virtual memory on this device",
        })?;
        self.bind()?;
        let prop = allocation_prop(vmm.ordinal);
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: `prop` describes pinned device memory; the result is checked.
        unsafe { sys::cuMemCreate(&mut handle, size, &prop, 0) }
            .result()
            .map_err(oom_or("cuMemCreate", size))?;
        Ok(PhysHandle(handle))
    }

    unsafe fn release_chunk(&self, chunk: PhysHandle, _size: usize) -> Result<(), BackendError> {
        self.bind()?;
        // SAFETY: the caller promises nothing of the chunk is mapped.
        unsafe { sys::cuMemRelease(chunk.0) }
            .result()
            .map_err(|e| driver("cuMemRelease", e))
    }

    unsafe fn map(
        &self,
        addr: DeviceAddr,
        size: usize,
        chunk: PhysHandle,
    ) -> Result<(), BackendError> {
        self.bind()?;
        // SAFETY: the caller promises the range is reserved and unmapped, and the
        // chunk unmapped elsewhere.
        unsafe { sys::cuMemMap(addr.0, size, 0, chunk.0, 0) }
            .result()
            .map_err(|e| driver("cuMemMap", e))
    }

    unsafe fn set_access(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        let own = self.vmm.as_ref().map_or(0, |v| v.ordinal);
        let mut devices = vec![access_desc(own)];
        devices.extend(self.access_peers().into_iter().map(access_desc));
        self.bind()?;
        // SAFETY: the caller promises the range is fully mapped; `devices` holds
        // `devices.len()` descriptors.
        unsafe { sys::cuMemSetAccess(addr.0, size, devices.as_ptr(), devices.len()) }
            .result()
            .map_err(|e| driver("cuMemSetAccess", e))
    }

    fn add_peer(&self, peer: usize) -> Result<bool, BackendError> {
        let mut peers = self.peers.write().unwrap_or_else(|e| e.into_inner());
        let peer = i32::try_from(peer).map_err(|_| BackendError::InvalidHandle {
            what: "device",
            detail: format!("device ordinal {peer} is out of range"),
        })?;
        if peers.contains(&peer) || self.vmm.as_ref().is_some_and(|v| v.ordinal == peer) {
            return Ok(false);
        }
        peers.push(peer);
        Ok(true)
    }

    unsafe fn set_peer_access(
        &self,
        addr: DeviceAddr,
        size: usize,
        peer: usize,
    ) -> Result<(), BackendError> {
        let desc = access_desc(peer as i32);
        self.bind()?;
        // SAFETY: the caller promises the range is fully mapped.
        unsafe { sys::cuMemSetAccess(addr.0, size, &desc, 1) }
            .result()
            .map_err(|e| driver("cuMemSetAccess", e))
    }

    unsafe fn unmap(&self, addr: DeviceAddr, size: usize) -> Result<(), BackendError> {
        self.bind()?;
        // SAFETY: the caller promises this is one mapping and that it is idle.
        unsafe { sys::cuMemUnmap(addr.0, size) }
            .result()
            .map_err(|e| driver("cuMemUnmap", e))
    }
}

/// Read and write access for device `ordinal`.
fn access_desc(ordinal: i32) -> sys::CUmemAccessDesc {
    // SAFETY: plain data; the fields that matter are set below.
    let mut desc: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
    desc.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = ordinal;
    desc.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    desc
}
