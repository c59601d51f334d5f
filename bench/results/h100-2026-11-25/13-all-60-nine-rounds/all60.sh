set -uo pipefail
source bench/device_bin.sh
O=$OUT/all60; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
start=$SECONDS
REPEATS=9 bash bench/compare_torch.sh $bin/gpuscope $O/cmp tests/data/traces/*.csv > /dev/null 2> $O/stderr.txt
echo "compared in $((SECONDS - start)) s (rc $?)" > $O/log.txt
tar czf $OUT/all60.tgz -C $OUT all60
