//! The trace parser on arbitrary bytes; a trace that parses is replayed through the
//! caching allocator on the simulated device (virtual memory and plain segments), whose
//! accounting must hold.
#![no_main]

use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
use gpuscope_runtime::backend::test::TestBackend;
use gpuscope_runtime::trace::Trace;
use gpuscope_runtime::trace::replay::{ReplayOptions, replay};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = Trace::parse_bytes(data, "fuzz.csv") else {
        return;
    };
    if trace.ops().len() > 20_000 {
        return;
    }
    for vmm in [true, false] {
        let mut b = TestBackend::builder().capacity(1 << 34);
        if vmm {
            b = b.virtual_memory(2 << 20);
        }
        let config = AllocConfig {
            expandable_segments: vmm,
            ..AllocConfig::default()
        };
        let alloc = CachingAllocator::new(Arc::new(b.build()), config).unwrap();
        // Errors (out of memory, unknown stream) are answers; only panics are bugs.
        let _ = replay(&alloc, &trace, "fuzz.csv", &ReplayOptions { warm_passes: 1, ..Default::default() });
        alloc.check_invariants().unwrap();
    }
});
