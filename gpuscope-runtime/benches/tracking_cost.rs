//! What tracking costs, measured in pairs: each round times the same work with tracking
//! off and on, back to back (the order alternating between rounds), and the figures are
//! medians over the rounds of the per-round difference. A noisy machine slows both
//! halves of a round alike, so the difference stays readable where two separate
//! benchmark runs would not be.
//!
//! `cargo bench -p gpuscope-runtime --bench tracking_cost` (release), or
//! `cargo bench --profile dev -p gpuscope-runtime --bench tracking_cost` (debug build,
//! where tracking is on by default and also captures creation sites).
//!
//! Prints, for a scope making and dropping N tensors (N = 1, 16, 64): the time per
//! tensor with tracking off, the extra time per tensor with tracking on (median and
//! quartiles over the rounds), and the extra time of an empty scope's enter+exit.

use std::hint::black_box;
use std::time::Instant;

use gpuscope_runtime::scope::{
    LeakPolicy, ScopeGuard, ScopeOptions, set_leak_policy, set_tracking,
};
use gpuscope_runtime::tensor::DType;
use gpuscope_runtime::{Device, Tensor, backend::StreamId};

/// Seconds one half of a round aims to take.
const HALF_ROUND_S: f64 = 0.004;

fn scope_with_tensors(dev: &Device, n: usize) {
    let s = ScopeGuard::enter(ScopeOptions::new("bench"));
    for _ in 0..n {
        let t = Tensor::empty_on(&[16], DType::F32, dev, StreamId::DEFAULT).expect("alloc");
        black_box(&t);
    }
    drop(s);
}

/// Nanoseconds per call of `work`, over `reps` calls.
fn time(reps: usize, work: &mut dyn FnMut()) -> f64 {
    let t0 = Instant::now();
    for _ in 0..reps {
        work();
    }
    t0.elapsed().as_nanos() as f64 / reps as f64
}

fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}

/// Runs `rounds` paired rounds of `work`; returns (off per call, on-off per call)
/// samples.
fn paired(rounds: usize, work: &mut dyn FnMut()) -> (Vec<f64>, Vec<f64>) {
    // Calibrate: how many calls fill half a round.
    set_tracking(false);
    let probe = time(1000, work).max(1.0);
    let reps = ((HALF_ROUND_S * 1e9) / probe).max(10.0) as usize;
    let (mut off, mut diff) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut half = |on: bool| {
            set_tracking(on);
            time(reps, work)
        };
        let (t_off, t_on) = if round % 2 == 0 {
            let a = half(false);
            (a, half(true))
        } else {
            let b = half(true);
            (half(false), b)
        };
        off.push(t_off);
        diff.push(t_on - t_off);
    }
    (off, diff)
}

fn main() {
    // `cargo bench` passes `--bench`; a number sets the rounds.
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    set_leak_policy(LeakPolicy::Deny);
    let dev = Device::host().expect("host device");
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("tracking cost, {profile} build, {rounds} paired rounds (median [quartiles])");
    let (_, diff) = paired(rounds, &mut || {
        let s = ScopeGuard::enter(ScopeOptions::new("bench"));
        black_box(&s);
    });
    let (q1, m, q3) = quartiles(diff);
    println!("  empty scope enter+exit: +{m:.1} ns [{q1:.1}, {q3:.1}] with tracking on");
    for n in [1usize, 16, 64] {
        let (off, diff) = paired(rounds, &mut || scope_with_tensors(&dev, n));
        let (_, off_m, _) = quartiles(off);
        let per = |v: f64| v / n as f64;
        let (q1, m, q3) = quartiles(diff);
        println!(
            "  scope making and dropping {n:>2} tensors: {:.1} ns a tensor with tracking off; tracking on adds {:.1} ns a tensor [{:.1}, {:.1}] ({:.1} ns a scope)",
            per(off_m),
            per(m),
            per(q1),
            per(q3),
            m
        );
    }
}
