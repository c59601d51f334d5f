# The headroom of two more of the thirtieth corpus's traces (the third call of the session,
# with the device time it had left): gpuscope on CUDA and PyTorch's two modes, with the
# binaries of 92-all-tests-gpt.
#   python3 bench/device_tree.py slim bench/results/h100-2026-11-28b/95-thirtieth-headroom2 \
#     --only-traces ivfpq_ann_search_infer --only-traces slimming_channel_prune_train
#   bash bench/results/h100-2026-11-28b/95-thirtieth-headroom2/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
d=tests/data/traces
mkdir -p /tmp/t30
for n in ivfpq_ann_search_infer slimming_channel_prune_train; do
  gunzip -c $d/$n.csv.gz > /tmp/t30/$n.csv
done
# PyTorch's replayer, built by torch_replay.sh's first use (one replay of the smallest trace).
bash bench/torch_replay.sh /tmp/t30/slimming_channel_prune_train.csv > "$OUT/torch_build.txt" 2>&1
GPUSCOPE=$bin/gpuscope timeout $((265 - (SECONDS - start))) python3 bench/headroom.py \
  --runner cuda --runner torch-default --runner torch-expandable --lo 0.6 --steps 6 \
  /tmp/t30/slimming_channel_prune_train.csv /tmp/t30/ivfpq_ann_search_infer.csv \
  > "$OUT/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/headroom.txt"
