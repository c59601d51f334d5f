//! The caching allocator driven by an arbitrary sequence of operations (allocate, free,
//! record_stream, fence, empty_cache, completing events, ...) on the simulated device,
//! with and without virtual memory (and with pools per stream or shared), checking its invariants and exact accounting after
//! every operation.
#![no_main]

use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
use gpuscope_runtime::backend::Backend;
use gpuscope_runtime::backend::test::TestBackend;
use gpuscope_runtime::trace::drive::{decode, drive};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let ops = decode(rest);
    let vmm = mode & 1 == 1;
    let mut b = TestBackend::builder().capacity(64 << 20);
    if vmm {
        b = b.virtual_memory(2 << 20);
    }
    let backend = Arc::new(b.build());
    let mut streams = vec![Default::default()];
    for _ in 0..(mode >> 1) % 3 {
        streams.push(backend.create_stream().unwrap());
    }
    let config = AllocConfig {
        expandable_segments: vmm,
        // Bit 3: pools shared by every stream.
        share_across_streams: mode & 8 != 0,
        fence_interval_us: 0,
        ..AllocConfig::default()
    };
    let alloc = CachingAllocator::new(backend, config).unwrap();
    if let Err(e) = drive(&alloc, &streams, &ops, true) {
        panic!("{e}");
    }
});
