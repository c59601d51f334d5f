set -uo pipefail
source bench/device_bin.sh
O=$OUT/diag; mkdir -p $O
{ lscpu; echo; lscpu -e; echo; (numactl -H 2>&1 || echo "no numactl"); echo; cat /sys/kernel/mm/transparent_hugepage/enabled; cat /proc/cmdline; } > $O/topo.txt 2>&1
T=tests/data/traces/bert_infer.csv
run() { # label, command prefix...
  local label=$1; shift
  "$@" $bin/gpuscope replay --backend cuda --format json --warm-passes 4000 $T > $O/tmp.json 2>/dev/null &
  local pid=$!
  sleep 1.0
  local threads; threads=$(ps -L -o tid=,psr=,pcpu=,comm= -p $pid 2>/dev/null | tr '\n' ';')
  wait $pid
  python3 -c "
import json,sys,statistics
d=json.loads(open('$O/tmp.json').readline()); p=d['pass_ns_per_op'][1:]
print('$label', round(statistics.median(p),1), round(min(p),1), '|', '''$threads''')" >> $O/runs.txt
}
for i in 1 2 3 4 5 6 7 8; do
  run none
  run c0-7 taskset -c 0-7
  run c8-15 taskset -c 8-15
  run even taskset -c 0,2,4,6,8,10,12,14
done
tar czf $OUT/diag.tgz -C $OUT diag
M=$OUT/mae; mkdir -p $M
bash bench/record_traces/record_all.sh $M/traces mae_varmask_train > $M/log.txt 2>&1
REPEATS=5 bash bench/compare_torch.sh $bin/gpuscope $M/cmp $M/traces/mae_varmask_train.csv > /dev/null 2>&1
tar czf $OUT/mae.tgz -C $OUT mae
