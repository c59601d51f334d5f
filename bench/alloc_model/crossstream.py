"""Memory freed on one stream, reused by another: three designs against the allocator's
arena per (stream, pool), on the traces with more than one stream.

- `borrow`: the arenas stay per stream; a request with no hole in its own arena takes the
  best-fitting hole of another stream's arena of the same pool (never a wilderness), and
  its free comes back like a `record_stream` free, at the next allocation.
- `eager`: one arena per pool for every stream, each free usable by every stream at
  once. A bound: on a GPU, memory freed on stream A is safe for stream B only once A's
  work before the free is done, which only a poll (or a wait) tells.
- `lazy`: one arena per pool; a free block is private to the stream that freed it
  (merging only with blocks of the same stream or shared ones) until a miss, when every
  private block becomes shared (as if a poll found every stream idle, which it does in
  a replay) and the search is retried; then the arena's free top, then growth.

Usage, from the repository root:
    python3 bench/alloc_model/crossstream.py CMP_DIR
CMP_DIR: a compare_torch.sh output folder (torch.txt, gpuscope.jsonl). Prints, per trace,
peak reserved MiB (ratio to the replay's peak allocated), device allocations, whether
the third pass repeats the second (no growth; for `lazy` also the same promotions), and
the stream queries a pass would make to build `eager` with polls (each allocation asks
every other stream that freed memory since it was last asked), with their cost per
operation at the H100's 0.3 us a query.
"""
import bisect
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.dirname(here))
import compare_torch  # noqa: E402
import sim  # noqa: E402

MIB = 1 << 20
SHARED = sim.SHARED
# cuStreamQuery on the H100 (BENCHMARKS.md, "Allocator on twelve traces against PyTorch").
POLL_NS = 299


def ops_of(path):
    return [line.split(",") for line in sim.read_text(path).splitlines()[1:]]


def streams_of(path):
    return {o[3] for o in ops_of(path)}


def run_borrow(path, passes=3):
    arenas, borrowed = {}, set()

    def holes(A, r):
        w = A.wild()
        return [(sz, a) for a, sz in A.free_blocks() if a != w and sz >= r]

    def allocate(st, r):
        small = r <= MIB
        A = arenas.setdefault((st, small), sim.Arena(small, sim.bestfit))
        own = holes(A, r)
        if own:
            return A, A.take(min(own)[1], r)
        others = [(sz, a, n, B) for n, ((s2, sm), B) in enumerate(arenas.items())
                  if sm == small and s2 != st for sz, a in holes(B, r)]
        if others:
            _, a, _, B = min(others, key=lambda x: x[:3])
            p = B.take(a, r)
            borrowed.add((id(B), p))
            return B, p
        return A, A.alloc(r)

    def deferred(A, a):
        if (id(A), a) in borrowed:
            borrowed.discard((id(A), a))
            return True
        return False

    def totals():
        return (sum(A.peak for A in arenas.values()) / MIB,
                sum(A.grows for A in arenas.values()), 0)

    return sim.replay(path, allocate, totals, passes, deferred=deferred)


def run_eager(path, passes=3):
    arenas = {}

    def allocate(st, r):
        small = r <= MIB
        A = arenas.setdefault(small, sim.Arena(small, sim.bestfit))
        return A, A.alloc(r)

    def totals():
        return (sum(A.peak for A in arenas.values()) / MIB,
                sum(A.grows for A in arenas.values()), 0)

    return sim.replay(path, allocate, totals, passes)


