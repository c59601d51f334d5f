# The twenty-seventh corpus's third GPU call (H100; the gpuscope command of .device-bin.txz
# built at 3475375): MuZero's recording again, its whole log kept (the second call's stopped
# with a C++ abort whose message record_all.sh's `tail -5` cut off), compared in five rounds if
# it records; the headroom of the two traces the second call's did not reach (Reformer, RetNet)
# and MuZero's. From the repository root there:
#   bash bench/results/h100-2026-11-27h/87-twentyseventh-rest/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
C=$OUT/r
mkdir -p "$C/traces"
(cd bench/record_traces && timeout 120 python3 record.py "$C/traces" muzero_reanalyse_unroll_train) > "$C/record.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$C/record.txt"
t=tests/data/traces
mz=$C/traces/muzero_reanalyse_unroll_train.csv
if [[ -f $mz ]]; then
  REPEATS=5 timeout 150 bash bench/compare_torch.sh "$bin/gpuscope" "$C/cmp" "$mz" > /dev/null 2>&1
  echo "compare rc $? after $((SECONDS - start)) s" >> "$C/record.txt"
fi
rest=("$t/reformer_lsh_attention_train.csv.gz")
[[ -f $mz ]] && rest+=("$mz")
rest+=("$t/retnet_chunkwise_recurrent_train.csv.gz")
left=$((400 - (SECONDS - start)))
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner cuda --runner torch-default \
  --runner torch-expandable --lo 0.6 --steps 6 "${rest[@]}" > "$C/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$C/headroom.txt"
gzip -9n "$C"/traces/*.csv 2> /dev/null
tar czf "$OUT/t27c.tgz" -C "$OUT" r && rm -rf "$C"
ls -la "$OUT"
