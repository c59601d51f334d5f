//! What tracking costs a training step, measured the way the examples report it: paired
//! rounds in one process, tracking on and off in alternating order (on first in even
//! rounds, off first in odd ones), after one untimed round of each; the figure is the
//! median of the rounds' relative differences, with its quartiles.
//!
//! Shared by the `train` and `gpt` examples (`#[path = "common/paired_ab.rs"]`).

/// The result of [`paired_rounds`]: per-step seconds (medians) and tracking's share of
/// the step as quartiles (first, median, third) of the rounds' relative differences.
pub struct PairedAb {
    pub on_median: f64,
    pub off_median: f64,
    pub share_quartiles: (f64, f64, f64),
}

/// Runs `rounds` paired rounds of `run(tracking_on)`, which times one block of steps
/// and returns seconds a step.
pub fn paired_rounds(
    rounds: usize,
    mut run: impl FnMut(bool) -> Result<f64, String>,
) -> Result<PairedAb, String> {
    run(true)?;
    run(false)?;
    let (mut on, mut off, mut share) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds.max(1) {
        let (a, b) = if round % 2 == 0 {
            let a = run(true)?;
            (a, run(false)?)
        } else {
            let b = run(false)?;
            (run(true)?, b)
        };
        on.push(a);
        off.push(b);
        share.push((a - b) / b);
    }
    Ok(PairedAb {
        on_median: quartiles(on).1,
        off_median: quartiles(off).1,
        share_quartiles: quartiles(share),
    })
}

impl PairedAb {
    /// The line both examples print: `rounds` paired rounds of `steps` steps at batch
    /// `batch`, the medians in milliseconds with `decimals` decimals, and tracking's share.
    pub fn report(&self, rounds: usize, steps: usize, batch: usize, decimals: usize) -> String {
        let (s1, sm, s3) = self.share_quartiles;
        format!(
            "tracking A/B ({rounds} paired rounds of {steps} steps, batch {batch}): tracking on {:.decimals$} ms a step, off {:.decimals$} ms (medians); tracking's share of the step: {:+.2}% (median of the rounds' differences; quartiles {:+.2}%, {:+.2}%)",
            1e3 * self.on_median,
            1e3 * self.off_median,
            100.0 * sm,
            100.0 * s1,
            100.0 * s3
        )
    }
}

/// First quartile, median and third quartile of `v` (not empty), nearest rank.
fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}
