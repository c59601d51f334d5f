# The headroom of the thirtieth corpus's traces that the corpus call had no time for
# (93-thirtieth-corpus was cut during graphcast_rollout_train's PyTorch runs): PyTorch's two
# modes and gpuscope on CUDA, with the binaries of that call, in one H100 call.
#   python3 bench/device_tree.py slim bench/results/h100-2026-11-28b/94-thirtieth-headroom \
#     --only-traces graphcast_rollout_train --only-traces ivfpq_ann_search_infer \
#     --only-traces slimming_channel_prune_train --only-traces topk_distill_stream_train
#   bash bench/results/h100-2026-11-28b/94-thirtieth-headroom/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
d=tests/data/traces
mkdir -p /tmp/t30
for n in topk_distill_stream_train ivfpq_ann_search_infer slimming_channel_prune_train graphcast_rollout_train; do
  gunzip -c $d/$n.csv.gz > /tmp/t30/$n.csv
done
# PyTorch's replayer, built by torch_replay.sh's first use (one replay of the smallest trace).
bash bench/torch_replay.sh /tmp/t30/slimming_channel_prune_train.csv > "$OUT/torch_build.txt" 2>&1
GPUSCOPE=$bin/gpuscope timeout $((540 - (SECONDS - start))) python3 bench/headroom.py \
  --runner cuda --runner torch-default --runner torch-expandable --lo 0.6 --steps 6 \
  /tmp/t30/topk_distill_stream_train.csv /tmp/t30/ivfpq_ann_search_infer.csv \
  /tmp/t30/slimming_channel_prune_train.csv /tmp/t30/graphcast_rollout_train.csv \
  > "$OUT/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/headroom.txt"
