"""The arena's free top before a much larger hole (tried, not kept; BENCHMARKS.md, "A
fifth corpus, held out").

`sim.py`'s best fit, except that a large request whose best-fitting hole is more than K
(default 2) times its size goes to the arena's free top when that fits it without
growing, to keep large holes whole for the large requests that left them (the
optimizer's state of `large_vocab_lm_train` lands in the holes of its 2 GiB logits).
Prints the traces it changes and the totals.

Usage (repository root): K=2 python3 bench/alloc_model/wildfirst.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim

K = float(os.environ.get('K', '2'))


def top_before_large_holes(s, r, cands, w):
    if not cands:
        return None
    sz, a = min(cands)
    if not s.small and sz > K * r and w is not None and s.blocks[w][0] >= r:
        return (w, 'low')
    return (a, 'low')


if __name__ == '__main__':
    tot = 0; hi = lo = grew = 0
    for f in sim.trace_paths():
        b = sim.run(f, sim.bestfit)[-1]; r = sim.run(f, top_before_large_holes)
        d = r[-1][0] - b[0]; tot += d; hi += d > 0; lo += d < 0; g = r[0] != r[1]; grew += g
        if d or g:
            print(f"{os.path.basename(f):36s} {b[0]:8.0f} -> {r[-1][0]:8.0f} MiB ({d:+6.0f})  "
                  f"device allocs {b[1]} -> {r[-1][1]}" + ("  second pass grew" if g else ""))
    print(f"K={K}: reserved {tot:+.0f} MiB in all; {hi} traces higher, {lo} lower; second pass grew on {grew}")
