"""Not the allocator's policy: an experiment (BENCHMARKS.md, "A twelfth corpus, held
out"). Segments of their own for the large requests that fragmentation made grow.

When a large request of `r` bytes (at least MIN_MIB) finds no hole although the arena's
holes other than the free top add up to `r` or more, it gets a segment of its own
(its size in whole 20 MiB pages, one device allocation) instead of growing the arena's
top. A free such segment is kept whole for later requests of more than 1/K of its size
(the smallest that fits), as PyTorch's default keeps a segment per large request.

    python3 bench/alloc_model/ownseg.py CMP_DIR... [K=2] [MIN_MIB=64]
prints issue 11's two placement targets before and after, and each trace whose reserved
memory or device allocations change, or whose second pass grows.
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import sim  # noqa: E402
import targets  # noqa: E402

MIB = sim.MIB
SEG_BASE = 1 << 56


def patch(k, min_bytes):
    base_alloc, base_free = sim.Arena.alloc, sim.Arena.free

    def alloc(s, r):
        if not hasattr(s, "segs"):
            s.segs = {}  # address -> [size, free]
        if s.small or r < min_bytes:
            return base_alloc(s, r)
        fits = [(sz, a) for a, (sz, free) in s.segs.items() if free and sz >= r and r * k > sz]
        if fits:
            a = min(fits)[1]
            s.segs[a][1] = False
            return a
        w = s.wild()
        holes = [(sz, a) for a, sz in s.free_blocks() if a != w]
        if any(sz >= r for sz, _ in holes) or (w is not None and s.blocks[w][0] >= r):
            return base_alloc(s, r)
        if sum(sz for sz, _ in holes) < r:
            a = base_alloc(s, r)
            s.peak = max(s.peak, s.mapped + sum(v[0] for v in s.segs.values()))
            return a
        size = -(-r // (20 * MIB)) * 20 * MIB
        a = SEG_BASE + len(s.segs) * (1 << 44)
        s.segs[a] = [size, False]
        s.grows += 1
        s.peak = max(s.peak, s.mapped + sum(v[0] for v in s.segs.values()))
        return a

    def free(s, a):
        if a >= SEG_BASE:
            s.segs[a][1] = True
            s.run = None
            return
        base_free(s, a)

    sim.Arena.alloc, sim.Arena.free = alloc, free
    grow = sim.Arena.grow

    def grow_with_segs(s, need):
        grow(s, need)
        s.peak = max(s.peak, s.mapped + sum(v[0] for v in getattr(s, "segs", {}).values()))

    sim.Arena.grow = grow_with_segs
    return lambda: setattr(sim.Arena, "alloc", base_alloc) or setattr(
        sim.Arena, "free", base_free) or setattr(sim.Arena, "grow", grow)


def main(argv):
    env = dict(a.split("=", 1) for a in argv if "=" in a)
    k = float(env.get("K", 2))
    min_bytes = int(env.get("MIN_MIB", 64)) * MIB
    targets.before_after(argv, lambda: patch(k, min_bytes), f"K={k} MIN_MIB={min_bytes // MIB}")


if __name__ == "__main__":
    main(sys.argv[1:])
