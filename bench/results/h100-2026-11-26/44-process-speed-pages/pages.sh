# Whether the two speeds of a replay process (BENCHMARKS.md, "Two speeds per process")
# follow where its heap lands: the same replay with mimalloc's default pages and with
# large OS pages (transparent huge pages by madvise), alternating, twelve processes each.
set -uo pipefail
source bench/device_bin.sh
O=$OUT/pages; mkdir -p $O
{ cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; grep -i huge /proc/meminfo; } > $O/thp.txt 2>&1
T=tests/data/traces/bert_infer.csv
run() { # label, env...
  local label=$1; shift
  env "$@" $bin/gpuscope replay --backend cuda --format json --warm-passes 2000 $T > $O/tmp.json 2>/dev/null
  python3 -c "
import json,statistics
d=json.loads(open('$O/tmp.json').readline()); p=d['pass_ns_per_op'][1:]
print('$label', round(statistics.median(p),1), round(min(p),1))" >> $O/runs.txt
}
for i in $(seq 12); do
  run default X=1
  run large_pages MIMALLOC_ALLOW_LARGE_OS_PAGES=1
  run eager_commit MIMALLOC_ARENA_EAGER_COMMIT=1 MIMALLOC_ALLOW_LARGE_OS_PAGES=1
done
grep AnonHugePages /proc/meminfo >> $O/thp.txt
