"""An oracle experiment: allocations that the trace never frees (weights, optimizer
state, buffers: persistent) are placed at the top of the arena (the wilderness, growing
if needed) instead of in the best-fitting hole, everything else as sim.py. Prints, per
trace, peak reserved MiB with sim.py's policy and with this one (second pass).

    python3 bench/alloc_model/persistent.py        # from the repository root
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402


def run(path, persistent_on_top, passes=2):
    ops = [line.split(",") for line in sim.read_text(path).splitlines()[1:]]
    freed = {i for op, i, _, _ in ops if op == "f"}
    arenas = {}
    peaks = []
    for _ in range(passes):
        live, pending = {}, []
        for op, i, size, stream in ops:
            if op == "a":
                for arena, a in pending:
                    arena.free(a)
                pending = []
                r = sim.r512(int(size))
                key = (stream, r <= sim.MIB)
                arena = arenas.setdefault(key, sim.Arena(key[1], sim.bestfit))
                if persistent_on_top and i not in freed and not arena.small:
                    arena.pol = lambda *_: None  # no hole: the wilderness
                    a = arena.alloc(r)
                    arena.pol = sim.bestfit
                else:
                    a = arena.alloc(r)
                live[i] = [arena, a, False]
            elif op == "r":
                live[i][2] = True
            else:
                arena, a, recorded = live.pop(i)
                if recorded:
                    pending.append((arena, a))
                else:
                    arena.free(a)
        for arena, a in pending:
            arena.free(a)
        for arena, a, _ in live.values():
            arena.free(a)
        peaks.append(sum(x.peak for x in arenas.values()) / sim.MIB)
    return peaks[-1]


if __name__ == "__main__":
    for f in sim.trace_paths():
        print(f"{os.path.basename(f)}: {run(f, False):.0f} -> {run(f, True):.0f}")
