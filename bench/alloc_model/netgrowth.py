"""Runs of large growths while the arena's live memory grows (tried, not kept;
BENCHMARKS.md, "A fourth corpus, held out").

`sim.py`'s policy continues a run of growths (each step 5/4 of the last, up to 1/8 of
the arena) only while nothing has been freed since the last growth. Here a run also
continues when frees happened but the arena's live bytes have not fallen below what
they were at the last growth (a forward pass that frees temporaries as it goes), with
steps up to 1/D of the arena (`D`, default 64). Prints, per trace, peak reserved and
device allocations against `sim.py` and PyTorch's recorded device allocations, and
whether a second pass grew.

Usage (repository root): D=64 python3 bench/alloc_model/netgrowth.py
(`TRACES=GLOB` for other traces.)
"""
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim
from sim import Arena, MIB

D = int(os.environ.get('D', '64'))


class NetArena(Arena):
    def __init__(s, small, pol):
        super().__init__(small, pol)
        s.live = 0; s.sizes = {}; s.live_at_growth = None; s.last_step = None

    def alloc(s, r):
        s.live += r  # a growth for this request counts it as live
        a = super().alloc(r)
        s.sizes[a] = r
        return a

    def free(s, a):
        super().free(a)  # ends sim.py's run
        s.live -= s.sizes.pop(a)

    def min_step(s):
        if s.small:
            return super().min_step()
        step = max(20 * MIB, s.mapped // sim.LARGE_DIV)
        if s.run is not None:  # nothing freed since the last growth: sim.py's run
            step = max(step, min(s.run + s.run // 4, s.mapped // 8))
        elif s.last_step is not None and s.live >= s.live_at_growth:
            step = max(step, min(s.last_step + s.last_step // 4, s.mapped // D))
        s.live_at_growth = s.live
        s.run = s.last_step = step
        return step


def run(path):
    base = sim.Arena
    sim.Arena = NetArena
    try:
        return sim.run(path, sim.bestfit)
    finally:
        sim.Arena = base


if __name__ == '__main__':
    tot = 0; higher = lower = grew = over = n = 0
    for f in sim.trace_paths():
        b = sim.run(f, sim.bestfit)[-1]
        r = run(f)
        torch = json.load(open(sim.json_beside(f)))['num_device_alloc']
        d = r[-1][0] - b[0]
        n += 1; tot += d; higher += d > 0; lower += d < 0; grew += r[1] != r[0]
        over += r[-1][1] > torch
        print(f"{os.path.basename(f):36s} reserved {b[0]:7.0f} -> {r[-1][0]:7.0f} MiB ({d:+5.0f})  "
              f"device allocs {b[1]:3d} -> {r[-1][1]:3d} (PyTorch {torch:3d})"
              + ("  second pass grew" if r[1] != r[0] else ""))
    print(f"D={D}: reserved {tot:+.0f} MiB in all; {lower} traces lower, {higher} higher; "
          f"second pass grew on {grew}; device allocs above PyTorch's on {over} of {n}")
