//! The caching allocator on a real GPU. Every test prints why it skipped where there is
//! no CUDA driver or device (CI), and must pass on the GPU machine.

#![cfg(feature = "cuda")]

use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, AllocError, CachingAllocator};
use gpuscope_runtime::backend::cuda::CudaBackend;
use gpuscope_runtime::backend::{Backend, StreamId};

mod common;

use common::cuda_backend as cuda;

fn allocators(dev: &Arc<CudaBackend>) -> Vec<(&'static str, CachingAllocator)> {
    let vm: AllocConfig = "expandable_segments:True".parse().unwrap();
    let plain: AllocConfig = "expandable_segments:False".parse().unwrap();
    vec![
        (
            "virtual memory",
            CachingAllocator::new(dev.clone(), vm).unwrap(),
        ),
        (
            "plain segments",
            CachingAllocator::new(dev.clone(), plain).unwrap(),
        ),
    ]
}

#[test]
fn data_written_to_blocks_reads_back_and_cached_blocks_are_reused() {
    let Some(dev) = cuda() else { return };
    for (mode, alloc) in allocators(&dev) {
        let s = StreamId::DEFAULT;
        let sizes = [512usize, 4096, 1 << 20, (3 << 20) + 100, 64 << 20];
        let blocks: Vec<_> = sizes
            .iter()
            .map(|&n| alloc.allocate(n, s).unwrap())
            .collect();
        for (i, b) in blocks.iter().enumerate() {
            let data: Vec<u8> = (0..b.size())
                .map(|j| ((i * 31 + j * 7) % 251) as u8)
                .collect();
            unsafe { dev.copy_host_to_device(b.addr(), &data, s).unwrap() };
        }
        for (i, b) in blocks.iter().enumerate() {
            let mut back = vec![0u8; b.size()];
            unsafe { dev.copy_device_to_host(&mut back, b.addr(), s).unwrap() };
            assert!(
                back.iter()
                    .enumerate()
                    .all(|(j, &v)| v == ((i * 31 + j * 7) % 251) as u8),
                "{mode}: block {i} read back wrong data"
            );
        }
        let device_allocs = alloc.stats().num_device_alloc;
        for b in blocks {
            alloc.free(b).unwrap();
        }
        let again: Vec<_> = sizes
            .iter()
            .map(|&n| alloc.allocate(n, s).unwrap())
            .collect();
        assert_eq!(
            alloc.stats().num_device_alloc,
            device_allocs,
            "{mode}: warm allocations came from the cache"
        );
        for b in again {
            alloc.free(b).unwrap();
        }
        alloc.check_invariants().unwrap();
        alloc.empty_cache().unwrap();
        assert_eq!(
            alloc.stats().reserved_bytes.all.current,
            0,
            "{mode}: empty_cache returned everything"
        );
    }
}

#[test]
fn remapped_pages_keep_working_after_fragmentation() {
    let Some(dev) = cuda() else { return };
    let config: AllocConfig = "reserve_ratio:1.0".parse().unwrap();
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    let s = StreamId::DEFAULT;
    // Interleave 6 MiB blocks, free every other one, then ask for one block larger than
    // any hole: with reserve_ratio 1.0 its pages come from the holes, remapped.
    let blocks: Vec<_> = (0..8)
        .map(|_| alloc.allocate(6 << 20, s).unwrap())
        .collect();
    let mut kept = Vec::new();
    for (i, b) in blocks.into_iter().enumerate() {
        if i % 2 == 0 {
            alloc.free(b).unwrap();
        } else {
            kept.push(b);
        }
    }
    let big = alloc.allocate(20 << 20, s).unwrap();
    assert!(
        alloc.stats().num_device_unmap > 0,
        "the large block reused pages of the holes"
    );
    let data: Vec<u8> = (0..big.size()).map(|j| (j % 241) as u8).collect();
    unsafe { dev.copy_host_to_device(big.addr(), &data, s).unwrap() };
    let mut back = vec![0u8; big.size()];
    unsafe { dev.copy_device_to_host(&mut back, big.addr(), s).unwrap() };
    assert!(back == data, "data in remapped pages reads back");
    alloc.free(big).unwrap();
    for b in kept {
        alloc.free(b).unwrap();
    }
    alloc.check_invariants().unwrap();
    alloc.empty_cache().unwrap();
    assert_eq!(alloc.stats().reserved_bytes.all.current, 0);
}

#[test]
fn a_block_used_on_another_stream_waits_for_its_event() {
    let Some(dev) = cuda() else { return };
    for (mode, alloc) in allocators(&dev) {
        let side = dev.create_stream().unwrap();
        let b = alloc.allocate(8 << 20, StreamId::DEFAULT).unwrap();
        let addr = b.addr();
        unsafe { dev.memset(addr, 7, 8 << 20, side).unwrap() };
        alloc.record_stream(&b, side).unwrap();
        alloc.free(b).unwrap();
        dev.synchronize_stream(side).unwrap();
        // The event completed: the block comes back from the cache, same place.
        let again = alloc.allocate(8 << 20, StreamId::DEFAULT).unwrap();
        assert_eq!(
            again.addr(),
            addr,
            "{mode}: the block was reused once its stream finished"
        );
        alloc.free(again).unwrap();
        alloc.check_invariants().unwrap();
    }
}

#[test]
fn a_request_past_the_cap_is_a_typed_out_of_memory_error() {
    let Some(dev) = cuda() else { return };
    let config: AllocConfig = "memory_limit_mb:256".parse().unwrap();
    let alloc = CachingAllocator::new(dev.clone(), config).unwrap();
    let keep = alloc.allocate(200 << 20, StreamId::DEFAULT).unwrap();
    match alloc.allocate(100 << 20, StreamId::DEFAULT) {
        Err(AllocError::OutOfMemory(report)) => {
            let text = report.to_string();
            assert!(text.contains("100.00 MiB"), "{text}");
            assert!(text.contains("memory_limit_mb"), "{text}");
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
    assert_eq!(alloc.stats().num_ooms, 1);
    alloc.free(keep).unwrap();
    let fits = alloc.allocate(100 << 20, StreamId::DEFAULT).unwrap();
    alloc.free(fits).unwrap();
    alloc.check_invariants().unwrap();
}

#[test]
fn the_device_reports_its_memory() {
    let Some(dev) = cuda() else { return };
    let info = dev.mem_info().unwrap();
    assert!(info.total > 1 << 30 && info.free <= info.total, "{info:?}");
    println!(
        "{}: {} MiB free of {} MiB",
        dev.name(),
        info.free >> 20,
        info.total >> 20
    );
}
