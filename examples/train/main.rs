//! Trains an MLP classifier on data it generates (ten Gaussian blobs in the plane,
//! seeded: nothing is downloaded) and shows what gpuscope sees of its memory:
//!
//! - each training step runs in a `#[gpu_scope]`: a tensor that outlives a step is
//!   reported with the line that made it (`--leaks deny`: the program fails);
//! - evaluation runs under `#[no_grad]`: no graph, a lower peak;
//! - a progress bar with loss and accuracy, and a memory line per epoch (allocated,
//!   reserved, peak, from the allocator's statistics);
//! - at the end: the allocator's summary, the leak report (live tensors that are not the
//!   model's parameters or the optimizer's state), and a timeline of memory: an SVG of
//!   allocated and reserved memory after every step, or, for a `.html` path, gpuscope's
//!   memory viewer page (every allocation of the run by the line that made it, the
//!   segment map, live and leaked tensors; `gpuscope::memory`).
//!
//! ```text
//! cargo run --release --example train                       # CUDA when there is a GPU, else the host
//! cargo run --release --example train -- --device host --epochs 4 --timeline mem.svg
//! cargo run --release --example train -- --epochs 2 --timeline memory.html   # the viewer page
//! cargo run --release --example train -- --find-batch-size   # largest batch that fits
//! cargo run --release --example train -- --inject-leak --leaks deny   # see a leak fail the run
//! ```

#[path = "../common/main_with_errors.rs"]
mod main_with_errors;
#[path = "../common/paired_ab.rs"]
mod paired_ab;
#[path = "../common/svg_chart.rs"]
mod svg_chart;

mod data;
mod timeline;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use gpuscope::optim::{AdamW, Optimizer, fit_batch_size};
use gpuscope::scope::{self, LeakPolicy};
use gpuscope::tensor::Generator;
use gpuscope::{Device, Tensor, TensorError, format_bytes, gpu_scope, memory, no_grad};
use indicatif::{ProgressBar, ProgressStyle};

use data::{CLASSES, Dataset, Mlp, correct, shuffled};
use timeline::{Sample, sample, write_timeline};

