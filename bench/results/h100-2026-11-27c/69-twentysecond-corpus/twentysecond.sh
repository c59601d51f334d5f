# The twenty-second corpus in one GPU call (H100), with the binaries of .device-bin.txz
# (built at commit 20313ec; the allocator's code has not changed since): recorded and
# compared before any change (corpus_run.sh, seven rounds), then, in the time left, the
# headroom of each new trace (PyTorch's two modes and gpuscope on CUDA, six bisection
# steps). From the repository root there: bash bench/results/h100-2026-11-27c/69-twentysecond-corpus/twentysecond.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
O=$OUT/twentysecond
mkdir -p "$O" "$OUT/headroom"
timeout 400 bash bench/record_traces/corpus_run.sh workloads_twentysecond.py "$bin/gpuscope" "$O" 7 > "$O/log.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$O/log.txt"
left=$((570 - (SECONDS - start)))
nvidia-smi > "$OUT/headroom/nvidia-smi.txt"
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner torch-default \
  --runner torch-expandable --runner cuda --lo 0.6 --steps 6 "$O"/traces/*.csv > "$OUT/headroom/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/headroom/headroom.txt"
gzip -9n "$O"/traces/*.csv
tar czf "$OUT/t22.tgz" -C "$OUT" twentysecond headroom && rm -rf "$O" "$OUT/headroom"
