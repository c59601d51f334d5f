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
import glob
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
    dirs = [a for a in argv if "=" not in a]
    env = dict(a.split("=", 1) for a in argv if "=" in a)
    k = float(env.get("K", 2))
    min_bytes = int(env.get("MIN_MIB", 64)) * MIB
    torch, ours = targets.figures(dirs)
    rows = []
    for path in sorted(glob.glob(os.environ.get("TRACES", "tests/data/traces/*.csv"))):
        name = os.path.basename(path)
        if name not in torch or name not in ours:
            continue
        before = sim.run(path, sim.bestfit)
        undo = patch(k, min_bytes)
        after = sim.run(path, sim.bestfit, passes=3)
        undo()
        rows.append((name, before[-1], after))
    met = {"before": [0, 0], "after": [0, 0]}
    total = [0, 0]
    for name, b, a in rows:
        t = torch[name]
        better = min(m["peak_reserved"] / m["peak_allocated"] for m in t.values())
        alloc = ours[name]["peak_allocated"]
        for key, (res, dev) in (("before", b), ("after", a[-1])):
            met[key][0] += res * MIB / alloc <= better + 1e-9
            met[key][1] += dev <= t["default"]["device_allocs"]
        total[0] += b[0]
        total[1] += a[-1][0]
        if b != a[-1] or a[1] != a[-1]:
            print(f"{name:36s} {b[0]:8.0f} -> {a[-1][0]:8.0f} MiB, device allocs {b[1]} -> "
                  f"{a[-1][1]}{'' if a[1] == a[-1] else ', third pass grows'}"
                  f"{'' if a[0] == a[1] else ' (second pass grows)'}")
    print(f"K={k} MIN_MIB={min_bytes // MIB}: {len(rows)} traces; ratio <= better mode "
          f"{met['before'][0]} -> {met['after'][0]}, device allocs <= PyTorch "
          f"{met['before'][1]} -> {met['after'][1]}; reserved {total[0]:.0f} -> {total[1]:.0f} MiB")


if __name__ == "__main__":
    main(sys.argv[1:])
