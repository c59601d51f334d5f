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


def figures(dirs):
    torch, ours = {}, {}
    for d in dirs:
        runs, _ = compare_torch.torch_runs(os.path.join(d, "torch.txt"))
        for mode, by_trace in runs.items():
            for t, r in by_trace.items():
                torch.setdefault(t, {})[mode] = r
        ours.update(compare_torch.gpuscope_runs(os.path.join(d, "gpuscope.jsonl")))
    return torch, ours


def simulate(args):
    path, env = args
    os.environ.update(env)
    import sim
    importlib.reload(sim)  # its settings are read when it is imported
    reserved_mib, device_allocs = sim.run(path, sim.bestfit)[-1]
    return os.path.basename(path), reserved_mib, device_allocs


def main(argv):
    dirs = [a for a in argv if "=" not in a]
    env = dict(a.split("=", 1) for a in argv if "=" in a)
    torch, ours = figures(dirs)
    paths = [p for p in sorted(glob.glob("tests/data/traces/*.csv"))
             if os.path.basename(p) in torch and os.path.basename(p) in ours]
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


if __name__ == "__main__":
    main(sys.argv[1:])