class TaggedArena(sim.Arena):
    """An arena whose free blocks are private to a stream or shared."""

    def __init__(self, small):
        super().__init__(small, sim.bestfit)
        self.tag = {}
        self.promotions = 0

    @staticmethod
    def merged_tag(t1, t2):
        """The tag of two free neighbours merged, or None when they may not merge."""
        if t1 == t2 or t2 == SHARED:
            return t1
        return t2 if t1 == SHARED else None

    def tagged_free(self, a, t):
        self.run = None
        self.blocks[a][1] = True
        self.tag[a] = t
        i = bisect.bisect_left(self.addrs, a)
        if i + 1 < len(self.addrs):
            n = self.addrs[i + 1]
            m = self.merged_tag(t, self.tag.get(n)) if self.blocks[n][1] else None
            if m is not None:
                self.tag[a] = m
                self.blocks[a][0] += self.blocks.pop(n)[0]
                del self.tag[n]
                self.addrs.pop(i + 1)
        if i > 0:
            p = self.addrs[i - 1]
            m = self.merged_tag(self.tag[a], self.tag.get(p)) if self.blocks[p][1] else None
            if m is not None:
                self.tag[p] = m
                self.blocks[p][0] += self.blocks.pop(a)[0]
                del self.tag[a]
                self.addrs.pop(i)

    def promote(self):
        self.promotions += 1
        for a in list(self.addrs):
            if a in self.blocks and self.blocks[a][1] and self.tag[a] != SHARED:
                self.tagged_free(a, SHARED)

    def usable(self, st, r):
        w = self.wild()
        return [(sz, a) for a, sz in self.free_blocks()
                if a != w and sz >= r and self.tag[a] in (st, SHARED)]

    def private_elsewhere(self, st):
        return any(b[1] and self.tag[a] not in (st, SHARED) for a, b in self.blocks.items())

    def tagged_alloc(self, st, r):
        holes = self.usable(st, r)
        if not holes and self.private_elsewhere(st):
            self.promote()
            holes = self.usable(st, r)
        if holes:
            return self.tagged_take(min(holes)[1], r)
        w = self.wild()
        if w is not None and self.tag[w] not in (st, SHARED):
            self.promote()
            w = self.wild()
        if w is None or self.blocks[w][0] < r:
            self.grow(r)
            w = self.wild()
            self.tag.setdefault(w, SHARED)
        return self.tagged_take(w, r)

    def tagged_take(self, a, r):
        t = self.tag[a]
        p = self.take(a, r)
        for x in (a, a + r):
            if x in self.blocks and self.blocks[x][1]:
                self.tag[x] = t
        return p


def run_lazy(path, passes=3):
    arenas = {}

    def allocate(st, r):
        small = r <= MIB
        A = arenas.setdefault(small, TaggedArena(small))
        return A, A.tagged_alloc(st, r)

    def totals():
        return (sum(A.peak for A in arenas.values()) / MIB,
                sum(A.grows for A in arenas.values()),
                sum(A.promotions for A in arenas.values()))

    return sim.replay(path, allocate, totals, passes,
                      free=lambda A, a, t: A.tagged_free(a, t))


def polls_per_pass(path):
    """How many stream queries a pass would make if each allocation first asked every
    other stream that freed memory since it was last asked (the eager design through
    polls: in a replay every stream is idle, so each answer makes its frees shared)."""
    owner, dirty, polls = {}, set(), 0
    for op, i, _, st in ops_of(path):
        if op == "a":
            asked = dirty - {st}
            polls += len(asked)
            dirty -= asked
            owner[i] = st
        elif op == "f":
            dirty.add(owner.pop(i))
    return polls


def repeats(res):
    """Whether the third pass makes the second's choices: no growth, same promotions."""
    return (res[1][:2] == res[2][:2]
            and res[2][2] - res[1][2] == res[1][2] - res[0][2])


def main(cmp_dir):
    runs, _ = compare_torch.torch_runs(os.path.join(cmp_dir, "torch.txt"))
    ours = compare_torch.gpuscope_runs(os.path.join(cmp_dir, "gpuscope.jsonl"))
    designs = [("per-stream", lambda p: sim.run(p, sim.bestfit, 3)), ("borrow", run_borrow),
               ("eager", run_eager), ("lazy", run_lazy)]
    met = {name: [0, 0, 0] for name, _ in designs}
    for path in sim.trace_paths():
        name = os.path.basename(path)
        if len(streams_of(path)) < 2 or name not in ours:
            continue
        allocated = ours[name]["peak_allocated"] / MIB
        better = min(r[name]["peak_reserved"] / r[name]["peak_allocated"]
                     for r in runs.values())
        torch_dev = runs["default"][name]["device_allocs"]
        cells = []
        for design, fn in designs:
            res = fn(path)
            reserved, dev = res[-1][0], res[-1][1]
            ratio = reserved / allocated
            same = repeats(res) if design == "lazy" else res[1][:2] == res[2][:2]
            m = met[design]
            m[0] += ratio <= better + 1e-9
            m[1] += dev <= torch_dev
            m[2] += same
            grows = "" if same else " GROWS"
            cells.append(f"{design} {reserved:6.0f} ({ratio:.4f}) {dev:3d}{grows}")
        polls = polls_per_pass(path)
        cells.append(f"polls {polls} (+{polls * POLL_NS / len(ops_of(path)):.1f} ns/op)")
        print(f"{name:30s} better mode {better:.4f}, PyTorch {torch_dev:3d} | " + " | ".join(cells))
    for design, (r, d, s) in met.items():
        print(f"{design}: ratio <= better mode {r}, device allocs <= PyTorch {d}, "
              f"later passes repeat {s}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
