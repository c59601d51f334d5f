//! The memory tools the example shows on its model, beside training: what is left after
//! a failed step, the largest batch that fits, what tracking costs a step (paired rounds),
//! the memory timeline or viewer page of a few steps, the run's allocation trace, and
//! the leak report at the end.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use gpuscope::optim::{AdamW, Optimizer, fit_batch_size};
use gpuscope::scope;
use gpuscope::{Device, Tensor, TensorError, format_bytes};

use crate::cli::{Args, Leaks};
use crate::data::Batches;
use crate::model::{self, Gpt, Probe};
use crate::timeline::{self, Classifier, Recorder};
use crate::{BACKWARD_SITE, Ddp, bucket_buffers, paired_ab, sync, train_step, upload};

/// After a step failed: its tensors are gone (dropped as the error went up); the
/// gradients some parameters got are cleared. Says what is left allocated: the model and
/// the optimizer's state, nothing else.
pub fn after_failed_step(e: TensorError, model: &Gpt, opt: &mut AdamW, dev: &Device) -> String {
    opt.zero_grad();
    let params: usize = model.params().iter().map(Tensor::nbytes).sum();
    let state: usize = opt
        .moments()
        .iter()
        .flatten()
        .map(|(m, v)| m.nbytes() + v.nbytes())
        .sum();
    let allocated = dev.allocator().stats().allocated_bytes.all.current.max(0) as usize;
    let what = if e.is_out_of_memory() {
        "out of memory in a training step"
    } else {
        "a training step failed"
    };
    format!(
        "{what}: {e}\nafter the error: {} allocated = parameters {} + optimizer state {} + {} other{}",
        format_bytes(allocated),
        format_bytes(params),
        format_bytes(state),
        format_bytes(allocated.saturating_sub(params + state)),
        if e.is_out_of_memory() {
            "; lower --batch (or --block), use --checkpoint, or --find-batch-size"
        } else {
            ""
        }
    )
}

/// The largest batch whose step fits, by trying sizes and catching the allocator's
/// out-of-memory error. One step at batch 1 runs first, so that what only the first step
/// makes is there before sizes are tried.
pub fn find_batch_size(
    model: &Gpt,
    opt: &mut AdamW,
    batches: &mut Batches,
    dev: &Device,
    checkpointed: bool,
) -> Result<usize, String> {
    let block = model.cfg.block;
    let (x, y) = upload(batches, 1, block, dev).map_err(|e| e.to_string())?;
    train_step(model, opt, &x, &y, checkpointed, None, None).map_err(|e| e.to_string())?;
    drop((x, y));
    let fit = fit_batch_size(1 << 16, |b| {
        let r = (|| {
            let (x, y) = upload(batches, b, block, dev)?;
            model.loss(&x, &y, checkpointed, None)?.backward()?;
            sync(dev).map_err(TensorError::Unsupported)
        })();
        opt.zero_grad(); // a failed try may have left gradients on some parameters
        r
    })
    .map_err(|e| e.to_string())?;
    eprintln!("batch size search (✗: out of memory): {fit}");
    eprintln!("largest batch that fits: {}", fit.batch_size);
    Ok(fit.batch_size)
}

/// What tracking costs a step: paired rounds, each timing --ab-steps steps with tracking
/// off and as many with it on, back to back, the order alternating.
pub fn tracking_ab(
    args: &Args,
    model: &Gpt,
    opt: &mut AdamW,
    batches: &mut Batches,
    batch: usize,
    dev: &Device,
) -> Result<(), String> {
    let block = model.cfg.block;
    let ab = paired_ab::paired_rounds(args.tracking_ab, |on| {
        scope::set_tracking(on);
        sync(dev)?;
        let t0 = Instant::now();
        for _ in 0..args.ab_steps {
            let (x, y) = upload(batches, batch, block, dev).map_err(|e| e.to_string())?;
            train_step(model, opt, &x, &y, args.checkpoint, None, None)
                .map_err(|e| e.to_string())?;
        }
        sync(dev)?;
        Ok(t0.elapsed().as_secs_f64() / args.ab_steps.max(1) as f64)
    })?;
    println!("{}", ab.report(args.tracking_ab, args.ab_steps, batch, 3));
    Ok(())
}

