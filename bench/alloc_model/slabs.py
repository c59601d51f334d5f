"""The small pool carved from the large one (tried, not kept; BENCHMARKS.md, "What the
remaining targets cost").

A stream's small requests take the best fit over the free blocks of its slabs; when
none fits, a new slab of the small pool's step (half what the slabs hold, 2 to 8 MiB,
as `vmm::min_growth`) is allocated from the same stream's large pool like a large
request: in its best-fitting hole (`SLAB=fit`, the default) or always at its top
(`SLAB=top`). Slabs are never given back, so the small pool makes no device allocation
of its own. Prints, per trace, peak reserved and device allocations against `sim.py`
(the allocator), PyTorch's device allocations (the trace's JSON), and whether a second
pass grew.

Usage (repository root): python3 bench/alloc_model/slabs.py
"""
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim
from sim import Arena, MIB, r512

SLAB = os.environ.get('SLAB', 'fit')


def at_top(arena, r):
    """`r` bytes from `arena`'s wilderness (grown if needed), never from a hole."""
    pol = arena.pol
    arena.pol = lambda s, r, cands, w: None
    try:
        return arena.alloc(r)
    finally:
        arena.pol = pol


class Slabs:
    def __init__(s):
        s.slabs = []; s.total = 0

    def alloc(s, r, large):
        best = None
        for sl in s.slabs:
            for a, sz in sl.free_blocks():
                if sz >= r and (best is None or (sz, a) < best[:2]):
                    best = (sz, a, sl)
        if best is None:
            step = min(max(s.total // 2, 2 * MIB), 8 * MIB)
            base = large.alloc(step) if SLAB == 'fit' else at_top(large, step)
            sl = Arena(True, sim.bestfit)
            sl.blocks = {base: [step, True]}; sl.addrs = [base]; sl.top = base + step
            s.slabs.append(sl); s.total += step
            best = (step, base, sl)
        _, a, sl = best
        return sl, sl.take(a, r)


def run(path, passes=2):
    large, small = {}, {}

    def allocate(st, r):
        if st not in large:
            large[st] = Arena(False, sim.bestfit); small[st] = Slabs()
        if r <= MIB:
            return small[st].alloc(r, large[st])
        return large[st], large[st].alloc(r)

    return sim.replay(path, allocate, sim.peaks_and_growths(large.values()), passes)


if __name__ == '__main__':
    tot = [0, 0]; n = higher = lower = warm = over = 0
    for f in sim.trace_paths():
        b = sim.run(f, sim.bestfit)[-1]
        r = run(f)
        torch = json.load(open(sim.json_beside(f)))['num_device_alloc']
        grew = r[1] != r[0]
        n += 1; tot[0] += b[0]; tot[1] += r[-1][0]
        higher += r[-1][0] > b[0]; lower += r[-1][0] < b[0]; warm += grew; over += r[-1][1] > torch
        print(f"{os.path.basename(f):36s} reserved {b[0]:7.0f} -> {r[-1][0]:7.0f} MiB  "
              f"device allocs {b[1]:3d} -> {r[-1][1]:3d} (PyTorch {torch:3d})"
              + ("  second pass grew" if grew else ""))
    print(f"total reserved {tot[0]:.0f} -> {tot[1]:.0f} MiB; {lower} traces lower, {higher} higher; "
          f"second pass grew on {warm}; device allocs above PyTorch's on {over} of {n}")
