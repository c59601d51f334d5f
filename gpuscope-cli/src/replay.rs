//! `gpuscope replay`: replays traces and prints ops, cold and warm ns/op, peak allocated,
//! peak reserved, their ratio, device allocations and the driver calls of the cold pass
//! and of the warm passes (by kind), as text or JSON lines.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::ValueEnum;
use gpuscope_runtime::alloc::DriverCalls;
use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator};
use gpuscope_runtime::backend::Backend;
use gpuscope_runtime::backend::host::HostBackend;
use gpuscope_runtime::backend::test::TestBackend;
use gpuscope_runtime::format_bytes;
use gpuscope_runtime::trace::Trace;
use gpuscope_runtime::trace::replay::{ReplayOptions, ReplayResult, replay};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// The host backend (system memory).
    Host,
    /// CUDA device 0 (fails with a reason when there is none).
    Cuda,
    /// A simulated 80 GiB device with 2 MiB virtual-memory chunks and fake addresses:
    /// the allocator's own cost and memory figures, without a GPU.
    Sim,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// Which device to replay on.
    #[arg(long, value_enum, default_value = "host")]
    backend: BackendChoice,
    /// Output format: a table, or one JSON object per trace.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Warm passes after the cold one.
    #[arg(long, default_value_t = 3)]
    warm_passes: usize,
    /// Write every block on its stream when it is allocated (and on each stream that
    /// `record_stream` names), so that on a GPU the streams are busy when the allocator
    /// asks about them, as in training; the host waits for the device after each pass.
    /// Read the memory figures and driver calls, not the timings. Not with `--backend sim`.
    #[arg(long)]
    touch: bool,
    /// Trace files (CSV: op,id,size,stream), or PyTorch snapshots (pickles of
    /// torch.cuda.memory._dump_snapshot, or the same dict as JSON: their alloc and
    /// free_requested events).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
}

fn open_backend(choice: BackendChoice) -> Result<Arc<dyn Backend>, String> {
    match choice {
        BackendChoice::Host => Ok(Arc::new(HostBackend::new())),
        BackendChoice::Sim => Ok(Arc::new(
            TestBackend::builder()
                .capacity(80 << 30)
                .virtual_memory(2 << 20)
                .build(),
        )),
        BackendChoice::Cuda => open_cuda(),
    }
}

