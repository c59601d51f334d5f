#!/usr/bin/env bash
# Records every workload of workloads.py (one process each) and the small snapshot
# pickle. On the GPU machine, from the repository root:
#   bash bench/record_traces/record_all.sh OUT_DIR
# Writes OUT_DIR/NAME.csv and OUT_DIR/NAME.json per workload, OUT_DIR/small_train.pickle
# and OUT_DIR/record.log.
set -uo pipefail
out=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
names=$(cd "$here" && python3 -c 'import ast,sys; src=open("workloads.py").read(); t=ast.parse(src)
for n in t.body:
    if isinstance(n, ast.Assign) and n.targets[0].id == "WORKLOADS":
        print(" ".join(k.value for k in n.value.keys))')
for name in $names; do
  timeout 300 python3 "$here/record.py" "$out" "$name" 2>&1 | tail -5
done > "$out/record.log"
timeout 120 python3 "$here/record.py" --pickle "$out/small_train.pickle" >> "$out/record.log" 2>&1
cat "$out/record.log"