#[derive(Parser, Debug)]
#[command(about = "Train an MLP on generated data and report its GPU memory")]
struct Args {
    /// Passes over the training set.
    #[arg(long, default_value_t = 8)]
    epochs: usize,
    /// Samples per training step.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// `host` or `cuda` (default: CUDA when a GPU is present, else the host).
    #[arg(long)]
    device: Option<DeviceChoice>,
    /// Where to write the memory timeline: an SVG chart, or with a `.html` path the
    /// memory viewer page (the run's allocation history and the final snapshot).
    #[arg(long, default_value = "gpuscope-timeline.svg")]
    timeline: PathBuf,
    /// What a tensor leaked from a training step does: warn, deny (fail the run), allow.
    #[arg(long, default_value = "warn")]
    leaks: Leaks,
    /// Find the largest batch size whose step fits (under --memory-limit-mib, 8 MiB by
    /// default on the host), then train with it.
    #[arg(long)]
    find_batch_size: bool,
    /// Cap the allocator's reserved memory (MiB).
    #[arg(long)]
    memory_limit_mib: Option<usize>,
    /// Width of the two hidden layers.
    #[arg(long, default_value_t = 256)]
    hidden: usize,
    /// Training samples (the test set is a fifth of it).
    #[arg(long, default_value_t = 10_000)]
    samples: usize,
    /// Seed of the data, the initialisation and the shuffles.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Keep one activation per epoch in a Vec, to see the leak report at work.
    #[arg(long)]
    inject_leak: bool,
    /// Turn tensor tracking off (no creation sites, no leak reports), to measure what
    /// tracking costs.
    #[arg(long)]
    no_tracking: bool,
    /// After training, measure what tracking costs a step: this many paired rounds of
    /// `--ab-steps` steps with tracking on and off, back to back (the order alternating).
    #[arg(long, default_value_t = 0)]
    tracking_ab: usize,
    /// Steps in each half of a `--tracking-ab` round.
    #[arg(long, default_value_t = 20)]
    ab_steps: usize,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum DeviceChoice {
    Host,
    Cuda,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Leaks {
    Warn,
    Deny,
    Allow,
}

/// One optimisation step. Everything it makes dies inside, except the gradients'
/// and the optimizer's state, which autograd and the optimizer adopt on purpose.
#[gpu_scope]
fn train_step(
    model: &Mlp,
    opt: &mut AdamW,
    x: &Tensor,
    y: &Tensor,
    leak_into: Option<&mut Vec<Tensor>>,
) -> Result<(f64, usize), TensorError> {
    let logits = model.forward(x)?;
    let loss = logits.cross_entropy(y)?;
    loss.backward()?;
    opt.step()?;
    opt.zero_grad();
    let hits = correct(&logits, y)?;
    if let Some(sink) = leak_into {
        sink.push(logits.detach()); // outlives the scope: reported with this line
    }
    Ok((loss.item()?, hits))
}

/// Loss and accuracy on `data`, in batches, without recording a graph.
#[no_grad]
fn evaluate(
    model: &Mlp,
    data: &Dataset,
    batch: usize,
    dev: &Device,
) -> Result<(f64, f64), TensorError> {
    let (mut loss, mut hits) = (0.0, 0);
    let idx: Vec<usize> = (0..data.len()).collect();
    for chunk in idx.chunks(batch) {
        let (x, y) = data.batch(chunk, dev)?;
        let logits = model.forward(&x)?;
        loss += logits.cross_entropy(&y)?.item()? * chunk.len() as f64;
        hits += correct(&logits, &y)?;
    }
    Ok((loss / data.len() as f64, hits as f64 / data.len() as f64))
}

fn open_device(choice: Option<DeviceChoice>) -> Result<(Device, String), String> {
    match choice {
        Some(DeviceChoice::Host) => Device::host()
            .map(|d| (d, "as asked".into()))
            .map_err(|e| e.to_string()),
        Some(DeviceChoice::Cuda) => Device::cuda(0)
            .map(|d| (d, "as asked".into()))
            .map_err(|e| e.to_string()),
        None => match Device::cuda(0) {
            Ok(d) => Ok((d, "a GPU is present".into())),
            Err(e) => Device::host()
                .map(|d| (d, format!("no GPU: {e}")))
                .map_err(|e| e.to_string()),
        },
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    main_with_errors::main_with_errors(|| run(&args))
}

fn run(args: &Args) -> Result<ExitCode, String> {
    // Scopes track tensors only with tracking on (the default in debug builds only).
    scope::set_tracking(!args.no_tracking);
    scope::set_leak_policy(match args.leaks {
        Leaks::Warn => LeakPolicy::Warn,
        Leaks::Deny => LeakPolicy::Deny,
        Leaks::Allow => LeakPolicy::Allow,
    });
    let (dev, why) = open_device(args.device)?;
    println!("device: {} ({why})", dev.description());
    let limit = args
        .memory_limit_mib
        .map(|m| m << 20)
        .or(
            (args.find_batch_size && dev.kind() == gpuscope::backend::DeviceKind::Host)
                .then_some(8 << 20),
        );
    if let Some(bytes) = limit {
        dev.allocator().set_memory_limit(Some(bytes));
        println!("memory cap: {}", format_bytes(bytes));
    }
    let viewer_page = args.timeline.extension().is_some_and(|e| e == "html");
    if viewer_page {
        // Every allocation of the run, with the line that made it (bounded).
        memory::record_history(&dev, 2_000_000);
    }

    let mut g = Generator::new(args.seed);
    let train = Dataset::blobs(args.samples, &mut g);
    let test = Dataset::blobs(args.samples / 5, &mut g);
    let model = Mlp::new(args.hidden, &dev, &mut g).map_err(|e| e.to_string())?;
    let mut opt = AdamW::new(model.params.clone(), 3e-3);
    println!(
        "data: {} training / {} test samples, {CLASSES} Gaussian blobs; model: MLP 2-{h}-{h}-{CLASSES}, {} of parameters",
        train.len(),
        test.len(),
        format_bytes(model.bytes()),
        h = args.hidden
    );

    let mut batch_size = args.batch_size.max(1);
    if args.find_batch_size {
        batch_size = find_batch_size(&model, &mut opt, &train, &dev)?;
    }

    let steps_per_epoch = train.len().div_ceil(batch_size);
    let mut timeline: Vec<Sample> = vec![sample(&dev)];
    let mut leaked: Vec<Tensor> = Vec::new();
    let (mut train_time, mut eval_time) = (Duration::ZERO, Duration::ZERO);
    // Steps after the first epoch (kernels compiled, caches warm): the figure to compare.
    let (mut warm_time, mut warm_steps) = (Duration::ZERO, 0usize);
    for epoch in 1..=args.epochs {
        let bar = ProgressBar::new(steps_per_epoch as u64);
        bar.set_style(
            ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg}")
                .map_err(|e| e.to_string())?
                .progress_chars("=> "),
        );
        bar.set_prefix(format!("{epoch}/{}", args.epochs));
        let order = shuffled(train.len(), &mut g);
        let (mut loss_sum, mut hits, mut seen, mut train_peak) = (0.0, 0usize, 0usize, 0i64);
        for (i, chunk) in order.chunks(batch_size).enumerate() {
            let t0 = Instant::now();
            let (x, y) = train.batch(chunk, &dev).map_err(|e| e.to_string())?;
            let sink = (args.inject_leak && i == 0).then_some(&mut leaked);
            let (loss, h) =
                train_step(&model, &mut opt, &x, &y, sink).map_err(|e| e.to_string())?;
            drop((x, y));
            let took = t0.elapsed();
            train_time += took;
            if epoch > 1 {
                warm_time += took;
                warm_steps += 1;
            }
            loss_sum += loss * chunk.len() as f64;
            hits += h;
            seen += chunk.len();
            let s = sample(&dev);
            train_peak = train_peak.max(s.peak);
            timeline.push(s);
            bar.set_message(format!(
                "loss {:.4} acc {:.1}%",
                loss_sum / seen as f64,
                100.0 * hits as f64 / seen as f64
            ));
            bar.inc(1);
        }
        bar.finish_and_clear();
        let t0 = Instant::now();
        let (test_loss, test_acc) =
            evaluate(&model, &test, batch_size, &dev).map_err(|e| e.to_string())?;
        eval_time += t0.elapsed();
        let st = dev.allocator().stats();
        dev.allocator().reset_peak_stats();
        println!(
            "epoch {epoch}/{}: loss {:.4}, train acc {:.1}%, test loss {test_loss:.4}, test acc {:.1}% | allocated {}, reserved {}, peak {} (training), {} (evaluation, no_grad)",
            args.epochs,
            loss_sum / seen as f64,
            100.0 * hits as f64 / seen as f64,
            100.0 * test_acc,
            format_bytes(st.allocated_bytes.all.current as usize),
            format_bytes(st.reserved_bytes.all.current as usize),
            format_bytes(train_peak as usize),
            format_bytes(st.allocated_bytes.all.peak as usize),
        );
    }
    let steps = args.epochs * steps_per_epoch;
    println!(
        "trained {steps} steps of batch {batch_size} in {:.2} s ({:.2} ms a step, batch upload and loss read-back included); evaluation {:.2} s",
        train_time.as_secs_f64(),
        1e3 * train_time.as_secs_f64() / steps.max(1) as f64,
        eval_time.as_secs_f64()
    );
    if warm_steps > 0 {
        println!(
            "warm steps (epochs 2-{}): {:.3} ms a step",
            args.epochs,
            1e3 * warm_time.as_secs_f64() / warm_steps as f64
        );
    }

    if args.tracking_ab > 0 {
        tracking_ab(args, &model, &mut opt, &train, batch_size, &dev, &mut g)?;
        scope::set_tracking(!args.no_tracking);
    }

    println!("\n{}", dev.allocator().memory_summary());

    // The leak report: live tensors that are neither parameters nor optimizer state.
    let mut owned: HashSet<u64> = HashSet::new();
    let mut note = |t: &Tensor| {
        if let Some(r) = t.track_record() {
            owned.insert(r.id());
        }
    };
    model.params.iter().for_each(&mut note);
    for (m, v) in opt.moments().iter().flatten() {
        note(m);
        note(v);
    }
    let live = gpuscope::report_live();
    let extra: Vec<_> = live
        .iter()
        .filter(|l| !owned.contains(&l.record.id()))
        .collect();
    println!(
        "leak report: {} live tracked tensor(s): {} model parameter(s) and optimizer state, {} other",
        live.len(),
        live.len() - extra.len(),
        extra.len()
    );
    for l in &extra {
        println!("  - {l}");
    }

    if viewer_page {
        let snapshot = memory::snapshot(&dev);
        memory::viewer::write_page(&snapshot, &args.timeline, "gpuscope: train example")
            .map_err(|e| format!("{}: {e}", args.timeline.display()))?;
        println!(
            "memory viewer: {} ({} events, {} blocks)",
            args.timeline.display(),
            snapshot.history.as_ref().map_or(0, |h| h.events.len()),
            snapshot.blocks().count()
        );
    } else {
        write_timeline(
            &args.timeline,
            &timeline,
            steps_per_epoch,
            &dev.description(),
        )
        .map_err(|e| format!("{}: {e}", args.timeline.display()))?;
        println!(
            "memory timeline: {} ({} samples)",
            args.timeline.display(),
            timeline.len()
        );
    }
    drop(leaked);

    if matches!(args.leaks, Leaks::Deny) && !extra.is_empty() {
        eprintln!("error: {} tensor(s) leaked (--leaks deny)", extra.len());
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// What tracking costs a training step, end to end: `--tracking-ab` paired rounds, each
/// timing `--ab-steps` steps with tracking off and as many with it on, back to back (the
/// order alternating between rounds, so that drift on the machine cancels). Prints the
/// median over the rounds of the difference, and its quartiles.
fn tracking_ab(
    args: &Args,
    model: &Mlp,
    opt: &mut AdamW,
    train: &Dataset,
    batch_size: usize,
    dev: &Device,
    g: &mut Generator,
) -> Result<(), String> {
    let order = shuffled(train.len(), g);
    let batches: Vec<&[usize]> = order.chunks(batch_size).collect();
    let mut next = 0usize;
    let ab = paired_ab::paired_rounds(args.tracking_ab, |on| {
        scope::set_tracking(on);
        let t0 = Instant::now();
        for _ in 0..args.ab_steps {
            let chunk = batches[next % batches.len()];
            next += 1;
            let (x, y) = train.batch(chunk, dev).map_err(|e| e.to_string())?;
            train_step(model, opt, &x, &y, None).map_err(|e| e.to_string())?;
        }
        Ok(t0.elapsed().as_secs_f64() / args.ab_steps.max(1) as f64)
    })?;
    println!(
        "{}",
        ab.report(args.tracking_ab, args.ab_steps, batch_size, 4)
    );
    Ok(())
}

/// The largest batch whose step (forward, backward) fits, by trying sizes and catching
/// the allocator's out-of-memory error. The optimizer's state is made first (one step
/// at batch 1): its in-place update allocates nothing more at any batch size.
fn find_batch_size(
    model: &Mlp,
    opt: &mut AdamW,
    train: &Dataset,
    dev: &Device,
) -> Result<usize, String> {
    let (x, y) = train.batch(&[0], dev).map_err(|e| e.to_string())?;
    train_step(model, opt, &x, &y, None).map_err(|e| e.to_string())?;
    drop((x, y));
    let max = 1 << 20;
    let fit = fit_batch_size(max, |b| {
        let idx: Vec<usize> = (0..b).map(|i| i % train.len()).collect();
        let r = (|| {
            let (x, y) = train.batch(&idx, dev)?;
            model.forward(&x)?.cross_entropy(&y)?.backward()
        })();
        opt.zero_grad(); // a failed try may have left gradients on some parameters
        r
    })
    .map_err(|e| e.to_string())?;
    println!("batch size search (✗: out of memory): {fit}");
    println!("largest batch that fits: {}", fit.batch_size);
    Ok(fit.batch_size)
}
