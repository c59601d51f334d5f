//! All-reduce bus bandwidth through gpuscope's NCCL path (`ProcessGroup`), for comparing
//! with NCCL's own numbers through PyTorch (`bench/dist/torch_allreduce.py`) in the same
//! device call.
//!
//! One process per GPU (under `torchrun --nproc_per_node=N --no-python`, or any launcher
//! that sets `RANK`/`WORLD_SIZE`/...), or, without those variables, one process driving
//! every visible GPU (`--local`). Prints one JSON line per size on rank 0:
//! `{"bytes":..,"ms":..,"algbw_gbs":..,"busbw_gbs":..,"registered":..}`.
//!
//! ```text
//! torchrun --nproc_per_node=2 --no-python target/release/examples/allreduce_bench --sizes-mib 1,256,1024
//! ```

use std::time::{Duration, Instant};

use gpuscope_runtime::dist::{ProcessGroup, ReduceOp};
use gpuscope_runtime::{Device, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let sizes: Vec<usize> = value("--sizes-mib")
        .unwrap_or_else(|| "1,256,1024".into())
        .split(',')
        .map(|s| s.trim().parse::<usize>().map(|m| m << 20))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--sizes-mib takes MiB numbers separated by commas: {e}"))?;
    let iters: usize = value("--iters").map_or(Ok(20), |s| s.parse())?;
    let register = args.iter().any(|a| a == "--register");
    let group = if std::env::var_os("RANK").is_some() {
        ProcessGroup::from_env()?
    } else {
        let n = cudarc::driver::result::init()
            .and_then(|_| cudarc::driver::result::device::get_count())
            .map_err(|e| format!("no CUDA devices: {e:?}"))? as usize;
        let devs: Vec<Device> = (0..n).map(Device::cuda).collect::<Result<_, _>>()?;
        ProcessGroup::local(&devs, Duration::from_secs(120))?
    };
    let devs = group.devices();
    let world = group.world_size() as f64;
    for bytes in sizes {
        let n = bytes / 4;
        let tensors: Vec<Tensor> = devs
            .iter()
            .map(|d| Tensor::ones(&[n], d))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&Tensor> = tensors.iter().collect();
        let _handles = if register {
            Some(group.register(&refs)?)
        } else {
            None
        };
        for _ in 0..3 {
            group.all_reduce(&refs, ReduceOp::Sum)?.synchronize()?;
        }
        let start = Instant::now();
        let mut last = None;
        for _ in 0..iters {
            last = Some(group.all_reduce(&refs, ReduceOp::Sum)?);
        }
        if let Some(w) = last {
            w.synchronize()?;
        }
        let secs = start.elapsed().as_secs_f64() / iters as f64;
        let algbw = bytes as f64 / secs / 1e9;
        let busbw = algbw * 2.0 * (world - 1.0) / world;
        if group.rank() == 0 {
            println!(
                "{{\"impl\":\"gpuscope\",\"mode\":\"{}\",\"world\":{},\"bytes\":{},\"ms\":{:.4},\"algbw_gbs\":{:.2},\"busbw_gbs\":{:.2},\"registered\":{}}}",
                if devs.len() > 1 {
                    "one process"
                } else {
                    "process per GPU"
                },
                group.world_size(),
                bytes,
                secs * 1e3,
                algbw,
                busbw,
                register
            );
        }
    }
    Ok(())
}
