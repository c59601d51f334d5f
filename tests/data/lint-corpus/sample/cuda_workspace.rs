//! True finding: a per-device scratch buffer boxed and leaked for the program's lifetime
//! (a quantized-matmul workspace): its device memory is never given back.

use cudarc::driver::{CudaSlice, CudaStream};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

struct Workspace {
    buffer: CudaSlice<u8>,
    capacity: usize,
}

static WORKSPACES: OnceLock<Mutex<HashMap<usize, &'static Mutex<Workspace>>>> = OnceLock::new();

pub fn workspace(stream: &Arc<CudaStream>, ordinal: usize, bytes: usize) -> &'static Mutex<Workspace> {
    let map = WORKSPACES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = map.lock().unwrap();
    if let Some(ws) = map.get(&ordinal) {
        return ws;
    }
    let buffer = stream.alloc_zeros::<u8>(bytes).unwrap();
    let leaked = Box::leak(Box::new(Mutex::new(Workspace { buffer, capacity: bytes })));
    map.insert(ordinal, leaked);
    leaked
}
