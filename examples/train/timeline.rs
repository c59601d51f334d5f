//! The memory timeline: a sample of the allocator's statistics after every step, and
//! the SVG chart of them.

use std::path::Path;

use gpuscope::Device;

use crate::svg_chart::Chart;

/// One point of the memory timeline.
#[derive(Clone, Copy)]
pub struct Sample {
    /// Allocated after the step.
    pub allocated: i64,
    /// The highest allocated during the step.
    pub peak: i64,
    /// Reserved after the step.
    pub reserved: i64,
}

/// Reads the allocator's statistics, then starts the next peak window.
pub fn sample(dev: &Device) -> Sample {
    let st = dev.allocator().stats();
    dev.allocator().reset_peak_stats();
    Sample {
        allocated: st.allocated_bytes.all.current,
        peak: st.allocated_bytes.all.peak,
        reserved: st.reserved_bytes.all.current,
    }
}

/// Writes memory over the steps as a small SVG chart, in the manner of PyTorch's
/// memory_viz: reserved as a filled area, the peak allocated during each step and the
/// allocated after it as lines, epochs as vertical rules.
pub fn write_timeline(
    path: &Path,
    samples: &[Sample],
    steps_per_epoch: usize,
    device: &str,
) -> std::io::Result<()> {
    let bytes = |v: i64| v.max(0) as usize;
    let max = samples
        .iter()
        .map(|s| bytes(s.reserved.max(s.peak).max(s.allocated)))
        .max()
        .unwrap_or(0);
    let mut chart = Chart::new(
        (900.0, 360.0),
        (80.0, 20.0, 40.0, 50.0),
        samples.len(),
        max,
        &format!("Device memory, {device}"),
    );
    if steps_per_epoch > 0 {
        let mut e = 1;
        while e * steps_per_epoch < samples.len() {
            chart.rule(e * steps_per_epoch, "#bbb");
            e += 1;
        }
    }
    let reserved: Vec<usize> = samples.iter().map(|s| bytes(s.reserved)).collect();
    chart.area(
        &reserved,
        &vec![0; samples.len()],
        r##"fill="#9ecae1" fill-opacity="0.6" stroke="#3182bd" stroke-width="1""##,
        None,
    );
    chart.line(
        samples.iter().map(|s| bytes(s.peak)),
        r##"stroke="#756bb1" stroke-width="1""##,
    );
    chart.line(
        samples.iter().map(|s| bytes(s.allocated)),
        r##"stroke="#e6550d" stroke-width="1.5""##,
    );
    chart.axis("step (dashed: epochs)");
    let (left, top, pw, ph) = chart.plot_area();
    chart.element(&format!(
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{:.1}" stroke="#333"/><text x="{left}" y="{:.1}" fill="#555">0</text><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">{}</text>"##,
        top + ph,
        top + ph + 16.0,
        left + pw,
        top + ph + 16.0,
        samples.len().saturating_sub(1)
    ));
    let lx = left + pw - 330.0;
    chart.element(&format!(
        r##"<rect x="{lx:.1}" y="13" width="14" height="10" fill="#9ecae1" stroke="#3182bd"/><text x="{:.1}" y="22">reserved</text>"##,
        lx + 20.0
    ));
    chart.element(&format!(
        r##"<line x1="{:.1}" y1="18" x2="{:.1}" y2="18" stroke="#756bb1" stroke-width="2"/><text x="{:.1}" y="22">peak in step</text>"##,
        lx + 90.0,
        lx + 104.0,
        lx + 110.0
    ));
    chart.element(&format!(
        r##"<line x1="{:.1}" y1="18" x2="{:.1}" y2="18" stroke="#e6550d" stroke-width="2"/><text x="{:.1}" y="22">allocated after step</text>"##,
        lx + 200.0,
        lx + 214.0,
        lx + 220.0
    ));
    std::fs::write(path, chart.finish())
}
