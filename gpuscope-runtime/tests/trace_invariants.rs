//! Every trace in `tests/data/traces` (the shared PyTorch traces and the corpus recorded
//! by `bench/record_traces`), replayed on the simulated device:
//!
//! - op by op, with the allocator's invariants checked as it goes (virtual memory and
//!   plain segments);
//! - warm passes make no driver call that allocates, maps, unmaps, changes access,
//!   releases or waits (cross-stream frees record and query events, the same number in
//!   every pass), and ten warm passes are alike in reserved memory and driver calls;
//! - peak reserved memory stays within 3% of what PyTorch reserved when the trace was
//!   recorded (the JSON beside each trace), and device allocations at most PyTorch's
//!   (but on the held-out traces listed and pinned below);
//! - every trace, its requests scaled until its peak of live memory is 95% of the
//!   device, still replays (memory freed inside large growths goes back under pressure).

use std::sync::Arc;

use gpuscope_runtime::alloc::{AllocConfig, CachingAllocator, RawBlock};
use gpuscope_runtime::backend::test::TestBackend;
use gpuscope_runtime::backend::{Backend, StreamId};
use gpuscope_runtime::trace::replay::{ReplayOptions, ReplayResult, peak_live, replay};
use gpuscope_runtime::trace::{Trace, TraceOp};

mod corpus;

use corpus::json_beside;

/// Every trace file, by name, sorted.
fn all_traces() -> Vec<(String, Trace)> {
    let traces = corpus::all_traces();
    assert!(
        traces.len() >= 226,
        "the corpus has {} traces: expected the 3 shared ones, 220 recorded and 3 of the GPT example",
        traces.len()
    );
    traces
}

fn sim() -> Arc<TestBackend> {
    Arc::new(
        TestBackend::builder()
            .capacity(80 << 30)
            .virtual_memory(2 << 20)
            .build(),
    )
}

/// The trace's stream numbers: 0 the default stream, each other a new stream.
fn streams_of(backend: &dyn Backend, t: &Trace) -> std::collections::HashMap<u32, StreamId> {
    t.streams()
        .into_iter()
        .map(|s| {
            let id = if s == 0 {
                StreamId::DEFAULT
            } else {
                backend.create_stream().unwrap()
            };
            (s, id)
        })
        .collect()
}

/// Two passes of `t` through `alloc`, every request multiplied by `scale`, calling
/// `each(pass, Some(op))` after each op and `each(pass, None)` once a pass has freed
/// what the trace left live; the first allocation error, with the op it came at.
fn two_passes(
    alloc: &CachingAllocator,
    backend: &dyn Backend,
    t: &Trace,
    scale: f64,
    mut each: impl FnMut(usize, Option<usize>),
) -> Result<(), String> {
    let streams = streams_of(backend, t);
    for pass in 0..2 {
        let mut live: std::collections::HashMap<u64, RawBlock> = Default::default();
        for (i, op) in t.ops().iter().enumerate() {
            match *op {
                TraceOp::Alloc { id, size, stream } => {
                    let size = (size as f64 * scale) as usize;
                    let b = alloc
                        .allocate(size, streams[&stream])
                        .map_err(|e| format!("pass {pass}, op {i}: {e}"))?;
                    live.insert(id, b);
                }
                TraceOp::Free { id } => alloc.free(live.remove(&id).unwrap()).unwrap(),
                TraceOp::RecordStream { id, stream } => {
                    alloc.record_stream(&live[&id], streams[&stream]).unwrap()
                }
            }
            each(pass, Some(i));
        }
        for (_, b) in live.drain() {
            alloc.free(b).unwrap();
        }
        each(pass, None);
    }
    Ok(())
}

