"""Turns the outputs of compare_torch.sh into one markdown table.

Usage: python3 bench/compare_torch.py OUT_DIR
"""
import json
import os
import re
import sys
from collections import defaultdict

LINE = re.compile(
    r"replay (?P<trace>\S+) pass (?P<pass>\d+) ops (?P<ops>\d+): (?P<ns>[\d.]+) ns/op, "
    r"peak_allocated (?P<alloc>\d+), peak_reserved (?P<res>\d+), device_allocs (?P<dev>\d+)"
)


def torch_runs(path):
    """{mode: {trace: dict}} from torch_replay.sh's output."""
    runs = defaultdict(dict)
    mode = None
    passes = defaultdict(list)
    for line in open(path):
        if line.startswith("=="):
            mode = "expandable" if "expandable" in line else "default"
            continue
        m = LINE.search(line)
        if m and mode:
            passes[(mode, m["trace"])].append(m)
    for (mode, trace), ms in passes.items():
        warm = [float(m["ns"]) for m in ms if int(m["pass"]) > 0]
        last = ms[-1]
        runs[mode][os.path.basename(trace)] = {
            "ops": int(last["ops"]),
            "cold_ns_per_op": float(ms[0]["ns"]),
            "warm_ns_per_op": sum(warm) / len(warm),
            "peak_allocated": int(last["alloc"]),
            "peak_reserved": int(last["res"]),
            "device_allocs": int(last["dev"]),
        }
    pairs = re.findall(r"pair size (\d+) torch_caching ([\d.]+) ns", open(path).read())
    return runs, pairs


def gpuscope_runs(path):
    out = {}
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            out[os.path.basename(r["trace"])] = r
    return out


def main(out_dir):
    torch, pairs = torch_runs(os.path.join(out_dir, "torch.txt"))
    ours = {
        "gpuscope": gpuscope_runs(os.path.join(out_dir, "gpuscope.jsonl")),
        "gpuscope reserve_ratio 1.02": gpuscope_runs(os.path.join(out_dir, "gpuscope_tight.jsonl")),
        "gpuscope plain": gpuscope_runs(os.path.join(out_dir, "gpuscope_plain.jsonl")),
    }
    allocators = [("PyTorch default", torch.get("default", {})), ("PyTorch expandable", torch.get("expandable", {}))]
    allocators += list(ours.items())
    traces = sorted(set().union(*[set(runs) for _, runs in allocators]))
    print("| trace | allocator | warm ns/op | cold ns/op | peak allocated (MiB) | peak reserved (MiB) | reserved/allocated | device allocs | chunks | warm maps/pass | warm ns/op vs PyTorch default |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in traces:
        base = torch.get("default", {}).get(t)
        for name, runs in allocators:
            r = runs.get(t)
            if not r:
                continue
            ratio = r["peak_reserved"] / max(r["peak_allocated"], 1)
            speed = f"{r['warm_ns_per_op'] / base['warm_ns_per_op']:.3f}" if base else "n/a"
            print(
                f"| {t} | {name} | {r['warm_ns_per_op']:.1f} | {r['cold_ns_per_op']:.1f} | "
                f"{r['peak_allocated'] / 2**20:.1f} | {r['peak_reserved'] / 2**20:.1f} | {ratio:.4f} | "
                f"{r['device_allocs']} | {r.get('device_chunks', '')} | "
                f"{r['warm_device_maps'] // max(len(r['pass_ns_per_op']) - 1, 1) if 'warm_device_maps' in r else ''} | {speed} |"
            )
    if pairs:
        print()
        print("PyTorch alloc+free pairs: " + ", ".join(f"{int(s)} B: {ns} ns" for s, ns in pairs))


if __name__ == "__main__":
    main(sys.argv[1])
