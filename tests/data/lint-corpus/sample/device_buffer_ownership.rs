//! False-alarm shape: a device-buffer type managing its own memory (Rust-CUDA's `cust`,
//! cudarc): `ManuallyDrop::new(self)` to give the raw pointer away, `mem::forget` of a
//! value of the type after freeing it by hand. Also handles that are not device memory.

use cust::memory::DeviceBuffer;
use std::mem::{self, ManuallyDrop};

pub struct DeviceArray<T> {
    ptr: u64,
    len: usize,
    _marker: std::marker::PhantomData<T>,
}

impl<T> DeviceArray<T> {
    pub fn into_raw_parts(self) -> (u64, usize) {
        let me = ManuallyDrop::new(self);
        (me.ptr, me.len)
    }

    pub fn free(mut array: DeviceArray<T>) -> Result<(), (u32, DeviceArray<T>)> {
        let ptr = mem::replace(&mut array.ptr, 0);
        match unsafe { cu_mem_free(ptr) } {
            0 => {
                mem::forget(array);
                Ok(())
            }
            code => Err((code, DeviceArray { ptr, len: array.len, _marker: Default::default() })),
        }
    }
}

pub fn into_device_ptr(buf: DeviceBuffer<f32>) -> u64 {
    let ptr = buf.as_device_ptr();
    mem::forget(buf);
    ptr
}

pub struct Context {
    raw: u64,
}

pub fn detach(ctx: Context) -> u64 {
    let raw = ctx.raw;
    mem::forget(ctx);
    raw
}

pub fn keep_mapped(file: std::fs::File) -> ManuallyDrop<std::fs::File> {
    ManuallyDrop::new(file)
}

#[inline]
pub fn black_box<T>(dummy: T) -> T {
    unsafe {
        let ret = std::ptr::read_volatile(&dummy);
        mem::forget(dummy);
        ret
    }
}

unsafe fn cu_mem_free(_ptr: u64) -> u32 {
    0
}
