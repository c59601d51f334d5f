//! Trains the GPT of `bench/torch_gpt.py` (the reference) on tokens from a known Markov
//! chain, with the reference's model, data, flags and defaults, and prints the same JSON
//! summary line, so the two compare line by line. What gpuscope adds, shown on it:
//!
//! - each training step runs in a `#[gpu_scope]` (`--leaks deny`: a tensor that
//!   outlives the step fails the run, naming the line that made it);
//! - `--checkpoint`: each block keeps only its input and runs again in `backward()`;
//! - `--find-batch-size`: the largest batch whose step fits (under `--memory-limit-mib`);
//! - `--timeline mem.svg`: the memory of a few steps, point by point, with parameters,
//!   optimizer state, gradients, activations and the attention's tensors told apart by
//!   the line that made them; `--timeline mem.html`: the memory viewer's page of those
//!   steps instead (every allocation by its line, the segment map);
//! - `--tracking-ab N`: what tracking costs a step, in paired rounds;
//! - `--devices N`: data parallelism over N GPUs, one process each (or launched by
//!   `torchrun --no-python`), gradients averaged while backward runs, parameters
//!   checked identical across ranks at the end;
//! - out of memory in a step: the report names the largest live tensors by the line
//!   that made them, and nothing but the model and its optimizer state stays allocated.
//!
//! ```text
//! cargo run --release --example gpt                                  # defaults, as the reference
//! cargo run --release --example gpt -- --layers 12 --embd 768 --block 512 --batch 16
//! python3 bench/torch_gpt.py --write-data tokens.bin && cargo run --release --example gpt -- --data tokens.bin
//! cargo run --release --example gpt -- --checkpoint --timeline gpt-memory.svg
//! cargo run --release --example gpt -- --timeline gpt-memory.html              # open in a browser
//! cargo run --release --example gpt -- --device host --layers 2 --embd 64 --heads 4 --block 32 --vocab 64 --batch 8 --steps 200 --lr 3e-3
//! ```

mod cli;
mod data;
#[path = "../common/main_with_errors.rs"]
mod main_with_errors;
mod memory_tools;
mod model;
#[path = "../common/paired_ab.rs"]
mod paired_ab;
#[cfg(feature = "cuda")]
mod parallel;
#[path = "../common/svg_chart.rs"]
mod svg_chart;
mod timeline;

use std::panic::Location;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Instant;

use clap::Parser;
use gpuscope::backend::StreamId;
use gpuscope::optim::{AdamW, Optimizer};
use gpuscope::scope::{self, LeakPolicy};
use gpuscope::{Device, Tensor, TensorError, format_bytes, gpu_scope};
use indicatif::{ProgressBar, ProgressStyle};

use cli::{Args, DeviceChoice, Leaks, check_args};
use data::{Batches, MarkovChain};
use memory_tools::{
    TRACE_MAX_EVENTS, after_failed_step, find_batch_size, leak_report, memory_timeline,
    tracking_ab, write_trace,
};
use model::{Gpt, Probe};

/// The reference's AdamW weight decay.
const WEIGHT_DECAY: f64 = 0.1;

/// Where `backward()` makes its tensors (the gradients), for the timeline.
static BACKWARD_SITE: OnceLock<&'static Location<'static>> = OnceLock::new();

fn note_backward_site(at: &'static Location<'static>) {
    BACKWARD_SITE.get_or_init(|| at);
}

/// One optimisation step; returns the loss (not read here: reading it waits for the
/// GPU). Everything else it makes dies inside, except the optimizer's state, which the
/// optimizer keeps on purpose.
#[gpu_scope]
fn train_step(
    model: &Gpt,
    opt: &mut AdamW,
    x: &Tensor,
    y: &Tensor,
    checkpointed: bool,
    probe: Option<&Probe>,
    ddp: Option<&Ddp>,
) -> Result<Tensor, TensorError> {
    let loss = model.loss(x, y, checkpointed, probe)?;
    let (done, at) = (backward(&loss, ddp), Location::caller());
    note_backward_site(at);
    done?;
    if let Some(p) = probe {
        p("backward done");
    }
    opt.step()?;
    if let Some(p) = probe {
        p("optimizer step");
    }
    opt.zero_grad();
    Ok(loss.detach())
}

