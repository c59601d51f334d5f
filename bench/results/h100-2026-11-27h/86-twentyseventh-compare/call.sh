# The twenty-seventh corpus's second GPU call (H100; the gpuscope command of .device-bin.txz
# built at 3475375, as the first). The first call recorded seven of the eight workloads
# (MuZero's stopped on NaN priorities, now guarded) and compared them in one round before its
# limit. Here: MuZero recorded, then all eight compared in five alternating rounds with the
# ten-pass replay (compare_torch.sh), then, in the time left, the headroom of the traces the
# first call's headroom did not reach. From the repository root there:
#   bash bench/results/h100-2026-11-27h/86-twentyseventh-compare/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
C=$OUT/c
mkdir -p "$C"
timeout 100 bash bench/record_traces/record_all.sh "$C/traces" muzero_reanalyse_unroll_train > "$C/record.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$C/record.txt"
t=tests/data/traces
files=()
for n in act_universal_transformer_train encodec_rvq_msstft_train knn_lm_datastore_decode \
  logging_leak_graphs_train masked_diffusion_lm_sample reformer_lsh_attention_train \
  retnet_chunkwise_recurrent_train; do files+=("$t/$n.csv.gz"); done
mz=$C/traces/muzero_reanalyse_unroll_train.csv
[[ -f $mz ]] && files+=("$mz")
REPEATS=5 timeout 440 bash bench/compare_torch.sh "$bin/gpuscope" "$C/cmp" "${files[@]}" > /dev/null 2>&1
echo "compare rc $? after $((SECONDS - start)) s" >> "$C/record.txt"
rest=("$t/knn_lm_datastore_decode.csv.gz" "$t/logging_leak_graphs_train.csv.gz"
  "$t/masked_diffusion_lm_sample.csv.gz" "$t/reformer_lsh_attention_train.csv.gz")
[[ -f $mz ]] && rest+=("$mz")
rest+=("$t/retnet_chunkwise_recurrent_train.csv.gz")
left=$((560 - (SECONDS - start)))
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner cuda --runner torch-default \
  --runner torch-expandable --lo 0.6 --steps 6 "${rest[@]}" > "$C/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$C/headroom.txt"
gzip -9n "$C"/traces/*.csv
tar czf "$OUT/t27b.tgz" -C "$OUT" c && rm -rf "$C"
ls -la "$OUT"
