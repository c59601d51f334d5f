//! Random sequences with every n-th device allocation failing.

use super::*;

fn random_with_failures(
    seed: u64,
    vmm: bool,
    fail_every: u64,
    conf: &str,
    ops: usize,
) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut run = Run::new(vmm, fail_every, 256 << 20, conf);
    let mut ids: Vec<u64> = Vec::new();
    let mut next_id = 0;
    for i in 0..ops {
        match rng.below(100) {
            0..=49 => {
                let stream = run.streams[rng.below(3)];
                run.allocate(next_id, rng.size(), stream);
                ids.push(next_id);
                next_id += 1;
            }
            50..=84 if !ids.is_empty() => {
                let id = ids.swap_remove(rng.below(ids.len()));
                run.free(id);
            }
            85..=92 if !ids.is_empty() => {
                let id = ids[rng.below(ids.len())];
                if let Some(b) = run.live.get(&id) {
                    run.alloc
                        .record_stream(b, run.streams[rng.below(3)])
                        .unwrap();
                }
            }
            93..=97 => run
                .dev
                .synchronize_stream(run.streams[rng.below(3)])
                .unwrap(),
            98 => run.alloc.empty_cache().unwrap(),
            _ => {}
        }
        ids.retain(|id| run.live.contains_key(id));
        if i % 16 == 0 {
            run.check_state(&format!("op {i} (seed {seed})"));
        }
    }
    run.finish()
}

#[test]
fn random_sequences_with_every_nth_device_allocation_failing() {
    let ops = if cfg!(debug_assertions) { 1500 } else { 6000 };
    // OOM_INJECTION_ROUNDS=K runs K rounds of seeds for a longer search (the first round's
    // seeds are the fixed ones CI runs).
    let rounds: u64 = std::env::var("OOM_INJECTION_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut failures = 0;
    for (round, n) in (0..rounds).flat_map(|r| (2..=7).map(move |n| (r, n))) {
        for vmm in [false, true] {
            for conf in [
                "",
                "max_split_size_mb:24,garbage_collection_threshold:0.7",
                "roundup_power2_divisions:4",
                // Streams sharing pools (virtual memory only): memory a stream's busy work
                // still uses next to memory that another stream maps into holes.
                "share_across_streams:True",
            ] {
                if !vmm && conf.starts_with("share") {
                    continue;
                }
                let seed = round * 100_000 + n * 1000 + vmm as u64 * 100 + conf.len() as u64;
                failures += random_with_failures(seed, vmm, n, conf, ops).0;
            }
        }
    }
    assert!(failures > 0);
}
