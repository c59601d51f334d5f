"""A model of PyTorch's default CUDA caching allocator (no expandable segments), for
comparing growths with gpuscope's placement model (sim.py) on one-stream traces.

Segments are one cudaMalloc each: 2 MiB for requests of up to 1 MiB (the small pool),
20 MiB for requests under 10 MiB, else the request rounded up to 2 MiB. A request takes
the smallest cached block of its pool that fits (lowest address among equals), split
when what remains is at least 512 bytes (small pool) or more than 1 MiB (large pool);
a free merges with free neighbours of the same segment only. Nothing is released.
It reproduces the peak reserved and device allocations in the JSON beside the trace
exactly on 27 of the 32 one-stream traces of tests/data/traces (e.g. gpt2_train 7,708
MiB / 137, vae_conv_train 1,264 / 33); on four others it is within 2 device
allocations and 1.6% of reserved memory (PyTorch also rounds some requests by other
rules, and the recorded run is not the replay), and bert_infer's JSON is of another run.

    python3 bench/alloc_model/torch_default.py tests/data/traces/gpt2_train.csv ...

prints, per trace, (peak reserved MiB, device allocations) after each of two passes;
`run(path)[1].log` lists the growths as ((pass, op), request, segment size).
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402  (sim.read_text: plain or compressed traces)

MIB = 1 << 20


def rounded(size):
    return max(512, (size + 511) // 512 * 512)


def segment_size(r):
    if r <= MIB:
        return 2 * MIB
    if r < 10 * MIB:
        return 20 * MIB
    return (r + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


class TorchDefault:
    def __init__(self):
        self.free = {True: [], False: []}  # small pool? -> sorted [(size, addr)]
        self.blocks = {}  # addr -> [size, free, segment start, small]
        self.next_segment = 0
        self.reserved = self.peak = self.device_allocs = 0
        self.log = []

    def alloc(self, size, where=None):
        r = rounded(size)
        small = r <= MIB
        pool = self.free[small]
        i = bisect.bisect_left(pool, (r, -1))
        if i < len(pool):
            have, a = pool.pop(i)
        else:
            have = segment_size(r)
            a = self.next_segment
            self.next_segment += have + (1 << 40)  # segments never touch
            self.blocks[a] = [have, True, a, small]
            self.reserved += have
            self.peak = max(self.peak, self.reserved)
            self.device_allocs += 1
            self.log.append((where, r, have))
        b = self.blocks[a]
        rest = have - r
        if (small and rest >= 512) or (not small and rest > MIB):
            self.blocks[a] = [r, False, b[2], small]
            self.blocks[a + r] = [rest, True, b[2], small]
            bisect.insort(pool, (rest, a + r))
        else:
            b[1] = False
        return a

    def _previous(self, a):
        x = self.blocks[a][2]
        if x == a:
            return None
        while x + self.blocks[x][0] != a:
            x += self.blocks[x][0]
        return x

    def release(self, a):
        b = self.blocks[a]
        b[1] = True
        pool = self.free[b[3]]
        n = a + b[0]
        if n in self.blocks and self.blocks[n][1] and self.blocks[n][2] == b[2]:
            pool.remove((self.blocks[n][0], n))
            b[0] += self.blocks.pop(n)[0]
        p = self._previous(a)
        if p is not None and self.blocks[p][1]:
            pool.remove((self.blocks[p][0], p))
            self.blocks[p][0] += self.blocks.pop(a)[0]
            a = p
        bisect.insort(pool, (self.blocks[a][0], a))


def run(path, passes=2):
    ops = [line.split(",") for line in sim.read_text(path).splitlines()[1:]]
    if any(op == "r" or stream != "0" for op, _, _, stream in ops):
        raise SystemExit(f"{path}: more than one stream; the model has one")
    t = TorchDefault()
    out = []
    for p in range(passes):
        live = {}
        for k, (op, ident, size, _) in enumerate(ops):
            if op == "a":
                live[ident] = t.alloc(int(size), (p, k))
            else:
                t.release(live.pop(ident))
        for a in live.values():
            t.release(a)
        out.append((t.peak / MIB, t.device_allocs))
    return out, t


if __name__ == "__main__":
    for f in sys.argv[1:]:
        print(os.path.basename(f), run(f)[0])
