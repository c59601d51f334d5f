//! Checks and times the CUDA virtual memory calls the allocator relies on: one-page
//! chunks mapped side by side and remapped elsewhere with their data, and the cost of
//! each call. Prints a reason and exits 0 where there is no GPU.
//!
//! `cargo run --release -p gpuscope-runtime --example cuda_vmm_probe`

use std::time::Instant;

use gpuscope_runtime::backend::cuda::{CudaBackend, unavailable_reason};
use gpuscope_runtime::backend::{Backend, StreamId};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Some(reason) = unavailable_reason() {
        println!("skipped: {reason}");
        return Ok(());
    }
    let dev = CudaBackend::new(0)?;
    let vm = dev
        .virtual_memory()
        .ok_or("this GPU has no virtual memory management")?;
    let page = vm.granularity();
    println!("device: {}, granularity {} KiB", dev.name(), page >> 10);

    // 1. A chunk remapped elsewhere keeps its contents.
    let a = vm.create_chunk(page)?;
    let b = vm.create_chunk(page)?;
    let va = vm.reserve_address(8 * page)?;
    let pattern: Vec<u8> = (0..page).map(|i| (i * 7 % 251) as u8).collect();
    unsafe {
        vm.map(va.offset(page), page, a)?;
        vm.set_access(va.offset(page), page)?;
        dev.copy_host_to_device(va.offset(page), &pattern, StreamId::DEFAULT)?;
        dev.synchronize_stream(StreamId::DEFAULT)?;
        vm.unmap(va.offset(page), page)?;
        vm.map(va.offset(5 * page), page, a)?;
        vm.map(va.offset(6 * page), page, b)?;
        vm.set_access(va.offset(5 * page), 2 * page)?;
        dev.memset(va.offset(6 * page), 0xAB, page, StreamId::DEFAULT)?;
        let mut back = vec![0u8; page];
        dev.copy_device_to_host(&mut back, va.offset(5 * page), StreamId::DEFAULT)?;
        assert_eq!(back, pattern, "a remapped chunk lost its contents");
        let mut other = vec![0u8; 16];
        dev.copy_device_to_host(&mut other, va.offset(6 * page), StreamId::DEFAULT)?;
        assert_eq!(other, vec![0xAB; 16]);
        vm.unmap(va.offset(5 * page), page)?;
        vm.unmap(va.offset(6 * page), page)?;
        vm.release_chunk(a, page)?;
        vm.release_chunk(b, page)?;
        vm.free_address(va, 8 * page)?;
    }
    println!(
        "remapping: ok (two one-page chunks mapped side by side, one remapped elsewhere, data kept)"
    );

    // 2. Costs.
    let time = |label: &str,
                n: usize,
                f: &mut dyn FnMut(usize) -> Result<(), Box<dyn std::error::Error>>|
     -> Result<(), Box<dyn std::error::Error>> {
        let t = Instant::now();
        for i in 0..n {
            f(i)?;
        }
        println!(
            "{label:<40} {:>10.2} us",
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
        Ok(())
    };
    let pages = 512;
    let va = vm.reserve_address(pages * page)?;
    let mut chunks = Vec::with_capacity(pages);
    time("cuMemCreate (one 2 MiB page)", pages, &mut |_| {
        chunks.push(vm.create_chunk(page)?);
        Ok(())
    })?;
    time("cuMemMap (one 2 MiB page)", pages, &mut |i| unsafe {
        Ok(vm.map(va.offset(i * page), page, chunks[i])?)
    })?;
    time("cuMemSetAccess (one page)", pages, &mut |i| unsafe {
        Ok(vm.set_access(va.offset(i * page), page)?)
    })?;
    let t = Instant::now();
    unsafe { vm.set_access(va, pages * page)? };
    println!(
        "{:<40} {:>10.2} us",
        "cuMemSetAccess (512 pages at once)",
        t.elapsed().as_secs_f64() * 1e6
    );
    time("cuMemUnmap (one page)", pages, &mut |i| unsafe {
        Ok(vm.unmap(va.offset(i * page), page)?)
    })?;
    time("cuMemRelease (one 2 MiB page)", pages, &mut |i| unsafe {
        Ok(vm.release_chunk(chunks[i], page)?)
    })?;
    for (label, size) in [
        ("cuMemCreate 2 MiB", page),
        ("cuMemCreate 64 MiB", 32 * page),
        ("cuMemCreate 1 GiB", 512 * page),
    ] {
        let t = Instant::now();
        let c = vm.create_chunk(size)?;
        let created = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        unsafe { vm.release_chunk(c, size)? };
        println!(
            "{label:<40} {created:>10.2} us   release {:>10.2} us",
            t.elapsed().as_secs_f64() * 1e6
        );
    }
    for (label, size) in [
        ("cuMemAlloc 2 MiB", page),
        ("cuMemAlloc 64 MiB", 32 * page),
        ("cuMemAlloc 1 GiB", 512 * page),
    ] {
        let t = Instant::now();
        let a = dev.malloc(size)?;
        let created = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        unsafe { dev.free(a, size)? };
        println!(
            "{label:<40} {created:>10.2} us   free    {:>10.2} us",
            t.elapsed().as_secs_f64() * 1e6
        );
    }
    unsafe { vm.free_address(va, pages * page)? };

    // 3. A 2 GiB growth as the allocator maps it: one chunk, 500 MiB chunks, or 20 MiB
    // pages (past `page_chunk_threshold`), each created and mapped, then one
    // `cuMemSetAccess`; and the pages' `cuMemCreate`s from four threads at once.
    let growth = 1024 * page;
    for (label, piece) in [
        ("2 GiB growth, one chunk", growth),
        ("2 GiB growth, 500 MiB chunks", 250 * page),
        ("2 GiB growth, 20 MiB pages", 10 * page),
    ] {
        let va = vm.reserve_address(growth)?;
        let t = Instant::now();
        let mut made = Vec::new();
        let mut at = 0;
        while at < growth {
            let size = piece.min(growth - at);
            made.push((vm.create_chunk(size)?, size));
            at += size;
        }
        let created = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        let mut at = 0;
        for &(c, size) in &made {
            unsafe { vm.map(va.offset(at), size, c)? };
            at += size;
        }
        let mapped = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        unsafe { vm.set_access(va, growth)? };
        let access = t.elapsed().as_secs_f64() * 1e6;
        println!(
            "{label:<40} create {created:>9.1} us, map {mapped:>8.1} us, access {access:>8.1} us ({} chunks)",
            made.len()
        );
        let mut at = 0;
        for (c, size) in made {
            unsafe {
                vm.unmap(va.offset(at), size)?;
                vm.release_chunk(c, size)?;
            }
            at += size;
        }
        unsafe { vm.free_address(va, growth)? };
    }
    let t = Instant::now();
    let made: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..25)
                        .map(|_| vm.create_chunk(10 * page))
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a creating thread panicked"))
            .collect::<Result<Vec<_>, _>>()
    })?;
    println!(
        "{:<40} create {:>9.1} us",
        "2 GiB of 20 MiB pages from four threads",
        t.elapsed().as_secs_f64() * 1e6
    );
    for c in made.into_iter().flatten() {
        unsafe { vm.release_chunk(c, 10 * page)? };
    }

    let s = dev.create_stream()?;
    time("cuStreamSynchronize (idle stream)", 10000, &mut |_| {
        Ok(dev.synchronize_stream(s)?)
    })?;
    let e = dev.create_event()?;
    time("cuEventRecord", 10000, &mut |_| Ok(dev.record_event(e, s)?))?;
    time("cuEventQuery (complete)", 10000, &mut |_| {
        Ok(dev.query_event(e).map(|_| ())?)
    })?;
    dev.destroy_event(e)?;
    Ok(())
}
