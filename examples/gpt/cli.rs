//! The example's command line: the reference script's flags and defaults, and gpuscope's
//! own; every value checked before anything runs.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use gpuscope::MatmulPrecision;

use crate::model::Config;

#[derive(Parser, Debug)]
#[command(about = "Train the GPT of bench/torch_gpt.py and report its step time and GPU memory")]
pub struct Args {
    /// Transformer blocks.
    #[arg(long, default_value_t = 6)]
    pub layers: usize,
    /// Attention heads (must divide --embd).
    #[arg(long, default_value_t = 8)]
    pub heads: usize,
    /// Embedding width.
    #[arg(long, default_value_t = 512)]
    pub embd: usize,
    /// Sequence length (and the number of learned positions).
    #[arg(long, default_value_t = 256)]
    pub block: usize,
    /// Vocabulary size (tokens of the Markov chain).
    #[arg(long, default_value_t = 512)]
    pub vocab: usize,
    /// Sequences per step.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Training steps.
    #[arg(long, default_value_t = 300)]
    pub steps: usize,
    /// Steps left out of the step time (compilation, caches warming).
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// AdamW's learning rate (weight decay 0.1, as the reference).
    #[arg(long, default_value_t = 3e-4)]
    pub lr: f64,
    /// Seed of the chain (the tokens use seed + 1), the initialisation and the batches.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// `host` or `cuda` (default: CUDA when a GPU is present, else the host).
    #[arg(long)]
    pub device: Option<DeviceChoice>,
    /// Accepted for the reference's command lines (bf16 autocast there): this example
    /// has no autocast; it runs its f32 matrix products on tensor cores at reduced
    /// precision instead (`--matmul-precision medium`, TF32 on CUDA as in PyTorch),
    /// and activations, gradients and optimizer state stay f32 (the JSON line says
    /// `"bf16": false`).
    #[arg(long)]
    pub bf16: bool,
    /// How precise f32 matrix products must be (`torch.set_float32_matmul_precision`):
    /// highest (f32), high (TF32 tensor cores) or medium (bf16 allowed; TF32 on CUDA, as
    /// in PyTorch); default highest, medium with --bf16.
    #[arg(long)]
    pub matmul_precision: Option<MatmulPrecision>,
    /// As the reference's fused attention keeps no attention matrix for backward, each
    /// block keeps only q, k and v and computes the matrix again in backward
    /// (`Tensor::causal_attention_recomputed`): less memory, one more product and
    /// softmax per block. Attention is one node either way (strided-batched GEMMs and a
    /// masked softmax kernel).
    #[arg(long)]
    pub sdpa: bool,
    /// Accepted for the reference's command lines (`torch.compile` there): this example
    /// has no compiler and runs the step eagerly, as its JSON line's `impl` says.
    #[arg(long)]
    pub compile: bool,
    /// Train on this token file (u16 little-endian, as `torch_gpt.py --write-data`
    /// writes it) instead of sampling the chain.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Also write the tokens trained on to this file (u16 little-endian).
    #[arg(long)]
    pub write_data: Option<PathBuf>,
    /// Activation checkpointing: each block keeps only its input and runs again during
    /// backward().
    #[arg(long)]
    pub checkpoint: bool,
    /// What a tensor leaked from a training step does: warn, deny (fail the run), allow.
    #[arg(long, default_value = "warn")]
    pub leaks: Leaks,
    /// After training, write the memory timeline of --timeline-steps more steps here:
    /// an SVG, or with a `.html` path the memory viewer's page (allocation history by
    /// line, segment map); the points are also printed as a table.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Record every allocation and free of the run from before the model is built and
    /// write them here as an allocation trace (`op,id,size,stream`, what `gpuscope
    /// replay` and `bench/compare_torch.sh` replay); use with few --steps.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Steps the timeline covers.
    #[arg(long, default_value_t = 2)]
    pub timeline_steps: usize,
    /// Find the largest batch whose step fits (under --memory-limit-mib when given),
    /// then train with it.
    #[arg(long)]
    pub find_batch_size: bool,
    /// Cap the allocator's reserved memory (MiB).
    #[arg(long)]
    pub memory_limit_mib: Option<usize>,
    /// After training, measure what tracking costs a step: this many paired rounds of
    /// --ab-steps steps with tracking on and off, back to back (order alternating).
    #[arg(long, default_value_t = 0)]
    pub tracking_ab: usize,
    /// Steps in each half of a --tracking-ab round.
    #[arg(long, default_value_t = 5)]
    pub ab_steps: usize,
    /// Turn tensor tracking off (no creation sites, no leak reports).
    #[arg(long)]
    pub no_tracking: bool,
    /// Train data-parallel on this many GPUs, one process each (the program starts
    /// them; under torchrun, leave it at 1: each process is a rank already). --batch is
    /// per GPU, as in the reference.
    #[arg(long, default_value_t = 1)]
    pub devices: usize,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DeviceChoice {
    Host,
    Cuda,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Leaks {
    Warn,
    Deny,
    Allow,
}

/// The precision of the run's matrix products: `--matmul-precision`, else medium with
/// `--bf16`, else highest; `--bf16` with another precision is an error.
pub fn matmul_precision(args: &Args) -> Result<MatmulPrecision, String> {
    match (args.bf16, args.matmul_precision) {
        (false, p) => Ok(p.unwrap_or_default()),
        (true, None | Some(MatmulPrecision::Medium)) => Ok(MatmulPrecision::Medium),
        (true, Some(p)) => Err(format!(
            "--bf16 runs matrix products at --matmul-precision medium here, not {p}: drop one of the two"
        )),
    }
}

/// Checks the flags that no type does; the error names the flag.
pub fn check_args(args: &Args) -> Result<Config, String> {
    let cfg = Config {
        layers: args.layers,
        heads: args.heads,
        embd: args.embd,
        block: args.block,
        vocab: args.vocab,
    };
    cfg.check()?;
    if args.batch == 0 {
        return Err("--batch must be at least 1".into());
    }
    if args.steps <= args.warmup {
        return Err(format!(
            "--steps {} must be more than --warmup {}: the step time is the median of the steps after the warm-up",
            args.steps, args.warmup
        ));
    }
    if !(args.lr.is_finite() && args.lr > 0.0) {
        return Err(format!("--lr must be a positive number, not {}", args.lr));
    }
    matmul_precision(args)?;
    if args.devices == 0 {
        return Err("--devices must be at least 1".into());
    }
    if args.devices > 1 && matches!(args.device, Some(DeviceChoice::Host)) {
        return Err("--devices N trains on N CUDA devices; --device host runs on one".into());
    }
    if args.devices > 1
        && (args.timeline.is_some()
            || args.trace.is_some()
            || args.tracking_ab > 0
            || args.find_batch_size)
    {
        return Err("--timeline, --trace, --tracking-ab and --find-batch-size measure one GPU: run them without --devices".into());
    }
    if args.memory_limit_mib == Some(0) {
        return Err("--memory-limit-mib must be at least 1".into());
    }
    Ok(cfg)
}
