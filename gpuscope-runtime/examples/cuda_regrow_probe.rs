//! Times what a second allocator in the same process pays to grow after the first gave
//! all its memory back, call by call: reserving address space (the device's capacity,
//! as each arena does), creating, mapping and making accessible `CHUNKS` chunks of
//! `CHUNK_MIB` MiB, then unmapping, releasing and freeing it all; several rounds in one
//! process. Prints a reason and exits 0 where there is no GPU.
//!
//! `cargo run --release -p gpuscope-runtime --example cuda_regrow_probe [CHUNKS] [CHUNK_MIB] [ROUNDS]`

use std::time::Instant;

use gpuscope_runtime::backend::cuda::{CudaBackend, unavailable_reason};
use gpuscope_runtime::backend::{Backend, DeviceAddr, PhysHandle};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Some(reason) = unavailable_reason() {
        println!("skipped: {reason}");
        return Ok(());
    }
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let (chunks, chunk_mib, rounds) = (arg(1, 100), arg(2, 64), arg(3, 4));
    let dev = CudaBackend::new(0)?;
    let vm = dev
        .virtual_memory()
        .ok_or("this GPU has no virtual memory management")?;
    let capacity = dev.mem_info()?.total.div_ceil(vm.granularity()) * vm.granularity();
    let size = chunk_mib << 20;
    println!(
        "device: {}, {chunks} chunks of {chunk_mib} MiB, address space {} GiB per arena",
        dev.name(),
        capacity >> 30
    );
    println!(
        "round | reserve x2 (ms) | create (ms) | map (ms) | set access (ms) | unmap+release+free (ms)"
    );
    for round in 0..rounds {
        let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let va: Vec<DeviceAddr> = (0..2)
            .map(|_| vm.reserve_address(capacity))
            .collect::<Result<_, _>>()?;
        let reserve = ms(t);
        let (mut create, mut map, mut access) = (0.0, 0.0, 0.0);
        let mut handles: Vec<PhysHandle> = Vec::with_capacity(chunks);
        for i in 0..chunks {
            let t = Instant::now();
            handles.push(vm.create_chunk(size)?);
            create += ms(t);
            let t = Instant::now();
            // SAFETY: a fresh part of the reservation, a fresh chunk.
            unsafe { vm.map(va[0].offset(i * size), size, handles[i])? };
            map += ms(t);
            let t = Instant::now();
            // SAFETY: mapped just above.
            unsafe { vm.set_access(va[0].offset(i * size), size)? };
            access += ms(t);
        }
        let t = Instant::now();
        for (i, h) in handles.into_iter().enumerate() {
            // SAFETY: mapped above, nothing uses it.
            unsafe {
                vm.unmap(va[0].offset(i * size), size)?;
                vm.release_chunk(h, size)?;
            }
        }
        for base in va {
            // SAFETY: nothing is mapped there any more.
            unsafe { vm.free_address(base, capacity)? };
        }
        let release = ms(t);
        println!("{round} | {reserve:.2} | {create:.2} | {map:.2} | {access:.2} | {release:.2}");
    }
    Ok(())
}
