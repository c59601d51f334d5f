//! The memory timeline of a few training steps: at each point of a step (each block's
//! forward step, the loss, the backward pass reaching each block, the optimizer's step)
//! the live tensors are read from gpuscope's tracking records and told apart by the line
//! that made them: parameters, the optimizer's state, gradients (made by `backward()`),
//! the attention's tensors (made by `causal_attention`: the heads' q, k, v and the
//! attention matrices), other activations, and allocated memory no record covers. It
//! is written as an SVG of stacked areas, in the manner of the MLP example's timeline.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::panic::Location;
use std::path::Path;
use std::sync::{Arc, Mutex};

use gpuscope::{Device, Tensor, report_live};

use crate::svg_chart::Chart;

/// What a live tensor is, by the line that made it (or, for parameters and the
/// optimizer's state, by which tensors they are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Parameters,
    OptimizerState,
    Gradients,
    Attention,
    Activations,
    Untracked,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Parameters,
        Kind::OptimizerState,
        Kind::Gradients,
        Kind::Activations,
        Kind::Attention,
        Kind::Untracked,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Parameters => "parameters",
            Kind::OptimizerState => "optimizer state (AdamW moments)",
            Kind::Gradients => "gradients (made by backward())",
            Kind::Attention => "attention: q, k, v heads and attention matrices",
            Kind::Activations => "other activations",
            Kind::Untracked => "allocated, no tracking record",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Kind::Parameters => "#6baed6",
            Kind::OptimizerState => "#9e9ac8",
            Kind::Gradients => "#fd8d3c",
            Kind::Attention => "#e6550d",
            Kind::Activations => "#74c476",
            Kind::Untracked => "#bdbdbd",
        }
    }
}

/// One point of the timeline.
#[derive(Clone, Debug)]
pub struct Sample {
    pub label: String,
    pub bytes: [usize; 6],
    pub allocated: usize,
    pub reserved: usize,
}

/// What tells the kinds apart.
pub struct Classifier {
    /// The parameters: their records, and (read at each sample) their gradients'.
    pub param_tensors: Vec<Tensor>,
    pub params: HashSet<u64>,
    pub moments: HashSet<u64>,
    pub backward_site: Option<(&'static str, u32)>,
    pub attention_site: Option<(&'static str, u32)>,
}

impl Classifier {
    /// `grads`: the records of the parameters' gradients now (made at the line of
    /// `backward()`, or inside a checkpoint's own backward pass).
    fn kind(&self, id: u64, site: &Location<'static>, grads: &HashSet<u64>) -> Kind {
        let at = Some((site.file(), site.line()));
        if self.params.contains(&id) {
            Kind::Parameters
        } else if self.moments.contains(&id) {
            Kind::OptimizerState
        } else if at == self.backward_site || grads.contains(&id) {
            Kind::Gradients
        } else if at == self.attention_site {
            Kind::Attention
        } else {
            Kind::Activations
        }
    }
}

/// The ids of the tracking records of `tensors`.
pub fn ids<'a>(tensors: impl IntoIterator<Item = &'a Tensor>) -> HashSet<u64> {
    tensors
        .into_iter()
        .filter_map(|t| t.track_record().map(|r| r.id()))
        .collect()
}

/// The samples taken so far, and how to take one.
pub struct Recorder {
    pub classifier: Mutex<Classifier>,
    pub samples: Mutex<Vec<Sample>>,
    device: Device,
}

impl Recorder {
    pub fn new(device: &Device, classifier: Classifier) -> Arc<Recorder> {
        Arc::new(Recorder {
            classifier: Mutex::new(classifier),
            samples: Mutex::new(Vec::new()),
            device: device.clone(),
        })
    }

