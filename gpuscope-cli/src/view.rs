//! `gpuscope view INPUT -o memory.html`: one self-contained HTML page (inline script and
//! style, nothing fetched) that shows a memory snapshot and its history: allocated
//! memory over time stacked by creating site, reserved memory, the segment map, the
//! live allocations with leaked tensors highlighted. INPUT is a gpuscope snapshot
//! (JSON), an allocation trace (CSV) or a PyTorch snapshot (pickle); see `view_input`.
//! An input of several devices (a gpuscope file of several, a PyTorch snapshot of
//! several GPUs) makes one page that shows each device, chosen at its top.
//! The page itself is `gpuscope_runtime::memory::viewer`'s.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use gpuscope_runtime::format_bytes;
use gpuscope_runtime::memory::{MemorySnapshot, viewer};

use crate::view_input::{
    DEFAULT_MAX_INPUT_MIB, InputKind, LoadOptions, ViewError, is_stdin, load, shown,
};

#[derive(clap::Args)]
pub struct Args {
    /// A gpuscope snapshot (JSON, from gpuscope::memory::write_json), an allocation
    /// trace (CSV: op,id,size,stream) or a PyTorch snapshot (pickle, from
    /// torch.cuda.memory._dump_snapshot, or the same dict written as JSON);
    /// gzip-compressed or not; `-` reads standard input.
    input: PathBuf,
    /// Where to write the page.
    #[arg(short, long, default_value = "memory.html")]
    output: PathBuf,
    /// The page's title (default: the input's file name).
    #[arg(long)]
    title: Option<String>,
    /// Sites that get a band of their own in the chart; the others share one.
    #[arg(long, default_value_t = viewer::TOP_SITES)]
    top: usize,
    /// For a PyTorch snapshot of several GPUs: show only this device (default: every
    /// device, each on its own, chosen at the page's top).
    #[arg(long)]
    device: Option<u64>,
    /// The input's kind, when its first bytes do not tell.
    #[arg(long, value_enum)]
    format: Option<InputKind>,
    /// Largest input read, in MiB.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT_MIB)]
    max_input_mib: u64,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let start = Instant::now();
    let loaded = load(
        &args.input,
        &LoadOptions {
            kind: args.format,
            max_input_mib: args.max_input_mib,
            device: args.device,
        },
    )
    .map_err(|e| e.to_string())?;
    for note in &loaded.notes {
        crate::stderr_line(format_args!("note: {}: {note}", shown(&args.input)));
    }
    let title = args.title.unwrap_or_else(|| {
        format!(
            "gpuscope memory: {}",
            match args.input.file_name() {
                Some(n) if !is_stdin(&args.input) => n.to_string_lossy().into_owned(),
                _ => shown(&args.input),
            }
        )
    });
    let html = viewer::render_all_with(&loaded.snapshots, &title, args.top.max(1));
    std::fs::write(&args.output, &html).map_err(|source| {
        ViewError::Io {
            file: args.output.display().to_string(),
            source,
        }
        .to_string()
    })?;
    let kind = match loaded.kind {
        InputKind::Gpuscope => "gpuscope snapshot",
        InputKind::Trace => "allocation trace",
        InputKind::Pytorch => "PyTorch snapshot",
    };
    let written = format!(
        "{} ({}, {:.2} s)",
        args.output.display(),
        format_bytes(html.len()),
        start.elapsed().as_secs_f64()
    );
    let mut out = std::io::stdout().lock();
    if let [snap] = &loaded.snapshots[..] {
        writeln!(
            out,
            "{} ({kind}): {} -> {written}",
            shown(&args.input),
            counts(snap)
        )
    } else {
        // One line per device, in the page's order (the first is shown first).
        writeln!(
            out,
            "{} ({kind}, {} devices) -> {written}",
            shown(&args.input),
            loaded.snapshots.len()
        )
        .and_then(|()| {
            loaded
                .snapshots
                .iter()
                .try_for_each(|snap| writeln!(out, "  {}: {}", snap.device, counts(snap)))
        })
    }
    .and_then(|()| out.flush())
    .map_err(|e| format!("wrote {written}, but cannot say so: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// `120 events, 3 segments, 40 blocks (6.00 MiB reserved)`.
fn counts(snap: &MemorySnapshot) -> String {
    format!(
        "{} events, {} segments, {} blocks ({} reserved)",
        snap.history.as_ref().map_or(0, |h| h.events.len()),
        snap.segments.len(),
        snap.blocks().count(),
        format_bytes(snap.reserved as usize)
    )
}