/// Runs --timeline-steps steps sampling memory at each point, prints the points and
/// writes the SVG; with a `.html` path, also records the steps' allocation history and
/// writes the memory viewer's page instead (every allocation by the line that made it,
/// the segment map at the end).
pub fn memory_timeline(
    args: &Args,
    path: &Path,
    model: &Gpt,
    opt: &mut AdamW,
    batches: &mut Batches,
    batch: usize,
    dev: &Device,
) -> Result<(), String> {
    scope::set_tracking(true);
    let params = model.params();
    let classifier = Classifier {
        params: timeline::ids(&params),
        param_tensors: params.clone(),
        moments: Default::default(),
        backward_site: None,
        attention_site: None,
    };
    let recorder = Recorder::new(dev, classifier);
    let viewer_page = path.extension().is_some_and(|e| e == "html");
    if viewer_page {
        gpuscope::memory::record_history(dev, 2_000_000);
    }
    for s in 0..args.timeline_steps.max(1) {
        {
            let mut c = recorder
                .classifier
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            c.moments = timeline::ids(opt.moments().iter().flatten().flat_map(|(m, v)| [m, v]));
            c.backward_site = BACKWARD_SITE.get().map(|l| (l.file(), l.line()));
            c.attention_site = model::ATTENTION_SITE.get().map(|l| (l.file(), l.line()));
        }
        let (x, y) = upload(batches, batch, model.cfg.block, dev).map_err(|e| e.to_string())?;
        recorder.sample(&format!("step {s}: start"));
        let r = recorder.clone();
        let probe: Probe = Arc::new(move |label: &str| r.sample(label));
        train_step(model, opt, &x, &y, args.checkpoint, Some(&probe), None)
            .map_err(|e| e.to_string())?;
    }
    recorder.sample("after the last step");
    let samples = recorder
        .samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    println!(
        "memory timeline ({} points):\n{}",
        samples.len(),
        timeline::table(&samples)
    );
    let title = format!(
        "GPT memory, {} steps{}, {}",
        args.timeline_steps.max(1),
        if args.checkpoint {
            " (checkpointed)"
        } else {
            ""
        },
        dev.description()
    );
    if viewer_page {
        let snapshot = gpuscope::memory::snapshot(dev);
        gpuscope::memory::record_history(dev, 0);
        gpuscope::memory::viewer::write_page(&snapshot, path, &title)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        println!(
            "memory viewer: {} ({} events, {} blocks)",
            path.display(),
            snapshot.history.as_ref().map_or(0, |h| h.events.len()),
            snapshot.blocks().count()
        );
    } else {
        timeline::write_svg(path, &samples, &title)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        println!("memory timeline: {}", path.display());
    }
    scope::set_tracking(!args.no_tracking);
    Ok(())
}

/// Most events `--trace` records (about 1,700 a step at the default size).
pub const TRACE_MAX_EVENTS: usize = 4_000_000;

/// Writes the allocations and frees recorded since the start as an allocation trace.
pub fn write_trace(path: &Path, dev: &Device) -> Result<(), String> {
    let history = gpuscope::memory::history(dev).ok_or("--trace: no history was recorded")?;
    gpuscope::memory::record_history(dev, 0);
    if history.dropped > 0 {
        return Err(format!(
            "--trace: the run made more than {TRACE_MAX_EVENTS} allocations and frees and {} were dropped; trace fewer --steps",
            history.dropped
        ));
    }
    let trace = gpuscope::memory::history_trace(&history);
    trace.write(path).map_err(|e| e.to_string())?;
    println!(
        "allocation trace: {} ({} operations, {} allocations)",
        path.display(),
        trace.ops().len(),
        trace.allocations()
    );
    Ok(())
}

/// Live tracked tensors that are neither parameters nor optimizer state: leaks
/// (`--leaks deny`: the run fails).
pub fn leak_report(
    args: &Args,
    model: &Gpt,
    opt: &AdamW,
    ddp: Option<&Ddp>,
) -> Result<ExitCode, String> {
    let mut owned = timeline::ids(&model.params());
    owned.extend(timeline::ids(
        opt.moments().iter().flatten().flat_map(|(m, v)| [m, v]),
    ));
    owned.extend(timeline::ids(ddp.map(bucket_buffers).unwrap_or_default()));
    let live = gpuscope::report_live();
    let extra: Vec<_> = live
        .iter()
        .filter(|l| !owned.contains(&l.record.id()))
        .collect();
    eprintln!(
        "leak report: {} live tracked tensor(s): {} parameter(s){}, {} other",
        live.len(),
        live.len() - extra.len(),
        if ddp.is_some() {
            ", optimizer state and gradient buckets"
        } else {
            " and optimizer state"
        },
        extra.len()
    );
    for l in &extra {
        eprintln!("  - {l}");
    }
    if matches!(args.leaks, Leaks::Deny) && !extra.is_empty() {
        eprintln!("error: {} tensor(s) leaked (--leaks deny)", extra.len());
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
