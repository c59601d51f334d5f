"""Table of bench/touch_replay.sh's output: per multi-stream trace, peak reserved MiB,
device allocations and the device allocations and maps of the last half of the passes
("late"; for PyTorch, device allocations only), with gpuscope's pools per stream and
shared, idle streams (no writes) and busy ones (--touch), and PyTorch's two modes with
the same writes.

Usage: python3 bench/touch_table.py OUT
"""
import json
import os
import sys


def load(path):
    rows = {}
    for line in open(path):
        if line.startswith("{"):
            r = json.loads(line)
            rows[os.path.basename(r["trace"])] = r
    return rows


def cell(r):
    calls = r["pass_calls"]
    late = calls[len(calls) // 2:]
    grew = sum(c["allocs"] + c["maps"] for c in late)
    waits = sum(c["stream_syncs"] + c["event_syncs"] for c in calls)
    return f"{r['peak_reserved'] >> 20} MiB, {r['device_allocs']}, late {grew}, waits {waits}"


def torch_runs(path):
    """{mode: {trace: [(peak_reserved, device_allocs) by pass]}} from torch_replay's
    output (two modes, headed by `==` lines)."""
    runs, mode = {}, None
    if not os.path.exists(path):
        return runs
    for line in open(path):
        if line.startswith("=="):
            mode = "expandable" if "expandable" in line else "default"
        elif line.startswith("replay ") and mode:
            name = os.path.basename(line.split()[1])
            fields = dict(f.strip().split(" ", 1) for f in line.split(":", 1)[1].split(",")[1:])
            runs.setdefault(mode, {}).setdefault(name, []).append(
                (int(fields["peak_reserved"]), int(fields["device_allocs"])))
    return runs


def torch_cell(passes):
    reserved, allocs = passes[-1]
    half = passes[len(passes) // 2 - 1][1]
    return f"{reserved >> 20} MiB, {allocs}, late {allocs - half}"


def main(out):
    runs = {k: load(os.path.join(out, f"share_{k}.jsonl"))
            for k in ("False", "False_touch", "True", "True_touch")}
    torch = torch_runs(os.path.join(out, "torch_touch.txt"))
    print("| trace | per stream, idle | per stream, --touch | shared, idle | shared, --touch "
          "| PyTorch default, writes | PyTorch expandable, writes |")
    print("|---|---|---|---|---|---|---|")
    for name in sorted(runs["False"]):
        cells = [cell(runs[k][name]) for k in runs]
        cells += [torch_cell(torch[m][name]) if name in torch.get(m, {}) else "-"
                  for m in ("default", "expandable")]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
