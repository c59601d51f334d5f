set -uo pipefail
source bench/device_bin.sh
O=$OUT/nineteenth; mkdir -p $O
bash bench/record_traces/corpus_run.sh workloads_nineteenth.py $bin/gpuscope $O 9 > $O/log.txt 2>&1
echo "rc $?" >> $O/log.txt
tar czf $OUT/nineteenth.tgz -C $OUT nineteenth
