# The allocator's lock released by a plain store (alloc/lock.rs), on the H100, one call,
# with the binaries of .device-bin.txz built from that change: every test binary
# (bench/final_gpu_run.sh's tests phase), then the twenty-second corpus compared in five
# alternating rounds with PyTorch.
set -uo pipefail
start=$SECONDS
bash bench/final_gpu_run.sh "$OUT/final" tests
echo "tests done after $((SECONDS - start)) s"
source bench/device_bin.sh
d=tests/data/traces
T=()
for n in gptq_calibrate_quantize darts_bilevel_search_train timesformer_video_train \
  hifigan_multidisc_train blip2_qformer_frozen_train alphazero_mcts_selfplay_infer \
  sam2_memory_bank_track_infer colbert_late_interaction_train; do T+=("$d/$n.csv.gz"); done
REPEATS=5 timeout $((560 - (SECONDS - start))) bash bench/compare_torch.sh "$bin/gpuscope" "$OUT/cmp" "${T[@]}" > "$OUT/cmp.log" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/cmp.log"
tar czf "$OUT/cmp.tgz" -C "$OUT" cmp cmp.log && rm -rf "$OUT/cmp"
