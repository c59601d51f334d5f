# The twenty-ninth corpus's comparison, again (H100), with the same gpuscope command as
# call.sh (built at c0621c5): call.sh's recording took 340 s, which left one round of the
# comparison and no ten-pass replay or full headroom. Here the eight traces, stored in
# tests/data/traces, are compared in three more rounds and the ten-pass replay
# (compare_torch.sh, cut at 340 s), then their headroom in the time left (470 s in all).
# From the repository root there:
#   bash bench/results/h100-2026-11-28/91-twentyninth-corpus/call2.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
O=$OUT/twentyninth2; mkdir -p "$O"
names="kivi_quant_kv_decode fedavg_clients_round_train megatron_flat_buffers_train
  paradigms_picard_sample mil_wsi_bag_train rigl_dynamic_sparse_train
  adaptive_softmax_lm_train dnc_external_memory_train"
mkdir -p /tmp/t29
for n in $names; do gzip -dc "tests/data/traces/$n.csv.gz" > "/tmp/t29/$n.csv"; done
REPEATS=3 timeout 340 bash bench/compare_torch.sh "$bin/gpuscope" "$O/cmp" /tmp/t29/*.csv \
  > "$O/compare.log" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$O/compare.log"
left=$((470 - (SECONDS - start)))
runners=(--runner cuda)
[[ -x /tmp/torch_replay ]] && runners+=(--runner torch-default --runner torch-expandable)
if [[ $left -gt 0 ]]; then
  # The traces call.sh's headroom did not reach.
  GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py "${runners[@]}" --lo 0.6 \
    --steps 6 /tmp/t29/{dnc_external_memory_train,fedavg_clients_round_train,kivi_quant_kv_decode,megatron_flat_buffers_train,mil_wsi_bag_train,paradigms_picard_sample,rigl_dynamic_sparse_train}.csv \
    > "$O/headroom.txt" 2>&1
  echo "rc $? after $((SECONDS - start)) s" >> "$O/headroom.txt"
fi
tar czf "$OUT/twentyninth2.tgz" -C "$OUT" twentyninth2 && rm -rf "$O"
