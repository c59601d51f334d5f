"""Per-trace reserved memory and device allocations of gpuscope's default (virtual
memory) allocator on the simulated device, against PyTorch's two modes.

Usage (from the repository root):

    cargo build --release -p gpuscope-cli --bin gpuscope
    python3 bench/alloc_policy_table.py [GPUSCOPE_BINARY] [--json OUT.jsonl] [--baseline BASE.jsonl]
        [--pytorch CMP_DIR]...

Replays every `tests/data/traces/*.csv*` with `gpuscope replay --backend sim --format json
--warm-passes 3` and prints, per trace: peak allocated, peak reserved, their ratio,
device allocations (`cuMemCreate`), driver calls per warm pass (allocate, map, unmap,
set access, release, waits), then PyTorch's peak reserved, ratio and device allocations
in its better mode (the lower peak reserved of default and expandable segments), and
whether gpuscope meets each target of issue 11 (ratio at most 1.02; peak reserved at most
PyTorch's better mode's; device allocations at most PyTorch default's). `--baseline` adds a column with the
reserved memory of an earlier run's JSON lines (e.g. the commit before a policy change).
PyTorch's figures come from `bench/compare_torch.sh` output folders (`--pytorch`, once per
folder, a later folder's figures replacing an earlier one's; by default the newest calls,
which together cover every trace).
"""
import json
import os
import subprocess
import sys
from glob import glob

MIB = 1 << 20

# PyTorch's figures: the newest calls of bench/compare_torch.sh, which together cover every
# trace (both of PyTorch's modes, on one H100; BENCHMARKS.md, "All 127 traces on one H100",
# "An eighteenth corpus, on several streams, held out", "A nineteenth corpus, held out",
# "A twentieth corpus, held out", "A twenty-first corpus, held out", "A twenty-second
# corpus, held out", "A twenty-third corpus, held out", "A twenty-fourth corpus, held
# out", "A twenty-fifth corpus, held out", "A twenty-sixth corpus, held out", "A
# twenty-seventh corpus, held out", "A twenty-eighth corpus, held out", "A twenty-ninth
# corpus, held out" and "A thirtieth corpus, held out").
PYTORCH_DIRS = ["bench/results/h100-2026-11-26/54-all-127/cmp",
                "bench/results/h100-2026-11-26/56-eighteenth-corpus/eighteenth/cmp",
                "bench/results/h100-2026-11-27/57-nineteenth-corpus/nineteenth/cmp",
                "bench/results/h100-2026-11-27b/62-twentieth-corpus/twentieth/cmp",
                "bench/results/h100-2026-11-27c/68-twentyfirst-corpus/twentyfirst/cmp",
                "bench/results/h100-2026-11-27c/69-twentysecond-corpus/twentysecond/cmp",
                "bench/results/h100-2026-11-27d/74-twentythird-corpus/twentythird/cmp",
                "bench/results/h100-2026-11-27e/78-twentyfourth-corpus/twentyfourth/cmp",
                "bench/results/h100-2026-11-27f/80-twentyfifth-corpus/twentyfifth/cmp",
                "bench/results/h100-2026-11-27g/83-twentysixth-corpus/twentysixth/cmp",
                "bench/results/h100-2026-11-27h/86-twentyseventh-compare/cmp",
                "bench/results/h100-2026-11-27i/89-twentyeighth-corpus/twentyeighth/cmp",
                "bench/results/h100-2026-11-28/91-twentyninth-corpus/twentyninth2/cmp",
                "bench/results/h100-2026-11-28b/93-thirtieth-corpus/thirtieth/cmp"]


