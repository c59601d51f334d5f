#!/usr/bin/env bash
# The GPU-machine call that made the third corpus (workloads_third.py) and replayed it,
# before any change, through gpuscope and PyTorch (BENCHMARKS.md, "A third corpus, held
# out"). From the repository root, with a release build of the gpuscope command:
#   bash bench/record_traces/third_corpus_run.sh GPUSCOPE_BINARY OUT_DIR [REPEATS]
# Writes OUT_DIR/traces/ (NAME.csv, NAME.json, record.log), OUT_DIR/cmp/ (the
# comparison of compare_torch.sh on the new traces) and, when the time allows,
# OUT_DIR/cmp_all/ (the same on every trace of tests/data/traces/ and the new ones).
set -uo pipefail
bin=$1
out=$2
repeats=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
names=$(cd "$here" && python3 -c 'import ast
for n in ast.parse(open("workloads_third.py").read()).body:
    if isinstance(n, ast.Assign) and n.targets[0].id == "WORKLOADS":
        print(" ".join(k.value for k in n.value.keys))')
start=$SECONDS
# shellcheck disable=SC2086
bash "$here/record_all.sh" "$out/traces" $names
echo "recorded in $((SECONDS - start)) s"
new=("$out"/traces/*.csv)
REPEATS=$repeats bash "$here/../compare_torch.sh" "$bin" "$out/cmp" "${new[@]}" > /dev/null
echo "third corpus compared at $((SECONDS - start)) s"
if [[ -n ${ALL_TIMEOUT:-} ]]; then
  REPEATS=$repeats timeout "$ALL_TIMEOUT" bash "$here/../compare_torch.sh" "$bin" "$out/cmp_all" \
    tests/data/traces/*.csv "${new[@]}" > /dev/null || echo "full comparison cut off"
  echo "all compared at $((SECONDS - start)) s"
fi