#[cfg(feature = "cuda")]
type Ddp = gpuscope::dist::DistributedDataParallel;
#[cfg(not(feature = "cuda"))]
type Ddp = std::convert::Infallible;

/// `loss.backward()`, or, data-parallel, with the gradients averaged across ranks.
fn backward(loss: &Tensor, ddp: Option<&Ddp>) -> Result<(), TensorError> {
    match ddp {
        None => loss.backward(),
        #[cfg(feature = "cuda")]
        Some(d) => d.backward(loss).map_err(|e| match e {
            gpuscope::dist::DistError::Tensor(t) => t,
            other => TensorError::Unsupported(format!("data-parallel backward: {other}")),
        }),
        #[cfg(not(feature = "cuda"))]
        Some(never) => match *never {},
    }
}

/// A batch's inputs `[batch, block]` and targets `[batch·block]` on `dev`.
fn upload(
    b: &mut Batches,
    batch: usize,
    block: usize,
    dev: &Device,
) -> Result<(Tensor, Tensor), TensorError> {
    let (x, y) = b.next(batch);
    Ok((
        Tensor::from_vec(x, &[batch, block], dev)?,
        Tensor::from_vec(y, &[batch * block], dev)?,
    ))
}

fn sync(dev: &Device) -> Result<(), String> {
    dev.backend()
        .synchronize_stream(StreamId::DEFAULT)
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args = Args::parse();
    main_with_errors::main_with_errors(|| run(&args))
}

fn open_device(choice: Option<DeviceChoice>) -> Result<Device, String> {
    match choice {
        Some(DeviceChoice::Host) => Device::host().map_err(|e| e.to_string()),
        Some(DeviceChoice::Cuda) => Device::cuda(0).map_err(|e| e.to_string()),
        None => Device::cuda(0)
            .or_else(|_| Device::host())
            .map_err(|e| e.to_string()),
    }
}

/// This process's rank and the job's size (0 and 1 on one GPU).
#[derive(Clone, Copy)]
struct Rank {
    rank: usize,
    world: usize,
}

