# The binary of the eleventh and twelfth sessions on every trace (127), against PyTorch, nine alternating rounds
# (from the repository root on the GPU machine, after bench/build_device_bins.sh here).
set -uo pipefail
source bench/device_bin.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|MHz|L[23] cache|NUMA node\(s\)|Hypervisor' >> $OUT/gpu.txt 2>&1
start=$SECONDS
REPEATS=9 bash bench/compare_torch.sh $bin/gpuscope /tmp/cmp tests/data/traces/*.csv* > /dev/null 2> $OUT/stderr.txt
echo "compared $(ls tests/data/traces/*.csv* | wc -l) traces in $((SECONDS - start)) s" >> $OUT/gpu.txt
python3 bench/pack_repeats.py /tmp/cmp >> $OUT/gpu.txt
tar czf $OUT/cmp.tgz -C /tmp cmp
