# The first H100 call of the twenty-third session on issue 11, with the binaries of
# .device-bin.txz built at the session's start (ff8a727: the allocator with holes, joined
# for the requester's stream, c0621c5): the GPU tests had not run since holes were added
# (96db25d). Every test binary that runs on the GPU, the GPT example against its PyTorch
# reference (same tokens, default size), the one-rank data-parallel GPT, and
# compute-sanitizer's four tools over the train and GPT examples and the allocator and
# tensor CUDA tests.
#   bash bench/results/h100-2026-11-28b/92-all-tests-gpt/call.sh
set -uo pipefail
start=$SECONDS
bash bench/final_gpu_run.sh "$OUT/final" tests gpt ddp
echo "tests gpt ddp done after $((SECONDS - start)) s" > "$OUT/log.txt"
rm "$OUT/final/final.tgz"   # the second run packs every log again
mv "$OUT/final/final_summary.txt" "$OUT/final/final_summary_tests.txt"
left=$((560 - (SECONDS - start)))
SANITIZE_BUDGET_S=$((left > 300 ? 300 : left)) bash bench/final_gpu_run.sh "$OUT/final" sanitize
echo "sanitize done after $((SECONDS - start)) s" >> "$OUT/log.txt"
# Carried: .device-bin.txz of bench/build_device_bins.sh, less the five test binaries
# that replay the whole trace corpus on the simulated device (trace_invariants,
# busy_replay, trace_record, alloc_faults, oom_injection: CI runs them; the traces, 148 MB,
# are more than a call carries). The tree: `python3 bench/device_tree.py slim
# bench/results/h100-2026-11-28b/92-all-tests-gpt --only-traces side_stream_loader_train
# --only-traces bert_infer --only-traces prefetch_train` (the traces cuda_allocator replays).
