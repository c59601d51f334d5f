"""What the allocator does in warm passes when a workload fills most of the device: every
trace of tests/data/traces with its requests scaled (as bench/headroom.py scales them) so
that its peak of live memory is a given fraction of the simulated 80 GiB device, replayed
cold and twice warm on the simulated device; per fraction, how many traces fit, and how
many driver calls (allocate, map, set access, unmap, release) and stream synchronisations
the last warm pass makes. A warm pass that makes them is one whose memory moves between
arenas and pools as the device runs out each pass (given back, then mapped again): on a GPU
each call costs microseconds where a warm operation costs tens of nanoseconds.

Usage, from the repository root:
    python3 bench/pressure_scan.py GPUSCOPE_BINARY OUT.jsonl [--fractions 0.8,0.9,0.95] [TRACE...]
Writes one JSON line per (trace, fraction) to OUT.jsonl (whether it fit, and the driver
calls of each pass) and prints a summary per fraction. GPUSCOPE_ALLOC_CONF applies.
About 10 minutes for three fractions of the 210 traces on a 2-CPU machine.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import headroom  # noqa: E402  (read_trace, write_scaled)

DEVICE = 80 << 30
MOVES = ("allocs", "maps", "set_access", "unmaps", "frees")


def scan(binary, traces, fractions, out):
    with tempfile.TemporaryDirectory() as tmp:
        for path in traces:
            header, rows, peak = headroom.read_trace(path)
            for frac in fractions:
                scaled = os.path.join(tmp, "scaled.csv")
                headroom.write_scaled(header, rows, frac * DEVICE / peak, scaled)
                r = subprocess.run([binary, "replay", "--backend", "sim", "--format", "json",
                                    "--warm-passes", "2", scaled], capture_output=True, text=True)
                rec = {"trace": os.path.basename(path), "fraction": frac, "fit": r.returncode == 0}
                if r.returncode == 0:
                    d = json.loads(r.stdout)
                    rec.update(ops=d["ops"], pass_calls=d["pass_calls"])
                out.write(json.dumps(rec) + "\n")
                out.flush()


def summary(records, fractions):
    print("| live peak / device | traces that fit | last warm pass with driver calls | "
          "with at least one a operation | median calls an operation (of those) | most | "
          "with stream synchronisations |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for frac in fractions:
        rs = [r for r in records if r["fraction"] == frac]
        fit = [r for r in rs if r["fit"]]
        per = [sum(r["pass_calls"][-1][k] for k in MOVES) / r["ops"] for r in fit]
        moving = [p for p in per if p > 0]
        syncs = sum(r["pass_calls"][-1]["stream_syncs"] > 0 for r in fit)
        print(f"| {frac} | {len(fit)} of {len(rs)} | {len(moving)} | {sum(p >= 1 for p in per)} | "
              f"{statistics.median(moving) if moving else 0:.2f} | {max(per, default=0):.1f} | {syncs} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("out")
    ap.add_argument("--fractions", default="0.8,0.9,0.95")
    ap.add_argument("traces", nargs="*")
    args = ap.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]
    traces = args.traces or sorted(glob.glob("tests/data/traces/*.csv*"))
    with open(args.out, "w") as out:
        scan(args.binary, traces, fractions, out)
    summary([json.loads(line) for line in open(args.out)], fractions)


if __name__ == "__main__":
    main()
