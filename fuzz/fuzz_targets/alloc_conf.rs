//! `GPUSCOPE_ALLOC_CONF` on arbitrary text: a configuration or an error, never a panic;
//! an accepted configuration starts an allocator.
#![no_main]

use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
use gpuscope_runtime::backend::test::TestBackend;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(config) = AllocConfig::parse_from(text, "GPUSCOPE_ALLOC_CONF") {
        let backend = TestBackend::builder()
            .capacity(1 << 30)
            .virtual_memory(2 << 20)
            .build();
        if let Ok(alloc) = CachingAllocator::new(Arc::new(backend), config) {
            if let Ok(b) = alloc.allocate(1000, Default::default()) {
                alloc.free(b).unwrap();
            }
            alloc.check_invariants().unwrap();
        }
    }
});