    /// Reads the live tensors on the device and the allocator's statistics.
    pub fn sample(&self, label: &str) {
        let c = self.classifier.lock().unwrap_or_else(|e| e.into_inner());
        let mut bytes = [0usize; 6];
        let dev = self.device.label();
        let grads = ids(c
            .param_tensors
            .iter()
            .filter_map(Tensor::grad)
            .collect::<Vec<_>>()
            .iter());
        for t in report_live() {
            let r = &t.record;
            if r.device() != dev {
                continue;
            }
            let k = c.kind(r.id(), r.site(), &grads);
            bytes[Kind::ALL.iter().position(|x| *x == k).unwrap_or(5)] += r.bytes();
        }
        let st = self.device.allocator().stats();
        let allocated = st.allocated_bytes.all.current.max(0) as usize;
        let tracked: usize = bytes.iter().sum();
        bytes[5] = allocated.saturating_sub(tracked);
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Sample {
                label: label.to_string(),
                bytes,
                allocated,
                reserved: st.reserved_bytes.all.current.max(0) as usize,
            });
    }
}

/// The timeline as text: one line a sample.
pub fn table(samples: &[Sample]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "point", "params", "optim", "grads", "activ.", "attention", "other", "reserved"
    );
    for x in samples {
        let mib = |b: usize| format!("{:.1}", b as f64 / (1 << 20) as f64);
        let _ = writeln!(
            s,
            "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            x.label,
            mib(x.bytes[0]),
            mib(x.bytes[1]),
            mib(x.bytes[2]),
            mib(x.bytes[3]),
            mib(x.bytes[4]),
            mib(x.bytes[5]),
            mib(x.reserved)
        );
    }
    s.push_str("(MiB)");
    s
}

/// Writes the samples as an SVG: the kinds as stacked areas, reserved memory as a line,
/// steps as dashed rules.
pub fn write_svg(path: &Path, samples: &[Sample], title: &str) -> std::io::Result<()> {
    let max = samples
        .iter()
        .map(|s| s.reserved.max(s.allocated))
        .max()
        .unwrap_or(0);
    let mut chart = Chart::new(
        (1000.0, 440.0),
        (80.0, 20.0, 40.0, 130.0),
        samples.len(),
        max,
        title,
    );
    // Stacked areas, bottom kind first.
    let mut below = vec![0usize; samples.len()];
    for (k, kind) in Kind::ALL.iter().enumerate() {
        let above: Vec<usize> = samples
            .iter()
            .zip(&below)
            .map(|(s, b)| b + s.bytes[k])
            .collect();
        chart.area(
            &above,
            &below,
            &format!(
                r##"fill="{}" fill-opacity="0.85" stroke="none""##,
                kind.color()
            ),
            Some(kind.name()),
        );
        below = above;
    }
    chart.line(
        samples.iter().map(|s| s.reserved),
        r##"stroke="#333" stroke-width="1.5" stroke-dasharray="4,2""##,
    );
    // Step boundaries: before each sample labelled `step ...: start`.
    for (i, s) in samples.iter().enumerate() {
        if s.label.ends_with("start") && i > 0 {
            chart.rule(i, "#999");
        }
    }
    chart.axis("points of the steps: forward per block, loss, backward per block, optimizer step (dashed: step boundaries)");
    let (left, top, _, ph) = chart.plot_area();
    for (k, kind) in Kind::ALL.iter().enumerate() {
        let (lx, ly) = (
            left + (k % 3) as f64 * 300.0,
            top + ph + 40.0 + (k / 3) as f64 * 20.0,
        );
        chart.element(&format!(
            r##"<rect x="{lx:.1}" y="{:.1}" width="14" height="10" fill="{}"/><text x="{:.1}" y="{ly:.1}">{}</text>"##,
            ly - 9.0,
            kind.color(),
            lx + 20.0,
            kind.name()
        ));
    }
    let ly = top + ph + 100.0;
    chart.element(&format!(
        r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333" stroke-dasharray="4,2"/><text x="{:.1}" y="{ly:.1}">reserved by the allocator</text>"##,
        ly - 4.0,
        left + 14.0,
        ly - 4.0,
        left + 20.0
    ));
    std::fs::write(path, chart.finish())
}
