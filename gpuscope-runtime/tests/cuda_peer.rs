//! Copies between two GPUs: exact in both directions, with and without virtual memory,
//! into views, from memory mapped before and after peer access was enabled (growths of
//! one chunk and of several), and never
//! racing with the reuse of the source's memory. Prints the bandwidth of a peer copy
//! next to a copy through the host. Skips with a printed reason where there is no CUDA
//! driver or fewer than two devices.

#![cfg(feature = "cuda")]

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys;
use gpuscope_runtime::alloc::AllocConfig;
use gpuscope_runtime::backend::cuda::{CudaBackend, unavailable_reason};
use gpuscope_runtime::{Device, Tensor};

const MIB: usize = 1 << 20;

/// The number of CUDA devices, or `None` after printing why the test is skipped.
fn two_or_more() -> Option<usize> {
    if let Some(reason) = unavailable_reason() {
        println!("skipped: {reason}");
        return None;
    }
    let n = cudarc::driver::result::device::get_count().expect("cuDeviceGetCount") as usize;
    if n < 2 {
        println!("skipped: {n} CUDA device(s); copies between GPUs need two");
        return None;
    }
    Some(n)
}

/// The process's CUDA devices 0 and 1 (default configuration: virtual memory).
fn shared_pair() -> Option<(Device, Device)> {
    two_or_more()?;
    Some((Device::cuda(0).unwrap(), Device::cuda(1).unwrap()))
}

/// Devices 0 and 1 with allocators of their own, configured by `config`.
fn private_pair(config: AllocConfig) -> Option<(Device, Device)> {
    two_or_more()?;
    let open = |ordinal| {
        Device::with_backend(Arc::new(CudaBackend::new(ordinal).unwrap()), config.clone()).unwrap()
    };
    Some((open(0), open(1)))
}

/// `n` distinct values (exact in f32).
fn pattern(n: usize, salt: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ salt) as f32 / 4096.0)
        .map(|v| v.floor())
        .collect()
}

fn round_trips(a: &Device, b: &Device) {
    for (i, n) in [1, 1000, 3 * MIB / 4, 300 * MIB / 4]
        .into_iter()
        .enumerate()
    {
        let values = pattern(n, i as u32);
        let on_a = Tensor::from_slice(&values, &[n], a).unwrap();
        let on_b = on_a.to_device(b).unwrap();
        assert_eq!(on_b.device(), b);
        let back = on_b.to_device(a).unwrap();
        assert!(
            on_b.to_vec::<f32>().unwrap() == values,
            "{n} elements, a -> b"
        );
        assert!(
            back.to_vec::<f32>().unwrap() == values,
            "{n} elements, b -> a"
        );
    }
}

#[test]
fn copies_are_exact_both_ways_with_virtual_memory() {
    let Some((a, b)) = shared_pair() else { return };
    assert!(a.allocator().uses_virtual_memory() && b.allocator().uses_virtual_memory());
    let peer = a.enable_peer_access(&b).unwrap();
    println!(
        "peer access between {} and {}: {peer}",
        a.description(),
        b.description()
    );
    round_trips(&a, &b);
}

#[test]
fn copies_are_exact_both_ways_without_virtual_memory() {
    let config = AllocConfig {
        expandable_segments: false,
        ..AllocConfig::default()
    };
    let Some((a, b)) = private_pair(config) else {
        return;
    };
    assert!(!a.allocator().uses_virtual_memory());
    round_trips(&a, &b);
}

/// Whether device `peer` may read and write the mapping at `addr` (`cuMemGetAccess`).
fn peer_can_access(addr: u64, peer: i32) -> bool {
    // SAFETY: plain data; the fields that matter are set below.
    let mut location: sys::CUmemLocation = unsafe { std::mem::zeroed() };
    location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = peer;
    let mut flags = 0u64;
    // SAFETY: writes one u64; `addr` is mapped virtual memory.
    unsafe { sys::cuMemGetAccess(&mut flags, &location, addr) }
        .result()
        .expect("cuMemGetAccess");
    flags == sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE as u64
}

/// Enables peer access from `a` to `b`; false, after printing why the test is skipped,
/// where the two have no peer path.
fn granted(a: &Device, b: &Device) -> bool {
    let ok = a.enable_peer_access(b).unwrap();
    if !ok {
        println!(
            "skipped: no peer path between {} and {}",
            a.description(),
            b.description()
        );
    }
    ok
}

#[test]
fn memory_mapped_before_and_after_peer_access_is_reachable_from_the_peer() {
    let Some((a, b)) = private_pair(AllocConfig::default()) else {
        return;
    };
    let before = Tensor::from_slice(&pattern(MIB, 7), &[MIB], &a).unwrap();
    assert!(
        !peer_can_access(before.addr().0, 1),
        "no access before it is enabled"
    );
    if !granted(&a, &b) {
        return;
    }
    let peak = a.allocator().stats().reserved_bytes.all.current as usize;
    // Larger than all that is mapped: a new chunk, mapped after the grant.
    let after = Tensor::from_slice(&pattern(peak / 4 + MIB, 9), &[peak / 4 + MIB], &a).unwrap();
    assert!(peer_can_access(before.addr().0, 1));
    assert!(peer_can_access(after.addr().0, 1));
    let on_b = Tensor::zeros(&[MIB], &b).unwrap();
    assert!(peer_can_access(on_b.addr().0, 0), "and the other way");
    on_b.copy_from(&before).unwrap();
    assert!(on_b.to_vec::<f32>().unwrap() == pattern(MIB, 7));
    let again = after.to_device(&b).unwrap();
    assert!(again.to_vec::<f32>().unwrap() == pattern(peak / 4 + MIB, 9));
}

