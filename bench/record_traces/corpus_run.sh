#!/usr/bin/env bash
# The GPU-machine call that records one corpus of workloads and replays it, before any
# change, through gpuscope and PyTorch. From the repository root, with a release build
# of the gpuscope command:
#   bash bench/record_traces/corpus_run.sh WORKLOADS_FILE GPUSCOPE_BINARY OUT_DIR [REPEATS, default 9]
# WORKLOADS_FILE: workloads_third.py, workloads_fourth.py, ... (its WORKLOADS names), by
# its name or a path.
# Writes OUT_DIR/machine.txt (the card and the host's CPU), OUT_DIR/traces/ (NAME.csv,
# NAME.json, record.log), OUT_DIR/cmp/ (the comparison of compare_torch.sh on the new
# traces, ten-pass replay included: cmp/gpuscope_passes10.jsonl) and, with ALL_TIMEOUT=SECONDS set,
# OUT_DIR/cmp_all/ (the same on every trace of tests/data/traces/ and the new ones,
# cut off after that long).
set -uo pipefail
file=$1
bin=$2
out=$3
repeats=${4:-9}
here=$(cd "$(dirname "$0")" && pwd)
# A path from here, or a file of this folder by its name.
[[ -f $file ]] || file=$here/$file
[[ -f $file ]] || { echo "corpus_run.sh: no workloads file $1" >&2; exit 2; }
file=$(cd "$(dirname "$file")" && pwd)/$(basename "$file")
names=$(cd "$here" && python3 -c 'import ast, sys
for n in ast.parse(open(sys.argv[1]).read()).body:
    if isinstance(n, ast.Assign) and n.targets[0].id == "WORKLOADS":
        print(" ".join(k.value for k in n.value.keys))' "$file")
[[ -n $names ]] || { echo "corpus_run.sh: $file names no WORKLOADS" >&2; exit 2; }
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>/dev/null || echo "no nvidia-smi"
  lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|MHz|L2 cache" || true; } > "$out/machine.txt"
start=$SECONDS
# shellcheck disable=SC2086
bash "$here/record_all.sh" "$out/traces" $names
echo "recorded in $((SECONDS - start)) s"
new=("$out"/traces/*.csv)
REPEATS=$repeats bash "$here/../compare_torch.sh" "$bin" "$out/cmp" "${new[@]}" > /dev/null
echo "corpus compared at $((SECONDS - start)) s"
if [[ -n ${ALL_TIMEOUT:-} ]]; then
  REPEATS=$repeats timeout "$ALL_TIMEOUT" bash "$here/../compare_torch.sh" "$bin" "$out/cmp_all" \
    tests/data/traces/*.csv* "${new[@]}" > /dev/null || echo "full comparison cut off"
  echo "all compared at $((SECONDS - start)) s"
fi
