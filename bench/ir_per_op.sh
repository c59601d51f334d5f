#!/usr/bin/env bash
# Instructions the allocator executes per replayed operation in warm passes, counted by
# valgrind's cachegrind (deterministic, unlike timings on a shared machine): a replay
# with 6 warm passes minus one with 1, over 5 passes of the trace's operations, on the
# simulated device. From the repository root:
#   bash bench/ir_per_op.sh GPUSCOPE_BINARY TRACE_NAME...
# (TRACE_NAME: a trace of tests/data/traces without .csv or .csv.gz.) Needs valgrind.
set -euo pipefail
bin=$1; shift
count() {
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
    "$bin" replay --backend sim --warm-passes "$1" "$2" 2>&1 >/dev/null \
    | awk '/I *refs/ {gsub(",", "", $NF); print $NF}'
}
for t in "$@"; do
  f=tests/data/traces/$t.csv
  [[ -f $f ]] || f=$f.gz
  ops=$(($(gzip -dcf "$f" | wc -l) - 1))
  a=$(count 1 "$f")
  b=$(count 6 "$f")
  echo "$t $(( (b - a) / (5 * ops) )) Ir/op"
done