/// Growths of several chunks (`max_chunk_size_mb:20`: 20 MiB each), before and after
/// the grant: the peer reaches every chunk, the last one included, and copies across
/// the chunks are exact.
#[test]
fn growths_of_several_chunks_are_reachable_from_the_peer() {
    let config: AllocConfig = "max_chunk_size_mb:20".parse().unwrap();
    let Some((a, b)) = private_pair(config) else {
        return;
    };
    let n = 70 * MIB / 4;
    let before = Tensor::from_slice(&pattern(n, 3), &[n], &a).unwrap();
    if !granted(&a, &b) {
        return;
    }
    let after = Tensor::from_slice(&pattern(2 * n, 5), &[2 * n], &a).unwrap();
    let chunks: usize = a
        .allocator()
        .snapshot()
        .iter()
        .map(|s| s.chunks.len())
        .sum();
    assert!(chunks >= 9, "70 and 140 MiB in 20 MiB chunks: {chunks}");
    for (t, bytes) in [(&before, 4 * n), (&after, 8 * n)] {
        let start = t.addr().0;
        assert!(peer_can_access(start, 1));
        assert!(
            peer_can_access(start + bytes as u64 - 4, 1),
            "the last chunk"
        );
    }
    let on_b = after.to_device(&b).unwrap();
    assert!(on_b.to_vec::<f32>().unwrap() == pattern(2 * n, 5));
    let on_b = before.to_device(&b).unwrap();
    assert!(on_b.to_vec::<f32>().unwrap() == pattern(n, 3));
}

#[test]
fn the_source_memory_is_reused_only_after_the_copy_has_read_it() {
    // Allocators of its own: with the process's devices, a test running beside it may
    // take the freed block before the reuse below (it did, 3 to 5 runs in 5 with four
    // test threads on two H100s).
    let Some((a, b)) = private_pair(AllocConfig::default()) else {
        return;
    };
    let n = 256 * MIB / 4;
    for round in 0..4 {
        let src = Tensor::full(&[n], round as f32 + 1.0, &a).unwrap();
        let dst = src.to_device(&b).unwrap();
        let addr = src.addr();
        drop(src);
        // Same size, same stream: the cache gives the same memory back at once, and
        // the fill is queued on the stream that waits for the copy.
        let reuse = Tensor::full(&[n], -1.0, &a).unwrap();
        assert_eq!(reuse.addr(), addr, "the freed block is reused");
        let got = dst.to_vec::<f32>().unwrap();
        assert!(
            got.iter().all(|&v| v == round as f32 + 1.0),
            "round {round}: the copy read memory already overwritten"
        );
    }
}

#[test]
fn copies_into_and_from_views_on_the_other_gpu() {
    let Some((a, b)) = shared_pair() else { return };
    let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let src = Tensor::from_slice(&values, &[3, 4], &a).unwrap();
    let dst = Tensor::zeros(&[4, 3], &b).unwrap();
    dst.t().unwrap().copy_from(&src).unwrap(); // into a view, across devices
    let expect: Vec<f32> = (0..4)
        .flat_map(|c| (0..3).map(move |r| (r * 4 + c) as f32))
        .collect();
    assert_eq!(dst.to_vec::<f32>().unwrap(), expect);
    let back = dst.t().unwrap().to_device(&a).unwrap(); // a view to the other device
    assert_eq!(back.to_vec::<f32>().unwrap(), values);
}

#[test]
fn peer_copy_bandwidth_against_a_copy_through_the_host() {
    let Some((a, b)) = shared_pair() else { return };
    let n = 1024 * MIB / 4;
    let src = Tensor::full(&[n], 3.0, &a).unwrap();
    let peer = a.enable_peer_access(&b).unwrap();
    let dst = src.to_device(&b).unwrap(); // warm: both pools hold 1 GiB
    let time = |f: &dyn Fn()| {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        best
    };
    let sync = || {
        a.backend().synchronize_device().unwrap();
        b.backend().synchronize_device().unwrap();
    };
    let direct = time(&|| {
        dst.copy_from(&src).unwrap();
        sync();
    });
    let staged = time(&|| {
        let host = src.to_vec::<f32>().unwrap();
        let t = Tensor::from_slice(&host, &[n], &b).unwrap();
        drop(t);
        sync();
    });
    let gbs = |s: f64| (n * 4) as f64 / s / 1e9;
    println!(
        "1 GiB {} -> {}: copy_from {:.1} GB/s (peer access: {peer}); through the host {:.1} GB/s",
        a.description(),
        b.description(),
        gbs(direct),
        gbs(staged)
    );
    assert!(dst.to_vec::<f32>().unwrap().iter().all(|&v| v == 3.0));
}
