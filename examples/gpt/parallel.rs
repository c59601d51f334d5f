//! `--devices N`: data parallelism, one process per GPU, as `torchrun` + DDP runs the
//! reference. Without `RANK` in the environment, `--devices N` starts N ranks of this
//! program on this machine (`gpuscope::dist::launch`); under `torchrun --no-python` (or
//! any launcher setting `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`)
//! each process is one rank already. Each rank trains on its own batches (seeded with
//! the seed plus 100 plus its rank, as the reference), gradients are averaged across ranks while backward
//! runs (`DistributedDataParallel`), and at the end the ranks compare their parameters
//! bit for bit.

use std::process::ExitCode;

use gpuscope::Tensor;
use gpuscope::dist::launch::{is_launched, launch_local};
use gpuscope::dist::{DistributedDataParallel, LaunchEnv, ProcessGroup};

use crate::cli::Args;

/// A rank's view of the job.
pub struct Parallel {
    pub group: ProcessGroup,
    pub ddp: DistributedDataParallel,
}

impl Parallel {
    pub fn rank(&self) -> usize {
        self.group.rank()
    }

    pub fn world(&self) -> usize {
        self.group.world_size()
    }
}

/// With `--devices N > 1` and not yet launched: runs the N ranks and returns their
/// outcome (`Some`); otherwise `None` (this process trains).
pub fn launch_if_asked(args: &Args) -> Result<Option<ExitCode>, String> {
    if args.devices <= 1 || is_launched() {
        return Ok(None);
    }
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let status = launch_local(args.devices, &argv).map_err(|e| e.to_string())?;
    Ok(Some(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }))
}

/// This process's launch environment, when it is a rank of a job.
pub fn launch_env() -> Result<Option<LaunchEnv>, String> {
    LaunchEnv::from_env().map_err(|e| e.to_string())
}

/// Joins the job and wraps the model's parameters (rank 0's values are broadcast).
pub fn setup(
    env: &LaunchEnv,
    dev: &gpuscope::Device,
    params: &[Tensor],
) -> Result<Parallel, String> {
    let group = ProcessGroup::init(env, dev).map_err(|e| e.to_string())?;
    let ddp = DistributedDataParallel::new(
        &group,
        params,
        gpuscope::dist::ddp::DEFAULT_BUCKET_CAP_BYTES,
    )
    .map_err(|e| e.to_string())?;
    Ok(Parallel { group, ddp })
}

/// Whether every rank holds the same parameters, bit for bit: each rank hashes its
/// parameters' bytes and the ranks gather the hashes.
pub fn params_identical(p: &Parallel, params: &[Tensor]) -> Result<bool, String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325; // FNV-1a
    for t in params {
        for x in t.to_vec::<f32>().map_err(|e| e.to_string())? {
            for b in x.to_bits().to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    let dev = &p.group.devices()[0];
    let mine = Tensor::from_vec(vec![h as i64], &[1], dev).map_err(|e| e.to_string())?;
    let all =
        Tensor::zeros_dtype(&[p.world()], gpuscope::DType::I64, dev).map_err(|e| e.to_string())?;
    p.group
        .all_gather(&[&mine], &[&all])
        .and_then(|w| w.wait())
        .map_err(|e| e.to_string())?;
    let hashes = all.to_vec::<i64>().map_err(|e| e.to_string())?;
    Ok(hashes.iter().all(|&x| x == hashes[0]))
}
