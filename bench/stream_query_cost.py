"""Summarises an in-situ measure of what `cuStreamQuery` costs the allocator: warm ns/op
per trace of the shipped `gpuscope` binary (q_ship_R.jsonl) against a build whose CUDA
`query_stream` answers "idle" without calling the driver (q_noq_R.jsonl), both from
`gpuscope replay --backend cuda --format json --warm-passes 20`, alternating, rounds R.
Prints, per trace, the median, lowest and 90th percentile of the warm passes' ns/op
over all rounds.

Usage: python3 bench/stream_query_cost.py DIR
"""
import glob
import json
import os
import statistics
import sys


def passes(files):
    out = {}
    for f in sorted(files):
        for line in open(f):
            if line.startswith("{"):
                r = json.loads(line)
                out.setdefault(os.path.basename(r["trace"]), []).extend(r["pass_ns_per_op"][1:])
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    ship = passes(glob.glob(os.path.join(d, "q_ship_*.jsonl")))
    noq = passes(glob.glob(os.path.join(d, "q_noq_*.jsonl")))
    print("| trace | warm passes | with the query: median (min, p90) ns/op | without: median (min, p90) |")
    print("|---|---:|---:|---:|")
    for t in ship:
        cells = []
        for v in (ship[t], noq.get(t, [])):
            v = sorted(v)
            cells.append(f"{statistics.median(v):.1f} ({v[0]:.1f}, {v[int(len(v) * 0.9)]:.1f})"
                         if v else "-")
        print(f"| {t} | {len(ship[t])} | {cells[0]} | {cells[1]} |")
