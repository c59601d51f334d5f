//! False-alarm shape: a kernel wrapper or launch config boxed and leaked to live for the
//! program (quantized-matmul crates register their CUDA kernels this way). Not a tensor.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

pub struct KernelHandle {
    pub name: &'static str,
    pub grid: (u32, u32, u32),
    pub shared_bytes: usize,
}

static KERNELS: OnceLock<Mutex<HashMap<String, &'static KernelHandle>>> = OnceLock::new();

pub fn kernel(name: &'static str, rows: u32) -> &'static KernelHandle {
    let map = KERNELS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = map.lock().unwrap();
    if let Some(k) = map.get(name) {
        return k;
    }
    let handle = Box::leak(Box::new(KernelHandle {
        name,
        grid: (rows.div_ceil(64), 1, 1),
        shared_bytes: 48 * 1024,
    }));
    map.insert(name.to_string(), handle);
    handle
}