#[cfg(feature = "cuda")]
fn open_cuda() -> Result<Arc<dyn Backend>, String> {
    gpuscope_runtime::backend::cuda::CudaBackend::new(0)
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .map_err(|e| format!("cannot replay on CUDA: {e}"))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda() -> Result<Arc<dyn Backend>, String> {
    Err("cannot replay on CUDA: built without the `cuda` feature".into())
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    // Read and validate every trace before replaying any.
    let traces: Vec<(String, Trace)> = args
        .traces
        .iter()
        .map(|p| {
            let (trace, notes) = crate::view_input::read_replay_trace(p)?;
            for note in notes {
                crate::stderr_line(format_args!(
                    "note: {}: {note}",
                    crate::view_input::shown(p)
                ));
            }
            Ok((crate::view_input::shown(p), trace))
        })
        .collect::<Result<_, String>>()?;
    if args.touch && args.backend == BackendChoice::Sim {
        return Err(
            "--touch writes every block, and the simulated device has no memory to \
                    write: use --backend cuda (or host), or drop --touch"
                .into(),
        );
    }
    let config = AllocConfig::from_env().map_err(|e| e.to_string())?;
    let backend = open_backend(args.backend)?;
    let options = ReplayOptions {
        warm_passes: args.warm_passes,
        touch: args.touch,
    };
    // Every line goes through one handle, so that a reader that stops (`| head`) ends the
    // command with an error rather than a panic.
    let mut out = std::io::stdout().lock();
    if args.format == Format::Text {
        let segments = if config.expandable_segments && backend.virtual_memory().is_some() {
            if config.share_across_streams {
                "virtual memory (chunks mapped at the top of arenas every stream shares)"
            } else {
                "virtual memory (chunks mapped at the top of per-stream arenas)"
            }
        } else {
            "plain device allocations"
        };
        writeln!(
            out,
            "backend: {} ({}), segments: {segments}, config: {config}{}",
            backend.kind(),
            backend.name(),
            if args.touch {
                ", every block written on its stream (--touch)"
            } else {
                ""
            }
        )
        .map_err(crate::cannot_write)?;
    }
    for (name, trace) in &traces {
        // A fresh allocator per trace, so one trace's cache does not serve the next.
        let allocator =
            CachingAllocator::new(backend.clone(), config.clone()).map_err(|e| e.to_string())?;
        let result = replay(&allocator, trace, name, &options).map_err(|e| e.to_string())?;
        match args.format {
            Format::Text => write_text(&mut out, &result),
            Format::Json => writeln!(out, "{}", to_json(&result, args.backend, args.touch)),
        }
        .map_err(crate::cannot_write)?;
    }
    out.flush().map_err(crate::cannot_write)?;
    Ok(ExitCode::SUCCESS)
}

fn write_text(out: &mut impl Write, r: &ReplayResult) -> std::io::Result<()> {
    writeln!(out, "{}", r.trace)?;
    writeln!(out, "  ops               {:>14}", r.ops)?;
    writeln!(out, "  cold ns/op        {:>14.1}", r.cold_ns_per_op)?;
    writeln!(out, "  warm ns/op        {:>14.1}", r.warm_ns_per_op)?;
    writeln!(
        out,
        "  peak allocated    {:>14}  ({})",
        r.peak_allocated,
        format_bytes(r.peak_allocated)
    )?;
    writeln!(
        out,
        "  peak reserved     {:>14}  ({})",
        r.peak_reserved,
        format_bytes(r.peak_reserved)
    )?;
    writeln!(out, "  reserved/allocated{:>14.4}", r.ratio())?;
    writeln!(
        out,
        "  peak live (trace) {:>14}  ({})",
        r.peak_live,
        format_bytes(r.peak_live)
    )?;
    writeln!(out, "  device allocs     {:>14}", r.device_allocs)?;
    writeln!(out, "  device frees      {:>14}", r.device_frees)?;
    writeln!(out, "  cold pass calls   {}", r.cold_calls())?;
    let warm = r.passes.len().saturating_sub(1).max(1) as u64;
    let per_pass = r.warm_calls();
    writeln!(
        out,
        "  warm calls/pass   {}",
        per_pass
            .named()
            .iter()
            .map(|(k, v)| format!("{k} {}", *v as f64 / warm as f64))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    writeln!(
        out,
        "  warm passes alike {:>14}",
        if r.warm_passes_identical() {
            "yes"
        } else {
            "no"
        }
    )?;
    Ok(())
}

fn calls_json(c: &DriverCalls) -> serde_json::Value {
    c.named()
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn to_json(r: &ReplayResult, backend: BackendChoice, touch: bool) -> String {
    let backend = match backend {
        BackendChoice::Host => "host",
        BackendChoice::Cuda => "cuda",
        BackendChoice::Sim => "sim",
    };
    serde_json::json!({
        "trace": r.trace,
        "backend": backend,
        "touch": touch,
        "ops": r.ops,
        "cold_ns_per_op": r.cold_ns_per_op,
        "warm_ns_per_op": r.warm_ns_per_op,
        "pass_ns_per_op": r.passes.iter().map(|p| p.ns_per_op).collect::<Vec<_>>(),
        "pass_peak_reserved": r.passes.iter().map(|p| p.peak_reserved).collect::<Vec<_>>(),
        "pass_calls": r.passes.iter().map(|p| calls_json(&p.calls)).collect::<Vec<_>>(),
        "cold_calls": calls_json(&r.cold_calls()),
        "warm_calls": calls_json(&r.warm_calls()),
        "warm_passes_identical": r.warm_passes_identical(),
        "peak_allocated": r.peak_allocated,
        "peak_reserved": r.peak_reserved,
        "ratio": r.ratio(),
        "peak_live": r.peak_live,
        "device_allocs": r.device_allocs,
        "device_frees": r.device_frees,
    })
    .to_string()
}