fn run(args: &Args) -> Result<ExitCode, String> {
    let cfg = check_args(args)?;
    #[cfg(feature = "cuda")]
    if let Some(code) = parallel::launch_if_asked(args)? {
        return Ok(code);
    }
    scope::set_tracking(!args.no_tracking);
    scope::set_leak_policy(match args.leaks {
        Leaks::Warn => LeakPolicy::Warn,
        Leaks::Deny => LeakPolicy::Deny,
        Leaks::Allow => LeakPolicy::Allow,
    });
    #[cfg(feature = "cuda")]
    let job = parallel::launch_env()?;
    #[cfg(not(feature = "cuda"))]
    let job: Option<()> = None;
    let dev = match &job {
        #[cfg(feature = "cuda")]
        Some(env) => Device::cuda(env.local_rank).map_err(|e| e.to_string())?,
        #[allow(unreachable_patterns)]
        _ => open_device(args.device)?,
    };
    eprintln!("device: {}", dev.description());
    if args.compile {
        eprintln!("--compile: this example has no compiler; the step runs eagerly");
    }
    let precision = cli::matmul_precision(args)?;
    gpuscope::set_float32_matmul_precision(precision);
    if args.bf16 {
        eprintln!(
            "--bf16: this example has no bf16 autocast; f32 matrix products run on tensor cores at matmul precision medium (TF32 on CUDA, as PyTorch), and activations, gradients and optimizer state stay f32"
        );
    } else if precision != gpuscope::MatmulPrecision::Highest {
        eprintln!("matmul precision: {precision}");
    }
    if let Some(mib) = args.memory_limit_mib {
        dev.allocator().set_memory_limit(Some(mib << 20));
        eprintln!("memory cap: {}", format_bytes(mib << 20));
    }

    if args.trace.is_some() {
        // Before the model is built: the trace holds every allocation of the run.
        gpuscope::memory::record_history(&dev, TRACE_MAX_EVENTS);
    }

    let t0 = Instant::now();
    let (tokens, floor, source) = match &args.data {
        Some(path) => {
            let tokens =
                data::read_tokens(path, cfg.vocab, cfg.block).map_err(|e| e.to_string())?;
            let floor = data::empirical_entropy(&tokens, cfg.vocab);
            let source = format!(
                "{} ({} tokens; entropy floor estimated from its transition counts)",
                path.display(),
                tokens.len()
            );
            (tokens, floor, source)
        }
        None => {
            let chain = MarkovChain::new(cfg.vocab, args.seed);
            let tokens = chain.sample(data::TOKENS, args.seed + 1);
            data::check_tokens("the sampled chain", &tokens, cfg.vocab, cfg.block)
                .map_err(|e| e.to_string())?;
            let source = format!(
                "{} tokens of a Markov chain over {} tokens (seed {})",
                tokens.len(),
                cfg.vocab,
                args.seed
            );
            (tokens, chain.entropy, source)
        }
    };
    if let Some(path) = &args.write_data {
        data::write_tokens(path, &tokens).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    eprintln!(
        "data: {source}, entropy floor {floor:.4} nats ({:.1} s)",
        t0.elapsed().as_secs_f64()
    );

    let mut model = Gpt::new(cfg, &dev, args.seed).map_err(|e| e.to_string())?;
    model.set_recompute_attention(args.sdpa);
    #[cfg(feature = "cuda")]
    let par = match &job {
        Some(env) => Some(parallel::setup(env, &dev, &model.params())?),
        None => None,
    };
    #[cfg(feature = "cuda")]
    let (ddp, me) = match &par {
        Some(p) => (
            Some(&p.ddp),
            Rank {
                rank: p.rank(),
                world: p.world(),
            },
        ),
        None => (None, Rank { rank: 0, world: 1 }),
    };
    #[cfg(not(feature = "cuda"))]
    let (ddp, me): (Option<&Ddp>, Rank) = (None, Rank { rank: 0, world: 1 });
    if me.world > 1 {
        eprintln!(
            "data parallel: rank {} of {}, {} gradient bucket(s) averaged while backward runs",
            me.rank,
            me.world,
            ddp.map_or(0, bucket_count)
        );
    }
    let mut opt = AdamW::new(model.params(), args.lr).weight_decay(WEIGHT_DECAY);
    // The optimizer's state now, next to the parameters: a model whose state does not
    // fit fails here, and the state does not settle in the first step's activation holes.
    opt.init_state().map_err(|e| {
        format!(
            "allocating AdamW's state ({}): {e}",
            format_bytes(2 * model.numel() * 4)
        )
    })?;
    eprintln!(
        "model: {} layers, {} heads, width {}, block {}, vocabulary {}: {} parameters ({}){}",
        cfg.layers,
        cfg.heads,
        cfg.embd,
        cfg.block,
        cfg.vocab,
        model.numel(),
        format_bytes(model.numel() * 4),
        if args.checkpoint {
            ", checkpointed per block"
        } else {
            ""
        }
    );
    // Each rank its own batches, seeded as the reference seeds them.
    let mut batches = Batches::new(&tokens, cfg.block, args.seed + 100 + me.rank as u64);
    let mut batch = args.batch;
    if args.find_batch_size {
        batch = find_batch_size(&model, &mut opt, &mut batches, &dev, args.checkpoint)?;
    }

    // The training loop, timed as the reference times it.
    let bar = if me.rank == 0 {
        ProgressBar::new(args.steps as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("step {pos}/{len} [{bar:30}] {msg}")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    dev.allocator().reset_peak_stats();
    let (mut times, mut losses) = (Vec::new(), Vec::new());
    let tokens_per_step = (batch * cfg.block * me.world) as f64;
    for i in 0..args.steps {
        let (x, y) = upload(&mut batches, batch, cfg.block, &dev).map_err(|e| e.to_string())?;
        sync(&dev)?;
        let t = Instant::now();
        let step = train_step(&model, &mut opt, &x, &y, args.checkpoint, None, ddp);
        let loss = match step {
            Ok(loss) => loss,
            Err(e) => {
                bar.abandon();
                drop((x, y));
                return Err(after_failed_step(e, &model, &mut opt, &dev));
            }
        };
        sync(&dev)?;
        let took = t.elapsed().as_secs_f64();
        if i >= args.warmup {
            times.push(took);
        }
        if i % 10 == 0 || i == args.steps - 1 {
            let l = loss.item().map_err(|e| e.to_string())?;
            losses.push(l);
            let st = dev.allocator().stats();
            bar.set_message(format!(
                "loss {l:.4} | {:.0}k tok/s | allocated {}, peak {}",
                tokens_per_step / took / 1e3,
                format_bytes(st.allocated_bytes.all.current.max(0) as usize),
                format_bytes(st.allocated_bytes.all.peak.max(0) as usize),
            ));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let st = dev.allocator().stats();
    let (peak_allocated, peak_reserved) = (
        st.allocated_bytes.all.peak.max(0) as usize,
        st.reserved_bytes.all.peak.max(0) as usize,
    );
    times.sort_by(f64::total_cmp);
    let ms = 1e3 * median(&times);
    #[cfg(feature = "cuda")]
    let identical = match &par {
        Some(p) => Some(parallel::params_identical(p, &model.params())?),
        None => None,
    };
    #[cfg(not(feature = "cuda"))]
    let identical: Option<bool> = None;
    if me.rank != 0 {
        return leak_report(args, &model, &opt, ddp);
    }
    let (first, last) = (losses[0], *losses.last().unwrap_or(&f64::NAN));
    eprintln!(
        "trained {} steps of {batch}×{}: {ms:.2} ms a step (median after {} warm-up steps), {:.0} tokens/s; loss {first:.4} → {last:.4} (floor {floor:.4}); peak allocated {}, peak reserved {} ({:.3}×)",
        args.steps,
        cfg.block,
        args.warmup,
        tokens_per_step / (ms / 1e3),
        format_bytes(peak_allocated),
        format_bytes(peak_reserved),
        peak_reserved as f64 / peak_allocated.max(1) as f64
    );
    println!(
        "{{\"impl\": \"gpuscope {} eager\", \"gpus\": {}, \"params_identical\": {}, \"params\": {}, \"bf16\": false, \"matmul_precision\": \"{}\", \"sdpa\": {}, \"checkpoint\": {}, \"layers\": {}, \"heads\": {}, \"embd\": {}, \"block\": {}, \"vocab\": {}, \"batch_per_gpu\": {batch}, \"steps\": {}, \"ms_per_step\": {:.3}, \"tokens_per_s\": {:.0}, \"peak_allocated\": {peak_allocated}, \"peak_reserved\": {peak_reserved}, \"first_loss\": {:.4}, \"last_loss\": {:.4}, \"entropy_floor\": {floor:.4}, \"data\": \"{}\", \"device\": \"{}\"}}",
        env!("CARGO_PKG_VERSION"),
        me.world,
        identical.map_or("null".to_string(), |b| b.to_string()),
        model.numel(),
        gpuscope::float32_matmul_precision(),
        args.sdpa,
        args.checkpoint,
        cfg.layers,
        cfg.heads,
        cfg.embd,
        cfg.block,
        cfg.vocab,
        args.steps,
        ms,
        tokens_per_step / (ms / 1e3),
        first,
        last,
        json_escape(&match &args.data {
            Some(p) => p.display().to_string(),
            None => "chain".into(),
        }),
        json_escape(&dev.description()),
    );

    if args.tracking_ab > 0 {
        tracking_ab(args, &model, &mut opt, &mut batches, batch, &dev)?;
        scope::set_tracking(!args.no_tracking);
    }
    if let Some(path) = &args.trace {
        write_trace(path, &dev)?;
    }
    if let Some(path) = &args.timeline {
        memory_timeline(args, path, &model, &mut opt, &mut batches, batch, &dev)?;
    }
    leak_report(args, &model, &opt, ddp)
}

#[cfg(feature = "cuda")]
fn bucket_count(d: &Ddp) -> usize {
    d.num_buckets()
}

#[cfg(not(feature = "cuda"))]
fn bucket_count(d: &Ddp) -> usize {
    match *d {}
}

#[cfg(feature = "cuda")]
fn bucket_buffers(d: &Ddp) -> Vec<&Tensor> {
    d.bucket_buffers().collect()
}

#[cfg(not(feature = "cuda"))]
fn bucket_buffers(d: &Ddp) -> Vec<&Tensor> {
    match *d {}
}

fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn json_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
