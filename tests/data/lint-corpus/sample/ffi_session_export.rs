//! False-alarm shape: values handed to C through an out-pointer (an ONNX-runtime-style C API
//! implemented in Rust): `Box::leak(..) as *mut T`, freed later by `Box::from_raw` in the
//! matching release call. Even a tensor is not leaked here.

use candle_core::{DType, Device, Tensor};

pub struct Session {
    pub graph: Vec<u8>,
}

pub unsafe extern "C" fn create_session(data: *const u8, len: usize, out: *mut *mut Session) -> i32 {
    let bytes = unsafe { std::slice::from_raw_parts(data, len) }.to_vec();
    let session = Session { graph: bytes };
    unsafe { *out = Box::leak(Box::new(session)) as *mut Session };
    0
}

pub unsafe extern "C" fn create_tensor(n: usize, out: *mut *mut Tensor) -> i32 {
    match Tensor::zeros(n, DType::F32, &Device::Cpu) {
        Ok(t) => {
            unsafe { *out = (Box::leak(Box::new(t)) as *mut Tensor).cast() };
            0
        }
        Err(_) => 1,
    }
}

pub unsafe extern "C" fn release_tensor(t: *mut Tensor) {
    drop(unsafe { Box::from_raw(t) });
}
