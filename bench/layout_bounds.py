"""How low peak reserved / peak live can go on a trace when memory never moves: the best
of two offline layouts, each (stream, pool) laid out as one arena with every block
placed knowing all lifetimes in advance (greedy by size, and greedy by lifetime: each
block at the lowest offset free for its whole life), rounded up to 2 MiB per arena.
An online allocator (gpuscope, PyTorch) knows no lifetime in advance; this is what
even full knowledge of one pass reaches with the same arenas.

Usage: python3 bench/layout_bounds.py tests/data/traces/*.csv*
"""
import gzip
import sys
from collections import defaultdict

MIB = 1 << 20
PAGE = 2 * MIB


def r512(s):
    return max(512, (s + 511) // 512 * 512)


def intervals(path):
    """(start, end, size, arena) per allocation, time in operations."""
    live, out, t = {}, [], 0
    opener = gzip.open if path.endswith(".gz") else open
    for line in opener(path, "rt").read().splitlines()[1:]:
        op, ident, size, stream = line.split(",")
        t += 1
        if op == "a":
            r = r512(int(size))
            live[ident] = (t, r, (stream, r <= MIB))
        elif op == "f":
            s, r, arena = live.pop(ident)
            out.append((s, t, r, arena))
    out += [(s, t + 1, r, arena) for s, r, arena in live.values()]
    return out


def peak(iv):
    events = sorted([(s, r) for s, _, r, _ in iv] + [(e, -r) for _, e, r, _ in iv])
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def place(iv, key):
    """The top of the arena when each block, in `key` order, takes the lowest offset free
    for its whole life. Placed blocks are found by time: a block living across at most
    `SPAN` buckets of time is registered in those buckets, a longer one in a list every
    block looks through; so a short block looks only at blocks near it in time (the
    result is the same as looking through every placed block)."""
    horizon = max((e for _, e, _, _ in iv), default=1)
    width = max(1, horizon // 4096)
    buckets, long_lived, placed = defaultdict(list), [], []
    top = 0
    for s, e, r, _ in sorted(iv, key=key):
        first, last = s // width, (e - 1) // width
        if last - first > SPAN:
            candidates = range(len(placed))
        else:
            candidates = set(long_lived)
            for k in range(first, last + 1):
                candidates.update(buckets.get(k, ()))
        busy = []
        for j in candidates:
            s2, e2, o, z = placed[j]
            if s2 < e and s < e2:
                busy.append((o, o + z))
        busy.sort()
        off = 0
        for a, b in busy:
            if a - off >= r:
                break
            off = max(off, b)
        j = len(placed)
        placed.append((s, e, off, r))
        if last - first > SPAN:
            long_lived.append(j)
        else:
            for k in range(first, last + 1):
                buckets[k].append(j)
        top = max(top, off + r)
    return top


SPAN = 16


for path in sys.argv[1:]:
    iv = intervals(path)
    arenas = defaultdict(list)
    for x in iv:
        arenas[x[3]].append(x)
    best = None
    for name, key in [("size", lambda x: (-x[2], x[0])), ("lifetime", lambda x: (x[0] - x[1], x[0]))]:
        total = sum((place(v, key) + PAGE - 1) // PAGE * PAGE for v in arenas.values())
        if best is None or total < best[1]:
            best = (name, total)
    print(f"{path.split('/')[-1]}: offline static layout / peak live = {best[1] / peak(iv):.4f} (greedy by {best[0]})")
