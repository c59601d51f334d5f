"""Not the allocator's policy: an experiment (BENCHMARKS.md, "A twelfth corpus, held
out"). Holes kept for the large requests that fragmentation made grow.

When a large request of `r` bytes grows the arena although the holes other than the
free top add up to `r` or more (fragmentation, not demand), `r` becomes a guarded size
of that arena. Later, a request below 1/K of the smallest guarded size takes a hole
smaller than that size when one fits; otherwise (MODE=hole) the best-fitting hole as
before, or (MODE=top) the free top, growing if needed.

    python3 bench/alloc_model/guard.py CMP_DIR... [K=2] [MODE=hole] [MIN_MIB=64]
prints issue 11's two placement targets as targets.py does, and each trace whose reserved
memory or device allocations change, or whose second pass grows.
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import sim  # noqa: E402
import targets  # noqa: E402

MIB = sim.MIB


def guarded_alloc(k, mode, min_bytes):
    def alloc(s, r):
        if not hasattr(s, "guards"):
            s.guards = []
        w = s.wild()
        holes = [(sz, a) for a, sz in s.free_blocks() if a != w and sz >= r]
        g = min(s.guards) if s.guards else None
        choice = None
        if g is not None and r * k < g:
            below = [x for x in holes if x[0] < g]
            if below:
                choice = (min(below)[1], "low")
            elif mode == "hole" and holes:
                choice = (min(holes)[1], "low")
        elif holes:
            choice = (min(holes)[1], "low")
        if choice is None:
            if w is None or s.blocks[w][0] < r:
                free = sum(sz for a, sz in s.free_blocks() if a != w)
                if not s.small and r >= min_bytes and free >= r and r not in s.guards:
                    s.guards.append(r)
                s.grow(r)
                w = s.wild()
            choice = (w, "low")
        return s.take(choice[0], r, choice[1])
    return alloc


def main(argv):
    env = dict(a.split("=", 1) for a in argv if "=" in a)
    k = float(env.get("K", 2))
    mode = env.get("MODE", "hole")
    min_bytes = int(env.get("MIN_MIB", 64)) * MIB

    def patch():
        base = sim.Arena.alloc
        sim.Arena.alloc = guarded_alloc(k, mode, min_bytes)
        return lambda: setattr(sim.Arena, "alloc", base)

    targets.before_after(argv, patch, f"K={k} MODE={mode} MIN_MIB={min_bytes // MIB}")


if __name__ == "__main__":
    main(sys.argv[1:])
