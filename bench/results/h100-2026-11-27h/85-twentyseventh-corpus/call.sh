# The twenty-seventh corpus in one GPU call (H100), with the gpuscope command of
# .device-bin.txz built at 3475375 (the runtime and `replay` as at 79f1b6a):
# first, which CPUs run a replay at which of the machine's two speeds (BENCHMARKS.md, "Two
# speeds per process"): the simulated device's replay of bert_infer (no CUDA driver threads
# to share a CPU with) pinned to each CPU in turn, twice over, then eight unpinned; then the
# corpus recorded and compared before any change (corpus_run.sh, five rounds, cut at 420 s);
# then, in the time left, the headroom of the new traces (PyTorch's two modes and gpuscope
# on CUDA). The first run of this call (594 s) lost its results: one 20 MB archive, over the
# 16 MiB a file that comes back; this is the second. From the repository root there:
#   bash bench/results/h100-2026-11-27h/85-twentyseventh-corpus/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
O=$OUT/twentyseventh
mkdir -p "$O" "$OUT/headroom" "$OUT/speeds"
S=$OUT/speeds/cpus.txt
{ lscpu; echo; cat /sys/kernel/mm/transparent_hugepage/enabled; } > "$OUT/speeds/lscpu.txt" 2>&1
warm() { python3 -c 'import json,sys,statistics; d=json.loads(sys.stdin.read()); print("%.1f" % statistics.median(d["pass_ns_per_op"][1:]))'; }
for sweep in 1 2; do
  for c in $(seq 0 $(($(nproc) - 1))); do
    echo "sweep $sweep cpu $c $(taskset -c "$c" "$bin/gpuscope" replay --backend sim --format json --warm-passes 9 tests/data/traces/bert_infer.csv | warm)" >> "$S"
  done
done
for i in 1 2 3 4 5 6 7 8; do
  echo "unpinned $i $("$bin/gpuscope" replay --backend sim --format json --warm-passes 9 tests/data/traces/bert_infer.csv | warm)" >> "$S"
done
echo "speeds done after $((SECONDS - start)) s" >> "$S"
timeout 420 bash bench/record_traces/corpus_run.sh workloads_twentyseventh.py "$bin/gpuscope" "$O" 5 > "$O/log.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$O/log.txt"
left=$((555 - (SECONDS - start)))
nvidia-smi > "$OUT/headroom/nvidia-smi.txt"
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner torch-default \
  --runner torch-expandable --runner cuda --lo 0.6 --steps 6 "$O"/traces/*.csv > "$OUT/headroom/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/headroom/headroom.txt"
gzip -9n "$O"/traces/*.csv
# Files come back at most 16 MiB each (8 files, 64 MiB in all): the compressed traces as one
# archive in 15 MiB parts (cat t27_traces.tar.part.* | tar x), the rest in one more.
tar cf "$OUT/t27_traces.tar" -C "$O" traces && rm -rf "$O/traces"
(cd "$OUT" && split -b 15m t27_traces.tar t27_traces.tar.part. && rm t27_traces.tar)
tar czf "$OUT/t27.tgz" -C "$OUT" twentyseventh headroom speeds && rm -rf "$O" "$OUT/headroom" "$OUT/speeds"
ls -la "$OUT"
