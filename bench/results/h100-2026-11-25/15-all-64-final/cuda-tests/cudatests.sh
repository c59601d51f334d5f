set -uo pipefail
source bench/device_bin.sh
O=$OUT/cudatests; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1
for t in $bin/tests/*; do echo "== $(basename $t)"; timeout 150 $t --test-threads=4 2>&1 | grep -E "test result|FAILED|skipped:|panicked at" ; done > $O/tests.txt 2>&1
T=tests/data/traces
for r in 1 2 3 4 5 6 7 8 9; do $bin/gpuscope replay --backend cuda --format json --warm-passes 20 $T/offload_layers_infer.csv $T/comm_stream_buckets_train.csv > $O/replay_$r.jsonl; done
tar czf $OUT/cudatests.tgz -C $OUT cudatests
cat $O/tests.txt | grep -E "==|test result|FAILED"
