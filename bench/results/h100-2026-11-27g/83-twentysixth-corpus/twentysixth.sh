# The twenty-sixth corpus in one GPU call (H100), with the gpuscope command of
# .device-bin.txz built at 79f1b6a (the runtime and `replay` unchanged since; only the lint
# has changed):
# recorded and compared before any change (corpus_run.sh, five rounds), then, in the time
# left, the headroom of each new trace (PyTorch's two modes and gpuscope on CUDA). From the
# repository root there:
#   bash bench/results/h100-2026-11-27g/83-twentysixth-corpus/twentysixth.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
O=$OUT/twentysixth
mkdir -p "$O" "$OUT/headroom"
timeout 420 bash bench/record_traces/corpus_run.sh workloads_twentysixth.py "$bin/gpuscope" "$O" 5 > "$O/log.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$O/log.txt"
left=$((570 - (SECONDS - start)))
nvidia-smi > "$OUT/headroom/nvidia-smi.txt"
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner torch-default \
  --runner torch-expandable --runner cuda --lo 0.6 --steps 6 "$O"/traces/*.csv > "$OUT/headroom/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/headroom/headroom.txt"
gzip -9n "$O"/traces/*.csv
tar czf "$OUT/t26.tgz" -C "$OUT" twentysixth headroom && rm -rf "$O" "$OUT/headroom"
