#!/usr/bin/env bash
# Cold passes with and without another trace's memory given back just before: each trace
# replayed alone in a process of its own, then all of them in one process (as
# compare_torch.sh does), by each gpuscope binary given and by PyTorch; ROUNDS rounds
# (default 3). On the GPU machine, from the repository root:
#   bash bench/cold_after_release.sh OUT_DIR "BIN..." TRACE.csv...
# Writes OUT_DIR/<binary name>_{alone,together}_<round>.jsonl, torch_{alone,together}_<round>.txt
# and prints each trace's cold ns/op per setting (median of the rounds).
set -uo pipefail
out=$1
read -r -a bins <<< "$2"
shift 2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for r in $(seq 1 "${ROUNDS:-3}"); do
  for t in "$@"; do bash "$here/torch_replay.sh" "$t"; done > "$out/torch_alone_$r.txt" 2>&1
  bash "$here/torch_replay.sh" "$@" > "$out/torch_together_$r.txt" 2>&1
  for b in "${bins[@]}"; do
    n=$(basename "$b")
    for t in "$@"; do "$b" replay --backend cuda --format json "$t"; done > "$out/${n}_alone_$r.jsonl"
    "$b" replay --backend cuda --format json "$@" > "$out/${n}_together_$r.jsonl"
  done
done
python3 - "$out" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
cold = {}
for p in glob.glob(os.path.join(out, "*.jsonl")):
    setting = re.sub(r"_\d+\.jsonl$", "", os.path.basename(p))
    for line in open(p):
        r = json.loads(line)
        cold.setdefault((os.path.basename(r["trace"]), setting), []).append(r["cold_ns_per_op"])
for p in glob.glob(os.path.join(out, "torch_*.txt")):
    setting = re.sub(r"_\d+\.txt$", "", os.path.basename(p))
    mode = None
    for line in open(p):
        if line.startswith("=="):
            mode = "expandable" if "expandable" in line else "default"
        m = re.search(r"replay (\S+) pass 0 ops \d+: ([\d.]+) ns/op", line)
        if m and mode:
            cold.setdefault((os.path.basename(m[1]), f"{setting}_{mode}"), []).append(float(m[2]))
settings = sorted({s for _, s in cold})
print("| trace | " + " | ".join(settings) + " |")
print("|---|" + "---:|" * len(settings))
for t in sorted({t for t, _ in cold}):
    row = [f"{statistics.median(cold[(t, s)]):.0f}" if (t, s) in cold else "" for s in settings]
    print(f"| {t} | " + " | ".join(row) + " |")
PY
