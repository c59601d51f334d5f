set -uo pipefail
source bench/device_bin.sh
O=$OUT/eighth; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
start=$SECONDS
bash bench/record_traces/corpus_run.sh workloads_eighth.py $bin/gpuscope $O 9 > $O/log.txt 2>&1
echo "corpus done at $((SECONDS - start)) s (rc $?)" >> $O/log.txt
tar czf $OUT/eighth.tgz -C $OUT eighth
