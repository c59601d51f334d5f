//! False-alarm shape: a device allocation kept in a `ManuallyDrop` field so that the owner's
//! `Drop` can choose how to release it (an image library's CUDA tensor storage: memory cudarc
//! allocated is let drop, managed or imported memory is leaked from the slice and freed, or
//! handed back, another way). The struct literal wraps the slice; its destructor takes it.

use cudarc::driver::{CudaSlice, CudaStream};
use std::mem::ManuallyDrop;
use std::sync::Arc;

enum Origin {
    Owned,
    Managed,
    Imported(Box<dyn Send + Sync>),
}

pub struct DeviceStorage {
    slice: ManuallyDrop<CudaSlice<u8>>,
    addr: u64,
    stream: Arc<CudaStream>,
    origin: Origin,
}

impl Drop for DeviceStorage {
    fn drop(&mut self) {
        // SAFETY: runs once; the field is not used afterwards.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        match self.origin {
            Origin::Owned => drop(slice),
            Origin::Managed => {
                let _ = slice.leak();
                let _ = self.stream.synchronize();
                unsafe { free_managed(self.addr) };
            }
            Origin::Imported(_) => {
                let _ = slice.leak();
            }
        }
    }
}

pub fn owned(stream: &Arc<CudaStream>, bytes: usize) -> Box<DeviceStorage> {
    let slice: CudaSlice<u8> = stream.alloc_zeros(bytes).unwrap();
    let addr = device_address(&slice);
    Box::new(DeviceStorage {
        slice: ManuallyDrop::new(slice),
        addr,
        stream: stream.clone(),
        origin: Origin::Owned,
    })
}

impl DeviceStorage {
    pub fn managed(stream: &Arc<CudaStream>, bytes: usize) -> Self {
        let (addr, slice) = alloc_managed(stream, bytes);
        Self {
            slice: ManuallyDrop::new(slice),
            addr,
            stream: stream.clone(),
            origin: Origin::Managed,
        }
    }
}

fn device_address(_slice: &CudaSlice<u8>) -> u64 {
    0
}

fn alloc_managed(_stream: &Arc<CudaStream>, _bytes: usize) -> (u64, CudaSlice<u8>) {
    unimplemented!()
}

unsafe fn free_managed(_addr: u64) {}
