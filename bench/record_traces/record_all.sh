#!/usr/bin/env bash
# Records workloads (one process each) and the small snapshot pickle. On the GPU
# machine, from the repository root:
#   bash bench/record_traces/record_all.sh OUT_DIR [NAME...]
# NAMEs: workloads of the workloads*.py files here (workloads.py and a file a corpus;
# record.py finds them the same way)
# (default: every one; the tenth's run one process per GPU under torchrun, two GPUs).
# Writes OUT_DIR/NAME.csv and OUT_DIR/NAME.json per workload, OUT_DIR/small_train.pickle
# (when no NAME is given) and OUT_DIR/record.log.
set -uo pipefail
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  read -r -a names <<< "$(cd "$here" && python3 -c 'import ast, glob
for f in sorted(glob.glob("workloads*.py")):
    for n in ast.parse(open(f).read()).body:
        if isinstance(n, ast.Assign) and n.targets[0].id == "WORKLOADS":
            print(" ".join(k.value for k in n.value.keys), end=" ")')"
  pickle=1
fi
for name in "${names[@]}"; do
  # Data-parallel workloads run one process per GPU (record.py --ranks says how many).
  ranks=$(cd "$here" && python3 record.py --ranks "$name")
  if [[ $ranks -gt 1 ]]; then
    timeout 300 torchrun --standalone --nproc_per_node="$ranks" "$here/record.py" "$out" "$name" 2>&1 | tail -5
  else
    timeout 300 python3 "$here/record.py" "$out" "$name" 2>&1 | tail -5
  fi
done > "$out/record.log"
if [[ -n ${pickle:-} ]]; then
  timeout 120 python3 "$here/record.py" --pickle "$out/small_train.pickle" >> "$out/record.log" 2>&1
fi
cat "$out/record.log"
