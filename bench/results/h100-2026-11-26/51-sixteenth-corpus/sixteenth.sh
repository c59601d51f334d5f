set -uo pipefail
source bench/device_bin.sh
O=$OUT/sixteenth; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
lscpu | grep -E "Model name|^CPU\(s\)|MHz|L2 cache" >> $O/gpu.txt 2>&1
start=$SECONDS
bash bench/record_traces/corpus_run.sh workloads_sixteenth.py $bin/gpuscope $O 9 > $O/log.txt 2>&1
echo "corpus done at $((SECONDS - start)) s (rc $?)" >> $O/log.txt
$bin/gpuscope replay --backend cuda --format json --warm-passes 10 $O/traces/*.csv > $O/cmp/gpuscope_passes10.jsonl 2>> $O/log.txt
tar czf $OUT/sixteenth.tgz -C $OUT sixteenth
