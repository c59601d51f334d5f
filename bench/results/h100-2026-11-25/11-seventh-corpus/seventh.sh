set -uo pipefail
source bench/device_bin.sh
O=$OUT/seventh; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
git rev-parse HEAD > $O/commit.txt 2>/dev/null || true
start=$SECONDS
ALL_TIMEOUT=330 bash bench/record_traces/corpus_run.sh workloads_seventh.py $bin/gpuscope $O 5 > $O/log.txt 2>&1
echo "corpus done at $((SECONDS - start)) s (rc $?)" >> $O/log.txt
tar czf $OUT/seventh.tgz -C $OUT seventh