/// Replays every op, checking invariants every `every` ops and at the end of each pass.
fn replay_checked(
    backend: Arc<dyn Backend>,
    config: AllocConfig,
    name: &str,
    t: &Trace,
    every: usize,
) {
    let alloc = CachingAllocator::new(backend.clone(), config).unwrap();
    two_passes(&alloc, &*backend, t, 1.0, |pass, op| match op {
        Some(i) if i % every == 0 => alloc
            .check_invariants()
            .unwrap_or_else(|e| panic!("{name}, pass {pass}, op {i}: {e}")),
        Some(_) => {}
        None => alloc
            .check_invariants()
            .unwrap_or_else(|e| panic!("{name}, end of pass {pass}: {e}")),
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    alloc.empty_cache().unwrap();
    alloc.check_invariants().unwrap();
    let s = alloc.stats();
    assert_eq!(
        s.reserved_bytes.all.current, 0,
        "{name}: empty_cache returns everything once nothing is live"
    );
}

#[test]
fn invariants_hold_through_every_trace_with_virtual_memory() {
    for (name, t) in all_traces() {
        replay_checked(sim(), AllocConfig::default(), &name, &t, 499);
    }
}

#[test]
fn invariants_hold_through_every_trace_with_plain_segments() {
    let config: AllocConfig = "expandable_segments:False".parse().unwrap();
    for (name, t) in all_traces() {
        replay_checked(sim(), config.clone(), &name, &t, 499);
    }
}

/// Replays `t` (a cold and a warm pass) with every request multiplied by `scale`, on a
/// fresh simulated 80 GiB device; the first error, with the op it came at.
fn replay_scaled(t: &Trace, scale: f64) -> Result<(), String> {
    let backend = sim();
    let alloc = CachingAllocator::new(backend.clone(), AllocConfig::default()).unwrap();
    two_passes(&alloc, &*backend, t, scale, |_, _| {})?;
    alloc.check_invariants().map_err(|e| e.to_string())
}

/// Traces that run out of memory when their peak of live memory is 95% of the device,
/// and the fraction each still fits at (by name, stored as `.csv` or `.csv.gz`). None
/// since chunks past a quarter of the device are single pages (`growth::chunk_limit`);
/// before, 32 of the 147 traces ran out below 95% (`bench/headroom.py` on the simulated
/// device: 0.884 at the lowest, `gradcache_contrastive_train`; BENCHMARKS.md, "Pages past
/// a quarter of the device"). Since then one, of the twenty-third corpus:
/// `vits_monotonic_align_train` fits at 0.947 (scaled 28 times, its 895 MiB requests find
/// 4.7 GiB free only in pieces of the first quarter's 500 MiB chunks, which hold live
/// blocks too; with pages from the start, `page_chunk_threshold:0`, it fits at 0.978:
/// the same trade as the quarter itself; BENCHMARKS.md, "A twenty-third corpus, held
/// out"). Of the twenty-sixth, `deltanet_chunked_state_train` fits at 0.934 (scaled 5.2
/// times at 95%, its 10.2 GiB requests find 4.1 GiB free only in pieces, most in the first
/// quarter's chunks; with `page_chunk_threshold:0` it fits at 0.978; on the H100 0.9375,
/// PyTorch's expandable segments 0.969; BENCHMARKS.md, "A twenty-sixth corpus, held out").
const BELOW_NINETEEN_TWENTIETHS: &[(&str, f64)] = &[
    ("vits_monotonic_align_train", 0.94),
    ("deltanet_chunked_state_train", 0.93),
];

/// A workload that nearly fills the device still fits: with every request scaled so
/// that the trace's peak of live memory is 95% of the 80 GiB device, each trace replays,
/// cold and warm. Holes that smaller requests cut in a large growth go back chunk by
/// chunk when the device runs out, page by page past a quarter of the device
/// (`growth::chunk_limit`); with one physical chunk per growth, 32 of the 95 traces ran
/// out of memory at 90% (BENCHMARKS.md, "Close to the device's memory"), and with chunks
/// of at most 500 MiB throughout, `evoformer_pair_train` did.
///
/// The traces of [`BELOW_NINETEEN_TWENTIETHS`] run out at 95% and are held to the
/// fraction listed there instead (and must still run out at 95%, so that the list is
/// updated when that changes).
#[test]
fn every_trace_fits_when_its_live_peak_is_nineteen_twentieths_of_the_device() {
    let device = (80usize << 30) as f64;
    let mut failed = Vec::new();
    for (name, t) in all_traces() {
        let live = peak_live(&t, &AllocConfig::default()) as f64;
        let at_95 = replay_scaled(&t, 0.95 * device / live);
        match BELOW_NINETEEN_TWENTIETHS
            .iter()
            .find(|(known, _)| *known == corpus::stem(&name))
        {
            Some(&(_, fraction)) => {
                if at_95.is_ok() {
                    failed.push(format!(
                        "{name} now fits at 95%: take it off BELOW_NINETEEN_TWENTIETHS"
                    ));
                }
                if let Err(e) = replay_scaled(&t, fraction * device / live) {
                    failed.push(format!("{name} (listed at {fraction}): {e}"));
                }
            }
            None => {
                if let Err(e) = at_95 {
                    failed.push(format!("{name} (x{:.1}): {e}", 0.95 * device / live));
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} traces ran out at 95% of the device:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The stream queries of a warm pass for cross-stream frees: the frees of blocks used
/// on other streams are sealed at the next allocation, one query per stream they wait
/// for (what the trace leaves live is freed at the end of a pass and sealed by the
/// next pass's first allocation).
fn warm_seals(t: &Trace) -> u64 {
    let mut batch = std::collections::BTreeSet::new();
    let mut count = 0;
    for pass in 0..2 {
        let mut uses: std::collections::HashMap<u64, (u32, Vec<u32>)> = Default::default();
        for op in t.ops() {
            match *op {
                TraceOp::Alloc { id, stream, .. } => {
                    if pass == 1 {
                        count += batch.len() as u64;
                    }
                    batch.clear();
                    uses.insert(id, (stream, Vec::new()));
                }
                TraceOp::RecordStream { id, stream } => {
                    if let Some((own, others)) = uses.get_mut(&id) {
                        if stream != *own {
                            others.push(stream);
                        }
                    }
                }
                TraceOp::Free { id } => {
                    if let Some((_, others)) = uses.remove(&id) {
                        batch.extend(others);
                    }
                }
            }
        }
        for (_, (_, others)) in uses.drain() {
            batch.extend(others);
        }
    }
    count
}

/// With virtual memory (the default), pools per stream (the default) or shared. Plain
/// segments follow PyTorch's own policy, which can still grow in a warm pass (it does on
/// `gpt_generate_kvcache`).
#[test]
fn warm_passes_make_no_driver_calls_and_ten_passes_are_alike() {
    for config in ["", "share_across_streams:True"] {
        for (name, t) in all_traces() {
            let alloc = CachingAllocator::new(sim(), config.parse().unwrap()).unwrap();
            let r = replay(
                &alloc,
                &t,
                &name,
                &ReplayOptions {
                    warm_passes: 10,
                    ..Default::default()
                },
            )
            .unwrap();
            let warm = r.warm_calls();
            assert_eq!(
                warm.memory_and_waits(),
                0,
                "{name} ({config:?}): warm passes made driver calls: {warm}"
            );
            assert!(
                r.warm_passes_identical(),
                "{name} ({config:?}): warm passes differ: {:?}",
                r.passes
            );
            assert_eq!(
                r.passes[1].peak_reserved, r.peak_reserved,
                "{name} ({config:?}): a warm pass reserved less than the cold one"
            );
            let record_streams = t
                .ops()
                .iter()
                .filter(|o| matches!(o, TraceOp::RecordStream { .. }))
                .count() as u64;
            let seals = warm_seals(&t);
            assert!(seals <= record_streams);
            let calls = r.passes[1].calls;
            let sharing = r.passes[1].sharing_queries;
            assert_eq!(
                (calls.stream_queries - sharing, calls.event_records),
                (seals, 0),
                "{name}: one stream query per stream for the frees between two allocations \
                 ({record_streams} record_stream ops), and no event on the idle streams"
            );
            // Pools per stream: no stream asks about another's memory; shared: only
            // where there are several streams.
            assert!(
                sharing == 0 || (!config.is_empty() && t.streams().len() > 1),
                "{name} ({config:?}): {sharing} sharing queries"
            );
            assert!(r.cold_calls().allocs > 0, "{name}: the cold pass grew");
        }
    }
}

/// PyTorch's peak reserved bytes when the trace was recorded (default settings), from
/// the JSON beside it.
fn pytorch_reserved(name: &str) -> usize {
    pytorch_figure(name, "max_reserved_bytes")
}

/// A figure of PyTorch's run that recorded the trace (default settings), from the JSON
/// beside it.
fn pytorch_figure(name: &str, field: &str) -> usize {
    let json = json_beside(name);
    let text = std::fs::read_to_string(&json).unwrap();
    let key = format!("\"{field}\":");
    let at = text
        .find(&key)
        .unwrap_or_else(|| panic!("{json:?} has no {key}"))
        + key.len();
    text[at..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Held-out traces on which gpuscope reserves more than 3% above what PyTorch reserved
/// when recording, with its peak reserved bytes (by name, stored as `.csv` or `.csv.gz`). `large_vocab_lm_train` (fifth corpus):
/// the optimizer's state, made at the end of the first step, lands in the holes the
/// first step's 2 GiB logits left, so the second step's logits need new memory at the
/// top of the arena; PyTorch's default allocator, one segment per large request,
/// reserves 12,916 MiB, its expandable segments 13,544, as gpuscope (BENCHMARKS.md, "A
/// fifth corpus, held out"). `cuda_graph_infer` (sixth corpus): PyTorch's own replay of the
/// trace reserves the same 570 MiB as gpuscope; the recorded run reserved 514, likely
/// because part of it came from the CUDA graph's private memory pool, which a trace
/// does not carry (not verified further; with `share_across_streams:True` gpuscope
/// reserves 406). `pcgrad_multitask_train` (twelfth corpus), as `large_vocab_lm_train`:
/// each step stacks the four flattened task gradients into one 745 MiB request; in the
/// arena the hole it leaves is split by the next step's smaller blocks, so it grows
/// again in the first steps, where PyTorch's default keeps its segment for it (5,368 MiB;
/// its expandable segments reserve 5,848, as gpuscope; BENCHMARKS.md, "A twelfth corpus,
/// held out"). `deep_narrow_many_params_train` (fourteenth corpus): of its 186 MiB, 122
/// are small blocks and 64 two 32 MiB requests; PyTorch's default gives each of those a
/// segment of its own size (190 MiB in all), gpuscope's arena grows by whole 20 MiB pages
/// of PyTorch's expandable segments, 80 MiB for the two (206 MiB, as those segments);
/// growing by 2 MiB for requests of 10 MiB and more, as the default rounds them, meets
/// 198 MiB here, but leaves 24 of the 103 traces above the lower of PyTorch's two
/// reserved figures rather than 14 (BENCHMARKS.md, "A fourteenth corpus, held out").
/// `medusa_tree_decode` (twenty-first corpus): its 2,987 MiB of fp16 weights are made
/// first, a tensor at a time with nothing freed, and the run of growths that maps them
/// (each growth at least 5/4 of the last, `growth::growth_size`) ends 160 MiB past what
/// they take, memory the decoding that follows never needs: 3,196 MiB against PyTorch
/// default's 3,080 and its expandable segments' 3,036, which gpuscope meets without runs
/// (in 82 device allocations rather than 55; over the 155 traces, runs trade reserved
/// memory for device allocations, BENCHMARKS.md, "A twenty-first corpus, held out").
/// Pinned, so that a change either way updates this list.
const MORE_RESERVED_THAN_PYTORCH: &[(&str, usize)] = &[
    ("cuda_graph_infer", 597_688_320),
    ("deep_narrow_many_params_train", 216_006_656),
    ("large_vocab_lm_train", 14_201_913_344),
    ("pcgrad_multitask_train", 6_132_072_448),
    ("medusa_tree_decode", 3_351_248_896),
];

/// A cold pass and a warm one of `t` with the default configuration on the simulated
/// device.
fn replay_default(name: &str, t: &Trace) -> ReplayResult {
    let alloc = CachingAllocator::new(sim(), AllocConfig::default()).unwrap();
    let options = ReplayOptions {
        warm_passes: 1,
        ..Default::default()
    };
    replay(&alloc, t, name, &options).unwrap()
}

#[test]
fn peak_reserved_stays_near_or_below_pytorch() {
    let mut worst = (String::new(), 0.0);
    for (name, t) in all_traces() {
        let r = replay_default(&name, &t);
        let ratio = r.peak_reserved as f64 / pytorch_reserved(&name) as f64;
        if let Some(&(_, pinned)) = MORE_RESERVED_THAN_PYTORCH
            .iter()
            .find(|(n, _)| *n == corpus::stem(&name))
        {
            assert!(
                r.peak_reserved == pinned && ratio > 1.03,
                "{name}: peak reserved {} ({ratio:.4} of PyTorch's); the list above says \
                 {pinned}: update it",
                r.peak_reserved
            );
            continue;
        }
        assert!(
            ratio <= 1.03,
            "{name}: peak reserved {} is {ratio:.4} of PyTorch's",
            r.peak_reserved
        );
        if ratio > worst.1 {
            worst = (name, ratio);
        }
    }
    eprintln!(
        "highest peak reserved against PyTorch's: {} ({:.4})",
        worst.0, worst.1
    );
}

/// Traces on which gpuscope makes more device allocations than PyTorch did, and how many
/// it makes (by name, stored as `.csv` or `.csv.gz`). On each of the first eight, PyTorch's default allocator reserved more memory
/// (1,198 MiB against 1,184, 9,000 against 7,708, 2,534 against 2,450, 830 against 814,
/// 2,542 against 1,748, 2,838 against 2,344, 1,264 against 1,068 and 5,654 against
/// 3,624), and later steps found it cached where gpuscope's tighter arena grows by whole
/// 20 MiB pages (`ddp_no_sync_accum_train`: each micro-batch of a different size outgrows
/// the last by a few MiB, between frees, so no run of growths forms). Larger growth steps
/// (at least 1/128 of the arena, the policy before PyTorch's pages) fixed some of these
/// and moved others above (BENCHMARKS.md, "PyTorch's pages"). On
/// `pcgrad_multitask_train` gpuscope reserves more (see `MORE_RESERVED_THAN_PYTORCH`) and
/// in more growths, as PyTorch's expandable segments do (113 device allocations). The
/// last five, and part of the counts of `ddp_no_sync_accum_train`, `unet_cfg_varres_infer`,
/// `vqvae_codebook_train` and `pcgrad_multitask_train`, are growths larger than 500 MiB
/// mapped in chunks of at most 500 MiB (1/160 of the 80 GiB device: `growth::chunk_limit`),
/// the price of giving memory back under pressure where PyTorch's default allocator makes
/// one segment per large request. Of the fifteenth corpus, `ebm_sgld_train` grows by 20-60
/// MiB at a time while its first step's Langevin loop frees between growths (no run forms;
/// PyTorch reused whole segments of earlier requests), and `token_budget_batches_train`
/// maps 35 GiB: up to a quarter of the device in chunks of at most 500 MiB, the rest in
/// single 20 MiB pages (`growth::chunk_limit`: 145 allocations with 500 MiB chunks
/// throughout, 96 without a limit, PyTorch 106). Of the sixteenth, `blockwise_attention_train`, `evoformer_pair_train` and
/// `grpo_generate_train` grow by whole 20 MiB pages where PyTorch's default reused
/// segments of earlier requests (PyTorch's expandable segments made 92, 54 and 133). Of the
/// seventeenth, `ewc_continual_train` keeps a Fisher diagonal and a copy of every parameter
/// after each task, allocated one tensor at a time between the frees of per-sample
/// gradients, so no run forms: 20 MiB and 2 MiB pages where PyTorch's default took them
/// from cached segments (its default reserved 2,610 MiB against gpuscope's 1,842; its
/// expandable segments made 61). Of the twenty-first, `controlnet_frozen_unet_train` and
/// `deq_implicit_train` grow by whole 20 MiB pages where PyTorch's default reused segments
/// of earlier requests (80 against 70, 28 against 27; its expandable segments made 77
/// and 28). Of the twenty-second, `sam2_memory_bank_track_infer` (74 against 71 when
/// recorded; 72 in PyTorch's replay, its expandable segments 73): videos of a new size
/// each bring frames and masks of a new size, which grow the arena by whole pages where
/// PyTorch's default reserved 1.6x the peak in segments it then reused. Of the
/// twenty-third, `detr_set_match_train` (188 against 166; padded batches of a new size
/// each) and `impala_vtrace_varlen_train` (66 against 48; trajectories of a new length
/// each), where PyTorch's default reserved 1.54x and 2.31x the peak and reused it
/// (gpuscope 1.008x and 1.21x, as PyTorch's expandable segments, which made 197 and 55).
/// Of the twenty-fourth, `dgcnn_knn_graph_train` (35 against 27; point x point distances
/// at a new point count each step), `mamba2_ssd_chunked_train` (63 against 62; a new
/// sequence length each step) and `unet3d_sliding_window_train` (48 against 39; volumes of
/// a new shape), where PyTorch's default reserved 1.48x, 1.70x and 1.45x the peak in
/// segments it reused (gpuscope 1.04x, 1.24x and 1.02x, as PyTorch's expandable segments,
/// which made 32, 57 and 47 in the comparison's replay). Of the twenty-fifth,
/// `var_next_scale_train` (312 against 264; scales of 1-256 tokens, caches grown a scale at
/// a time), where PyTorch's default reserved 1.055x the peak in segments it reused, and
/// two that reserve past a quarter of the device, where growth maps single 20 MiB pages
/// (`growth::chunk_limit`), as `token_budget_batches_train` does:
/// `bigbird_block_sparse_train` (871 against 121; 34 GB for documents of a new length
/// each step) and `meanflow_jvp_dit_train` (1,322 against 492; 39 GB), where PyTorch's
/// default reserved 1.32x and 1.48x the peak (gpuscope 1.10x and 1.016x).
/// Of the twenty-sixth, five that reserve past a quarter of the device (24-28 GB), where
/// growth maps single 20 MiB pages: `galore_layerwise_train` (604 against 466),
/// `graphormer_spd_bias_train` (298 against 77; molecule batches padded to a new size each
/// step, where PyTorch's default reserved 1.61x the peak in segments it reused),
/// `hyena_fft_longconv_train` (411 against 182), `qlora_nf4_accum_train` (785 against 594)
/// and `sae_activation_buffer_train` (515 against 86; an 8 GiB buffer refilled from a side
/// stream, where PyTorch's default reserved 1.81x the peak); and
/// `causal_video_vae_chunked_infer` (66 against 65; videos of a new size, whole pages where
/// PyTorch's default reserved 1.72x the peak and reused it).
/// Of the twenty-seventh, `knn_lm_datastore_decode` (64 against 54; a 16 GiB datastore
/// built a tensor at a time below a quarter of the device, mapped in chunks of at most
/// 1/160 of it: 32 without that limit), `reformer_lsh_attention_train` (90 against 69;
/// sequences of 16k-64k tokens, whole pages where PyTorch's default reserved 1.18x the
/// peak and reused it; 75 without a chunk limit) and `retnet_chunkwise_recurrent_train`
/// (538 against 277; 25 GB, past a quarter of the device, in single pages: 258 with
/// `page_chunk_threshold:1`).
/// Of the twenty-eighth, `switch_moe_capacity_drop_train` (586 against 120; 29 GB, past a
/// quarter of the device, in single pages: 135 with `page_chunk_threshold:1`, 102 without
/// any chunk limit), `l2o_lstm_optimizer_meta_train` (223 against 218, 231 on the H100,
/// whose quarter is of 79.2 GiB; 22 GB past a quarter: 128 with `page_chunk_threshold:1`),
/// `net2net_growing_gpt_train` (113 against 105; the model and its Adam state rebuilt
/// larger twice, below the quarter in chunks of at most 1/160 of the device: 99 without a
/// chunk limit) and `tgn_memory_link_train` (35 against 30; 28 without a chunk limit).
/// Of the twenty-ninth, `mil_wsi_bag_train` (68 against 46 when recorded, 41 in
/// PyTorch's replay; slides of 1k-24k tiles, each a bag of features of a new size, which
/// grow the arena by whole pages where PyTorch's default reserved 1.13x the peak in
/// segments it reused; 64 without a chunk limit, as PyTorch's expandable segments).
/// Of the thirtieth, `graphcast_rollout_train` (108 against 82; a rollout curriculum of 1-8
/// checkpointed steps, so the activations grow step by step in whole pages where
/// PyTorch's default reserved 1.07x the peak in segments it reused; 106 without a chunk
/// limit, PyTorch's expandable segments 110) and `ivfpq_ann_search_infer` (33 against 16;
/// candidate buffers of a data-dependent size, where PyTorch's default reserved 1.88x the
/// peak in 16 segments; 24 without a chunk limit, as PyTorch's expandable segments).
/// The figure is pinned, so that a change either way updates this list.
const MORE_DEVICE_ALLOCATIONS_THAN_PYTORCH: &[(&str, u64)] = &[
    ("convnext_ema_accum_train", 77),
    ("ddp_no_sync_accum_train", 94),
    ("gpt_checkpoint_train", 46),
    ("gpuscope_gpt_checkpoint_train", 42),
    ("superres_randcrop_train", 53),
    ("unet_cfg_varres_infer", 21),
    ("vae_conv_train", 34),
    ("vqvae_codebook_train", 17),
    ("pcgrad_multitask_train", 101),
    ("ensemble_vmap_train", 25),
    ("gnn_varsize_train", 27),
    ("knn_retrieval_infer", 15),
    ("large_vocab_lm_train", 56),
    ("pointnet_varpoints_train", 25),
    ("ebm_sgld_train", 26),
    ("token_budget_batches_train", 877),
    ("blockwise_attention_train", 89),
    ("evoformer_pair_train", 54),
    ("grpo_generate_train", 103),
    ("ewc_continual_train", 60),
    ("controlnet_frozen_unet_train", 80),
    ("deq_implicit_train", 28),
    ("sam2_memory_bank_track_infer", 74),
    ("detr_set_match_train", 188),
    ("impala_vtrace_varlen_train", 66),
    ("dgcnn_knn_graph_train", 35),
    ("mamba2_ssd_chunked_train", 63),
    ("unet3d_sliding_window_train", 48),
    ("var_next_scale_train", 312),
    ("bigbird_block_sparse_train", 871),
    ("meanflow_jvp_dit_train", 1322),
    ("galore_layerwise_train", 604),
    ("graphormer_spd_bias_train", 298),
    ("hyena_fft_longconv_train", 411),
    ("qlora_nf4_accum_train", 785),
    ("sae_activation_buffer_train", 515),
    ("causal_video_vae_chunked_infer", 66),
    ("knn_lm_datastore_decode", 64),
    ("reformer_lsh_attention_train", 90),
    ("retnet_chunkwise_recurrent_train", 538),
    ("switch_moe_capacity_drop_train", 586),
    ("l2o_lstm_optimizer_meta_train", 223),
    ("net2net_growing_gpt_train", 113),
    ("tgn_memory_link_train", 35),
    ("mil_wsi_bag_train", 68),
    ("graphcast_rollout_train", 108),
    ("ivfpq_ann_search_infer", 33),
];

/// Device allocations (`cuMemCreate`) stay at most PyTorch's (`cudaMalloc`) when the
/// trace was recorded, but on the traces listed above: an arena grows by what is
/// missing in whole 20 MiB pages, one allocation per growth up to 500 MiB, and by growing steps in a
/// run of growths (without the runs, many-gigabyte pools built a tensor at a time would
/// make one allocation per 20 MiB).
#[test]
fn device_allocations_stay_at_most_pytorchs() {
    for (name, t) in all_traces() {
        let r = replay_default(&name, &t);
        let pytorch = pytorch_figure(&name, "num_device_alloc") as u64;
        match MORE_DEVICE_ALLOCATIONS_THAN_PYTORCH
            .iter()
            .find(|(known, _)| *known == corpus::stem(&name))
        {
            Some(&(_, ours)) => assert!(
                r.device_allocs == ours && ours > pytorch,
                "{name}: {} device allocations (PyTorch {pytorch}); the list of traces above \
                 PyTorch's says {ours}: update it",
                r.device_allocs
            ),
            None => assert!(
                r.device_allocs <= pytorch,
                "{name}: {} device allocations against PyTorch's {pytorch}",
                r.device_allocs
            ),
        }
    }
}
