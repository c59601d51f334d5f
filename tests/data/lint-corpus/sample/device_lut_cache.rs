//! True finding: small lookup tables uploaded once per (table, device) and kept in a static
//! map that nothing clears (an image library's colormap LUTs): their device memory stays
//! until the process exits. Deliberate and bounded; the finding is what the rule points out.

use cudarc::driver::{CudaSlice, CudaStream};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Palette {
    Gray,
    Heat,
}

type TableCache = Mutex<HashMap<(Palette, usize), Arc<CudaSlice<u32>>>>;
static TABLES: OnceLock<TableCache> = OnceLock::new();

pub fn device_table(stream: &Arc<CudaStream>, palette: Palette) -> Arc<CudaSlice<u32>> {
    let key = (palette, stream.context().ordinal());
    let mut tables = TABLES.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap();
    if let Some(table) = tables.get(&key) {
        return table.clone();
    }
    let words: Vec<u32> = (0..256u32).map(|i| pack(palette, i)).collect();
    let table = Arc::new(stream.clone_htod(&words).unwrap());
    tables.insert(key, table.clone());
    table
}

fn pack(palette: Palette, i: u32) -> u32 {
    match palette {
        Palette::Gray => i | (i << 8) | (i << 16),
        Palette::Heat => i.min(255),
    }
}
