#!/usr/bin/env bash
# Two gpuscope binaries replaying every trace on the GPU, alternately, ROUNDS times
# (default 3): the same warm passes, so that a change of the allocator's hot path is
# measured against the binary before it on the same machine in the same call.
#   bash bench/ab_replay.sh OLD NEW OUT [ROUNDS]
# Writes OUT/{old,new}_R.jsonl and prints the median warm ns/op over the traces, per run.
set -euo pipefail
old=$1 new=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for side in old new; do
    bin=$old; [[ $side == new ]] && bin=$new
    "$bin" replay --backend cuda --format json --warm-passes 10 tests/data/traces/*.csv* > "$out/${side}_$r.jsonl"
    python3 -c 'import json,statistics,sys
v=[json.loads(l)["warm_ns_per_op"] for l in open(sys.argv[1])]
print(sys.argv[2], sys.argv[3], "median warm ns/op over", len(v), "traces:", round(statistics.median(v), 1))' "$out/${side}_$r.jsonl" "$side" "$r"
  done
done
