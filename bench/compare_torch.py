"""Turns the outputs of compare_torch.sh into markdown tables: every allocator on every
trace, then gpuscope (default settings) against issue 11's targets, then gpuscope's
ten-pass run. With several repeats (torch.txt, torch_2.txt, ...; gpuscope.jsonl,
gpuscope_2.jsonl, ...), warm and cold ns/op are each side's median over the repeats, and
the spread is printed after the tables. The targets table also gives the warm ratio of
each side's fastest repeat: on the H100 machine (a virtual machine) a process runs in
one of two speeds about 1.7x apart for its whole life, whatever CPUs it is pinned to,
and both allocators alike (BENCHMARKS.md, "Two speeds per process"), so a median of a
few repeats can compare one side's fast processes with the other's slow ones.
A folder whose later repeats were packed into `repeats.tar.gz` (bench/pack_repeats.py)
is read through the archive.

Usage: python3 bench/compare_torch.py OUT_DIR
"""
import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import tarfile
import tempfile
from collections import defaultdict

# The later repeats of a folder, packed by bench/pack_repeats.py.
ARCHIVE = "repeats.tar.gz"

LINE = re.compile(
    r"replay (?P<trace>\S+) pass (?P<pass>\d+) ops (?P<ops>\d+): (?P<ns>[\d.]+) ns/op, "
    r"peak_allocated (?P<alloc>\d+), peak_reserved (?P<res>\d+), device_allocs (?P<dev>\d+)"
)
# Driver calls that allocate, map, unmap, change access, release or wait.
MEMORY_AND_WAITS = ["allocs", "frees", "maps", "unmaps", "set_access", "address_reserves",
                    "stream_syncs", "event_syncs"]


def torch_runs(path):
    """{mode: {trace: dict}} from torch_replay.sh's output."""
    passes = defaultdict(list)
    mode = None
    for line in open(path):
        if line.startswith("=="):
            mode = "expandable" if "expandable" in line else "default"
            continue
        m = LINE.search(line)
        if m and mode:
            passes[(mode, m["trace"])].append(m)
    runs = defaultdict(dict)
    for (mode, trace), ms in passes.items():
        warm = [float(m["ns"]) for m in ms if int(m["pass"]) > 0]
        last = ms[-1]
        runs[mode][os.path.basename(trace)] = {
            "ops": int(last["ops"]),
            "cold_ns_per_op": float(ms[0]["ns"]),
            "warm_ns_per_op": sum(warm) / max(len(warm), 1),
            "peak_allocated": int(last["alloc"]),
            "peak_reserved": int(last["res"]),
            "device_allocs": int(last["dev"]),
        }
    pairs = re.findall(r"pair size (\d+) torch_caching ([\d.]+) ns", open(path).read())
    return runs, pairs


def gpuscope_runs(path):
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        if line.strip().startswith("{"):
            r = json.loads(line)
            out[os.path.basename(r["trace"])] = r
    return out


def repeats(out_dir, stem, ext):
    """stem.ext, stem_2.ext, ... that exist, in order."""
    paths = [os.path.join(out_dir, stem + ext)]
    k = 2
    while os.path.exists(os.path.join(out_dir, f"{stem}_{k}{ext}")):
        paths.append(os.path.join(out_dir, f"{stem}_{k}{ext}"))
        k += 1
    return [p for p in paths if os.path.exists(p)]


def median_runs(runs_list):
    """One {trace: dict} from several: the first's figures, with the median warm and cold
    ns/op over all of them (and every repeat's warm ns/op kept as warm_repeats)."""
    out = {}
    for t, first in runs_list[0].items():
        r = dict(first)
        rs = [runs[t] for runs in runs_list if t in runs]
        for key in ("warm_ns_per_op", "cold_ns_per_op"):
            r[key] = statistics.median(x[key] for x in rs)
        r["warm_repeats"] = [x["warm_ns_per_op"] for x in rs]
        r["warm_fastest"] = min(r["warm_repeats"])
        out[t] = r
    return out


