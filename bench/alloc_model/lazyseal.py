"""Not the allocator's policy: an experiment (BENCHMARKS.md, "A thirteenth corpus, held
out: streams"). Fewer stream queries by sealing `record_stream` frees later.

The allocator seals the `record_stream` frees noted since the last allocation at the
next one (one `cuStreamQuery` per stream named; in a replay every stream is idle, so the
blocks come back then). Here they are sealed only when they could change the allocation
at hand: a pending block of the allocating pool whose extent merged with its free
neighbours reaches the request (and is not larger than the chosen block while not next
to it), or the pool would grow. Otherwise they stay pending, which keeps every placement
(they could not have been chosen, and merging is the same later).

    python3 bench/alloc_model/lazyseal.py TRACE...
prints, per trace and pass, (peak reserved MiB, growths, stream queries) with the
allocator's rule and with this one, and whether the placements are the same.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402
from sim import MIB  # noqa: E402


def needed(A, r, pending):
    """Whether the pending frees must be sealed before `A` places `r` bytes."""
    w = A.wild()
    holes = [(sz, a) for a, sz in A.free_blocks() if a != w and sz >= r]
    if not holes and (w is None or A.blocks[w][0] < r):
        return True
    chosen = min(holes) if holes else (A.blocks[w][0], w)
    for arena, addr, _ in pending:
        if arena is not A:
            continue
        j = bisect.bisect_left(A.addrs, addr)
        extent, nearby = A.blocks[addr][0], set()
        for k in (j - 1, j + 1):
            if 0 <= k < len(A.addrs) and A.blocks[A.addrs[k]][1]:
                extent += A.blocks[A.addrs[k]][0]
                nearby.add(A.addrs[k])
        if extent < r or (chosen[1] not in nearby and extent > chosen[0]):
            continue
        return True
    return False


def run(path, lazy, passes=2):
    arenas = {}

    def arena(st, r):
        key = (st, r <= MIB)
        if key not in arenas:
            arenas[key] = sim.Arena(r <= MIB, sim.bestfit)
        return arenas[key]

    ops = [line.split(",") for line in sim.read_text(path).splitlines()[1:]]
    out = []
    for _ in range(passes):
        live, pending, queries = {}, [], 0
        for op, i, sz, st in ops:
            if op == "a":
                r = sim.r512(int(sz))
                A = arena(st, r)
                if pending and (not lazy or needed(A, r, pending)):
                    queries += len({s for _, _, streams in pending for s in streams})
                    for arena_, addr, _ in pending:
                        arena_.free(addr)
                    pending = []
                live[i] = [A, A.alloc(r), set()]
            elif op == "r":
                live[i][2].add(st)
            else:
                A, addr, streams = live.pop(i)
                if streams:
                    pending.append((A, addr, streams))
                else:
                    A.free(addr)
        queries += len({s for _, _, streams in pending for s in streams})
        for arena_, addr, _ in pending:
            arena_.free(addr)
        for A, addr, _ in live.values():
            A.free(addr)
        out.append((sum(A.peak for A in arenas.values()) / MIB,
                    sum(A.grows for A in arenas.values()), queries))
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        now, lazy = run(path, False), run(path, True)
        same = [x[:2] for x in now] == [x[:2] for x in lazy]
        print(f"{os.path.basename(path):36s} now {now}  lazy {lazy}  "
              f"{'same placements' if same else 'DIFFERENT placements'}")
