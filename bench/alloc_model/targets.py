"""Counts, for the placement model (sim.py) under the policy its environment variables
select, on how many traces issue 11's two placement targets are met against PyTorch's
figures from compare_torch.sh calls: reserved / allocated at most PyTorch's better mode,
and device allocations at most PyTorch default's.

Usage, from the repository root:
    python3 bench/alloc_model/targets.py CMP_DIR... [VAR=VALUE...]
CMP_DIRs: compare_torch.sh output folders (torch.txt, gpuscope.jsonl) whose traces are in
tests/data/traces/ (a later folder's figures replace an earlier one's); VAR=VALUE: sim.py's
settings (GROWTH, RUN_DIV, LARGE_DIV, RUNS, SPILL_MIB). V=1 in the environment prints every trace.
"""
import glob
import importlib
import os
import sys
from concurrent.futures import ProcessPoolExecutor

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.dirname(here))
import compare_torch  # noqa: E402


def name_of(path):
    """A trace's name, the same whether it was measured plain or compressed: NAME.csv."""
    name = os.path.basename(path)
    return name[:-3] if name.endswith(".gz") else name


def figures(dirs):
    torch, ours = {}, {}
    for d in dirs:
        runs, _ = compare_torch.torch_runs(os.path.join(d, "torch.txt"))
        for mode, by_trace in runs.items():
            for t, r in by_trace.items():
                torch.setdefault(name_of(t), {})[mode] = r
        for t, r in compare_torch.gpuscope_runs(os.path.join(d, "gpuscope.jsonl")).items():
            ours[name_of(t)] = r
    return torch, ours


def simulate(args):
    path, env = args
    os.environ.update(env)
    import sim
    importlib.reload(sim)  # its settings are read when it is imported
    reserved_mib, device_allocs = sim.run(path, sim.bestfit)[-1]
    return name_of(path), reserved_mib, device_allocs


def main(argv):
    dirs = [a for a in argv if "=" not in a]
    env = dict(a.split("=", 1) for a in argv if "=" in a)
    torch, ours = figures(dirs)
    paths = [p for p in sorted(glob.glob("tests/data/traces/*.csv*"))
             if name_of(p) in torch and name_of(p) in ours]
    with ProcessPoolExecutor(os.cpu_count()) as ex:
        out = list(ex.map(simulate, [(p, env) for p in paths]))
    ratio_met = dev_met = both = 0
    for name, reserved_mib, dev in out:
        t = torch[name]
        better = min(m["peak_reserved"] / m["peak_allocated"] for m in t.values())
        ratio = reserved_mib * (1 << 20) / ours[name]["peak_allocated"]
        ok_ratio = ratio <= better + 1e-9
        ok_dev = dev <= t["default"]["device_allocs"]
        ratio_met += ok_ratio
        dev_met += ok_dev
        both += ok_ratio and ok_dev
        if os.environ.get("V"):
            print(f"{name:36s} reserved {reserved_mib:8.0f} MiB ratio {ratio:.4f} "
                  f"(better mode {better:.4f}{'' if ok_ratio else ' x'}) device allocs {dev} "
                  f"(PyTorch {t['default']['device_allocs']}{'' if ok_dev else ' x'})")
    print(f"{env or 'the allocator policy'}: {len(out)} traces; ratio <= better mode {ratio_met}, "
          f"device allocs <= PyTorch {dev_met}, both {both}")


def before_after(argv, patch, label):
    """Runs the placement model on every trace of tests/data/traces (TRACES=GLOB for
    others) that the compare_torch.sh folders among `argv` measured, under the
    allocator's policy and then under `patch()` (which changes sim's classes and returns
    a function that undoes it), three passes; prints each trace whose reserved memory or
    device allocations change or whose later passes grow, and issue 11's two placement
    targets before and after, after `label`."""
    dirs = [a for a in argv if "=" not in a]
    torch, ours = figures(dirs)
    import sim
    rows = []
    for path in sorted(glob.glob(os.environ.get("TRACES", "tests/data/traces/*.csv*"))):
        name = name_of(path)
        if name not in torch or name not in ours:
            continue
        before = sim.run(path, sim.bestfit)[-1]
        undo = patch()
        after = sim.run(path, sim.bestfit, passes=3)
        undo()
        rows.append((name, before, after))
    met = {"before": [0, 0], "after": [0, 0]}
    total = [0, 0]
    for name, b, a in rows:
        t = torch[name]
        better = min(m["peak_reserved"] / m["peak_allocated"] for m in t.values())
        alloc = ours[name]["peak_allocated"]
        for key, (res, dev) in (("before", b), ("after", a[-1])):
            met[key][0] += res * (1 << 20) / alloc <= better + 1e-9
            met[key][1] += dev <= t["default"]["device_allocs"]
        total[0] += b[0]
        total[1] += a[-1][0]
        if b != a[-1] or a[0] != a[-1]:
            print(f"{name:36s} {b[0]:8.0f} -> {a[-1][0]:8.0f} MiB, device allocs {b[1]} -> "
                  f"{a[-1][1]}{'' if a[0] == a[1] else ' (second pass grows)'}"
                  f"{'' if a[1] == a[2] else ' (third pass grows)'}")
    print(f"{label}: {len(rows)} traces; ratio <= better mode {met['before'][0]} -> "
          f"{met['after'][0]}, device allocs <= PyTorch {met['before'][1]} -> "
          f"{met['after'][1]}; reserved {total[0]:.0f} -> {total[1]:.0f} MiB")


if __name__ == "__main__":
    main(sys.argv[1:])