def spread_note(torch_default, gpuscope, rounds):
    """A line on how far each side's rounds moved: the median over traces of the slowest
    round's warm ns/op over the fastest's."""
    def spread(runs):
        xs = sorted(max(r["warm_repeats"]) / min(r["warm_repeats"]) for r in runs.values()
                    if r.get("warm_repeats") and min(r["warm_repeats"]) > 0)
        return xs[len(xs) // 2] if xs else 1.0
    t, g = spread(torch_default), spread(gpuscope)
    line = (f"Rounds: {rounds}; slowest over fastest round, median over traces: PyTorch "
            f"{t:.2f}x, gpuscope {g:.2f}x.")
    if max(t, g) > 1.4:
        line += (" The rounds ran at different speeds (on the H100 machine each process runs"
                 " at one of two speeds): medians of few rounds can set one side's fast rounds"
                 " against the other's slow ones; use more rounds (REPEATS=9) or read the"
                 " fastest-round column.")
    return line


def warm_calls_per_pass(r):
    n = max(len(r.get("pass_calls", [])) - 1, 1)
    return sum(r["warm_calls"][k] for k in MEMORY_AND_WAITS) / n


def main(out_dir):
    torch_reps = [torch_runs(p) for p in repeats(out_dir, "torch", ".txt")]
    pairs = torch_reps[0][1]
    torch = {mode: median_runs([runs[mode] for runs, _ in torch_reps if mode in runs])
             for mode in torch_reps[0][0]}
    ours = {
        name: median_runs([gpuscope_runs(p) for p in repeats(out_dir, stem, ".jsonl")])
        for name, stem in (("gpuscope", "gpuscope"), ("gpuscope plain", "gpuscope_plain"))
    }
    allocators = [("PyTorch default", torch.get("default", {})),
                  ("PyTorch expandable", torch.get("expandable", {}))]
    allocators += list(ours.items())
    traces = sorted(set().union(*[set(runs) for _, runs in allocators]))
    print("| trace | allocator | warm ns/op | cold ns/op | peak allocated (MiB) | peak reserved (MiB) "
          "| reserved/allocated | device allocs | warm driver calls/pass | warm ns/op vs PyTorch default |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in traces:
        base = torch.get("default", {}).get(t)
        for name, runs in allocators:
            r = runs.get(t)
            if not r:
                continue
            ratio = r["peak_reserved"] / max(r["peak_allocated"], 1)
            speed = f"{r['warm_ns_per_op'] / base['warm_ns_per_op']:.3f}" if base else "n/a"
            calls = f"{warm_calls_per_pass(r):.0f}" if "warm_calls" in r else ""
            print(f"| {t} | {name} | {r['warm_ns_per_op']:.1f} | {r['cold_ns_per_op']:.1f} | "
                  f"{r['peak_allocated'] / 2**20:.1f} | {r['peak_reserved'] / 2**20:.1f} | {ratio:.4f} | "
                  f"{r['device_allocs']} | {calls} | {speed} |")

    # Against the targets: gpuscope default vs PyTorch in the same call.
    print()
    print("| trace | warm / PyTorch default (<= 0.2) | same, fastest repeat of each "
          "| cold / PyTorch default (<= 1) "
          "| reserved/allocated (<= 1.02) | PyTorch's better mode | reserved MiB vs PyTorch's lower "
          "| device allocs (<= PyTorch default) | warm calls/pass (0) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    met = defaultdict(int)
    rows = 0
    for t in traces:
        g = ours["gpuscope"].get(t)
        d = torch.get("default", {}).get(t)
        e = torch.get("expandable", {}).get(t)
        if not (g and d):
            continue
        ratio = g["peak_reserved"] / g["peak_allocated"]
        better = min(x["peak_reserved"] / x["peak_allocated"] for x in (d, e) if x)
        mark = lambda ok: "" if ok else " **x**"
        warm = g["warm_ns_per_op"] / d["warm_ns_per_op"]
        fastest = g["warm_fastest"] / d["warm_fastest"]
        cold = g["cold_ns_per_op"] / d["cold_ns_per_op"]
        calls = warm_calls_per_pass(g)
        lower = min(x["peak_reserved"] for x in (d, e) if x)
        rows += 1
        for key, ok in (("warm", warm <= 0.2), ("fastest", fastest <= 0.2), ("cold", cold <= 1),
                        ("1.02", ratio <= 1.02), ("better", ratio <= better),
                        ("lower", g["peak_reserved"] <= lower),
                        ("allocs", g["device_allocs"] <= d["device_allocs"]), ("calls", calls == 0)):
            met[key] += ok
        print(f"| {t} | {warm:.3f}{mark(warm <= 0.2)} | {fastest:.3f}{mark(fastest <= 0.2)} | "
              f"{cold:.3f}{mark(cold <= 1)} | "
              f"{ratio:.4f}{mark(ratio <= 1.02)} | {better:.4f}{mark(ratio <= better)} | "
              f"{g['peak_reserved'] / 2**20:.0f} vs {lower / 2**20:.0f}{mark(g['peak_reserved'] <= lower)} | "
              f"{g['device_allocs']} vs {d['device_allocs']}{mark(g['device_allocs'] <= d['device_allocs'])} | "
              f"{calls:.0f}{mark(calls == 0)} |")
    if rows:
        keys = ("warm", "fastest", "cold", "1.02", "better", "lower", "allocs", "calls")
        print(f"| met on (of {rows}) | " + " | ".join(str(met[k]) for k in keys) + " |")
        print()
        print(spread_note(torch.get("default", {}), ours["gpuscope"], len(torch_reps)))

    ten = gpuscope_runs(os.path.join(out_dir, "gpuscope_passes10.jsonl"))
    if ten:
        print()
        print("| trace | passes | warm passes alike (reserved, driver calls) | warm driver calls (all passes) "
              "| peak reserved by pass (MiB) | ns/op by pass |")
        print("|---|---:|---|---|---|---|")
        for t, r in sorted(ten.items()):
            res = sorted(set(round(p / 2**20, 1) for p in r["pass_peak_reserved"]))
            ns = ", ".join(f"{x:.0f}" for x in r["pass_ns_per_op"])
            warm = {k: v for k, v in r["warm_calls"].items() if v}
            print(f"| {t} | {len(r['pass_ns_per_op'])} | {'yes' if r['warm_passes_identical'] else 'no'} | "
                  f"{warm or 'none'} | {res} | {ns} |")
    if len(torch_reps) > 1:
        print()
        print(f"Warm ns/op of each of the {len(torch_reps)} repeats (PyTorch default; gpuscope):")
        print()
        for t in traces:
            d = torch.get("default", {}).get(t)
            g = ours["gpuscope"].get(t)
            if d and g:
                fmt = lambda xs: ", ".join(f"{x:.0f}" for x in xs)
                print(f"- {t}: {fmt(d['warm_repeats'])}; {fmt(g['warm_repeats'])}")
    if pairs:
        print()
        print("PyTorch alloc+free pairs: " + ", ".join(f"{int(s)} B: {ns} ns" for s, ns in pairs))


@contextlib.contextmanager
def readable(out_dir):
    """`out_dir`, or, when its repeats are packed, a temporary folder holding its files
    and the archive's (removed afterwards)."""
    archive = os.path.join(out_dir, ARCHIVE)
    if not os.path.exists(archive):
        yield out_dir
        return
    tmp = tempfile.mkdtemp(prefix="compare_torch_")
    try:
        for n in os.listdir(out_dir):
            if os.path.isfile(os.path.join(out_dir, n)) and n != ARCHIVE:
                shutil.copy(os.path.join(out_dir, n), tmp)
        with tarfile.open(archive) as tar:
            for m in tar.getmembers():
                if not m.isfile() or os.path.basename(m.name) != m.name:
                    raise SystemExit(f"compare_torch.py: {archive}: unexpected member "
                                     f"{m.name!r} (not a file of the folder)")
            try:
                tar.extractall(tmp, filter="data")
            except TypeError:  # Python before 3.11.4: the members were checked above
                tar.extractall(tmp)
        yield tmp
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    with readable(sys.argv[1]) as d:
        main(d)
