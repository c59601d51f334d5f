"""How far gpuscope's reserved / allocated is from what a layout that never moves memory
can reach: `bench/layout_bounds.py`'s offline layouts (knowing every lifetime, per
(stream, pool) arena) against the ratios of a `compare_torch.sh` call, per trace and in
total.

Usage: python3 bench/layout_bounds.py tests/data/traces/*.csv* > BOUNDS.txt
       python3 bench/layout_gap.py BOUNDS.txt CMP_DIR
"""
import json
import os
import re
import sys

BOUND = re.compile(r"^(\S+\.csv(?:\.gz)?): offline static layout / peak live = ([\d.]+)")


def bounds(path):
    out = {}
    for line in open(path):
        m = BOUND.match(line)
        if m:
            out[m[1]] = float(m[2])
    return out


def ratios(cmp_dir):
    out = {}
    for line in open(os.path.join(cmp_dir, "gpuscope.jsonl")):
        if line.startswith("{"):
            r = json.loads(line)
            out[os.path.basename(r["trace"])] = r["peak_reserved"] / r["peak_allocated"]
    return out


def main():
    b = bounds(sys.argv[1])
    g = ratios(sys.argv[2])
    rows = sorted((t, b[t], g[t]) for t in b if t in g)
    print("| trace | offline layout / live | gpuscope reserved / allocated | gap |")
    print("|---|---:|---:|---:|")
    for t, lb, r in rows:
        print(f"| {t} | {lb:.4f} | {r:.4f} | {r / lb - 1:+.1%} |")
    n = len(rows)
    above = sum(lb > 1.02 for _, lb, _ in rows)
    gaps = sorted(r / lb - 1 for _, lb, r in rows)
    within = lambda x: sum(gap <= x for gap in gaps)
    print()
    print(f"{n} traces; the offline layout above 1.02 on {above}; gpuscope at most 1.02 on "
          f"{sum(r <= 1.02 for _, _, r in rows)}; gpuscope within 2% of the offline layout "
          f"on {within(0.02)}, within 5% on {within(0.05)}, within 10% on {within(0.10)}; "
          f"median gap {gaps[n // 2]:+.1%}, largest {gaps[-1]:+.1%}")


if __name__ == "__main__":
    main()
