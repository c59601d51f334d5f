# The twenty-second corpus again, in a fresh GPU call (H100), same binaries
# (.device-bin.txz, commit 20313ec's allocator): nine alternating rounds, to see whether
# the first call's warm medians (none at most 0.2, gpuscope's process at its slower speed
# in five of seven rounds) hold in another draw of process speeds; then the headroom of
# the two traces the first call had no time for.
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
d=tests/data/traces
T=()
for n in gptq_calibrate_quantize darts_bilevel_search_train timesformer_video_train \
  hifigan_multidisc_train blip2_qformer_frozen_train alphazero_mcts_selfplay_infer \
  sam2_memory_bank_track_infer colbert_late_interaction_train; do T+=("$d/$n.csv.gz"); done
REPEATS=9 timeout 330 bash bench/compare_torch.sh "$bin/gpuscope" "$OUT/cmp" "${T[@]}" > "$OUT/cmp.log" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/cmp.log"
mkdir -p "$OUT/headroom"
GPUSCOPE=$bin/gpuscope timeout $((570 - (SECONDS - start))) python3 bench/headroom.py \
  --runner torch-default --runner torch-expandable --runner cuda --lo 0.6 --steps 6 \
  "$d/sam2_memory_bank_track_infer.csv.gz" "$d/timesformer_video_train.csv.gz" > "$OUT/headroom/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/headroom/headroom.txt"
tar czf "$OUT/again.tgz" -C "$OUT" cmp cmp.log headroom && rm -rf "$OUT/cmp" "$OUT/headroom"
