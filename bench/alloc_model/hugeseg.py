"""Huge requests in segments of their own (tried, not kept; BENCHMARKS.md, "A fifth
corpus, held out").

A large request of at least HUGE_MIB (default 256) MiB and at least HUGE_FRAC (default
1/8) of what its stream's large arena maps takes the best-fitting free block of a set of
exact-size segments, or a new segment of its own size, as PyTorch's default allocator
gives large requests segments of their own; everything else goes to the arenas of
`sim.py`. Prints, for every trace where it changes anything, peak reserved and device
allocations against `sim.py`, and the totals.

Usage (repository root): python3 bench/alloc_model/hugeseg.py
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim
from sim import Arena, MIB, PAGE

HUGE = float(os.environ.get('HUGE_FRAC', '0.125'))
ABS = int(os.environ.get('HUGE_MIB', '256')) * MIB


class Segment(Arena):
    """A fixed-size segment: one free block to begin with, never grown."""

    def __init__(s, size):
        super().__init__(False, sim.bestfit)
        s.blocks[0] = [size, True]; s.addrs = [0]; s.top = size; s.mapped = size; s.peak = size; s.grows = 1


def run(path, passes=2):
    arenas = {}; segs = {}

    def allocate(st, r):
        k = (st, r <= MIB)
        if k not in arenas:
            arenas[k] = Arena(r <= MIB, sim.bestfit)
        A = arenas[k]
        if not A.small and r >= ABS and r >= HUGE * A.mapped:
            L = segs.setdefault(st, [])
            c = [(sz, a, S) for S in L for a, sz in S.free_blocks() if sz >= r]
            if c:
                sz, a, S = min(c, key=lambda x: (x[0], x[1]))
                return S, S.take(a, r)
            S = Segment(-(-r // PAGE) * PAGE); L.append(S)
            return S, S.take(0, r)
        return A, A.alloc(r)

    def totals():
        every = list(arenas.values()) + [S for L in segs.values() for S in L]
        return (sum(A.peak for A in every) / MIB, sum(A.grows for A in every))
    return sim.replay(path, allocate, totals, passes)


if __name__ == '__main__':
    tot = 0; hi = lo = grew = 0
    for f in sim.trace_paths():
        b = sim.run(f, sim.bestfit)[-1]; r = run(f)
        torch = json.load(open(sim.json_beside(f)))
        d = r[-1][0] - b[0]; tot += d; hi += d > 0; lo += d < 0; grew += r[0] != r[1]
        if d or r[0] != r[1]:
            print(f"{os.path.basename(f):36s} {b[0]:8.0f} -> {r[-1][0]:8.0f} MiB ({d:+6.0f})  "
                  f"device allocs {b[1]} -> {r[-1][1]} (PyTorch reserved "
                  f"{torch['max_reserved_bytes'] / MIB:.0f}, device allocs {torch['num_device_alloc']})")
    print(f"reserved {tot:+.0f} MiB in all; {hi} traces higher, {lo} lower; second pass grew on {grew}")
