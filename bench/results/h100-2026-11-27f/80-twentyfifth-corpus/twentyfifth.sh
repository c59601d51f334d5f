# The twenty-fifth corpus in one GPU call (H100), with the gpuscope command of
# .device-bin.txz built at HEAD (no allocator change since the twenty-third corpus):
# recorded and compared before any change (corpus_run.sh, five rounds), then, in the time
# left, the headroom of each new trace (PyTorch's two modes and gpuscope on CUDA). From the
# repository root there:
#   bash bench/results/h100-2026-11-27f/80-twentyfifth-corpus/twentyfifth.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
O=$OUT/twentyfifth
mkdir -p "$O" "$OUT/headroom"
timeout 420 bash bench/record_traces/corpus_run.sh workloads_twentyfifth.py "$bin/gpuscope" "$O" 5 > "$O/log.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$O/log.txt"
left=$((570 - (SECONDS - start)))
nvidia-smi > "$OUT/headroom/nvidia-smi.txt"
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner torch-default \
  --runner torch-expandable --runner cuda --lo 0.6 --steps 6 "$O"/traces/*.csv > "$OUT/headroom/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/headroom/headroom.txt"
gzip -9n "$O"/traces/*.csv
tar czf "$OUT/t25.tgz" -C "$OUT" twentyfifth headroom && rm -rf "$O" "$OUT/headroom"