def pytorch_figures(cmp_dir):
    """{trace name: ((default: allocated MiB, reserved MiB, device allocs), (expandable:
    the same three))} from a bench/compare_torch.sh output folder."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare_torch import torch_runs

    runs, _ = torch_runs(os.path.join(cmp_dir, "torch.txt"))

    def three(r):
        return r["peak_allocated"] / MIB, r["peak_reserved"] / MIB, r["device_allocs"]

    return {
        stem(t): (three(r), three(runs["expandable"][t]))
        for t, r in runs["default"].items()
        if t in runs["expandable"]
    }


WARM_KINDS = ("allocs", "frees", "maps", "unmaps", "set_access", "address_reserves",
              "stream_syncs", "event_syncs")


def run(binary):
    traces = sorted(glob("tests/data/traces/*.csv*"))
    out = subprocess.run(
        [binary, "replay", "--backend", "sim", "--format", "json", "--warm-passes", "3", *traces],
        check=True, capture_output=True, text=True, env=os.environ,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def stem(path):
    """A trace's name: its file name without `.csv` or `.csv.gz`."""
    return os.path.basename(path).removesuffix(".gz").removesuffix(".csv")


def name_of(r):
    return stem(r["trace"])


def main(argv):
    binary, json_out, baseline, pytorch_dirs = "target/release/gpuscope", None, {}, []
    args = iter(argv)
    for a in args:
        if a == "--json":
            json_out = next(args)
        elif a == "--pytorch":
            pytorch_dirs.append(next(args))
        elif a == "--baseline":
            baseline = {name_of(r): r for r in map(json.loads, open(next(args))) }
        else:
            binary = a
    pytorch_dirs = pytorch_dirs or PYTORCH_DIRS
    pytorch_dir = ", ".join(pytorch_dirs)
    pytorch = {}
    for d in pytorch_dirs:
        pytorch.update(pytorch_figures(d))
    rows = run(binary)
    if json_out:
        with open(json_out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    head = ["trace", "alloc MiB", "reserved MiB"]
    if baseline:
        head.append("before MiB")
    head += ["ratio", "dev allocs", "warm calls/pass", "PT better", "PT reserved",
             "PT ratio", "PT default allocs", "<=1.02", "<=PT better", "allocs<=PT"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    met = [0, 0, 0]
    compared = 0
    for r in rows:
        n = name_of(r)
        if n not in pytorch:
            print(f"| {n} | no PyTorch figures in {pytorch_dir} |")
            continue
        compared += 1
        (da, dr, dn), (ea, er, en) = pytorch[n]
        mode, pa, pr = ("default", da, dr) if dr / da <= er / ea else ("expandable", ea, er)
        warm_passes = len(r["pass_calls"]) - 1
        warm = sum(r["warm_calls"][k] for k in WARM_KINDS) / max(1, warm_passes)
        alloc, res = r["peak_allocated"] / MIB, r["peak_reserved"] / MIB
        # PyTorch's figures are rounded to 0.1 MiB: compare reserved memory (what the
        # target is about; both replay the same requests) rather than rounded ratios.
        ok = [r["ratio"] <= 1.02, res <= pr, r["device_allocs"] <= dn]
        met = [m + o for m, o in zip(met, ok)]
        cells = [n, f"{alloc:.1f}", f"{res:.1f}"]
        if baseline:
            b = baseline.get(n)
            cells.append(f"{b['peak_reserved'] / MIB:.1f}" if b else "")
        cells += [f"{r['ratio']:.4f}", str(r["device_allocs"]), f"{warm:g}", mode,
                  f"{pr:.1f}", f"{pr / pa:.4f}", str(dn)]
        cells += ["yes" if o else "**no**" for o in ok]
        print("| " + " | ".join(cells) + " |")
    total = sum(r["peak_reserved"] for r in rows) / MIB
    print(f"\ntotal peak reserved {total:.1f} MiB; targets met: ratio <= 1.02 on {met[0]}, "
          f"<= PyTorch's better mode on {met[1]}, device allocs <= PyTorch default's on "
          f"{met[2]} of {compared} (PyTorch's figures: {pytorch_dir})")


if __name__ == "__main__":
    main(sys.argv[1:])
