"""A bound for moving memory (tried in the model only; BENCHMARKS.md, "What the remaining
targets cost"): `sim.py`'s placement, with every 2 MiB page free to move.

A page of an arena is backed only once a block touches it. When a block touches an
unbacked page, a backed page that no live block touches, anywhere on the device, is
unmapped and mapped there (a move); only when there is none does physical memory grow.
Since CUDA maps a physical allocation only whole, this needs one physical allocation
per page. Prints, per trace, the peak of backed pages against the peak of live bytes,
and the pages moved in each of three passes, with what the moves cost at the measured
price of one (`MOVE_US`, default 73 us: `cuMemUnmap` 27, `cuMemMap` 1, `cuMemSetAccess`
45 for 2 MiB on the H100, `bench/results/h100-corpus/vmm_cost.txt`).

Usage (repository root): python3 bench/alloc_model/remap.py
"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim
from sim import Arena, bestfit, r512, MIB, PAGE

MOVE_US = float(os.environ.get('MOVE_US', 73))


def run(path, passes=3):
    ops = [l.split(",") for l in sim.read_text(path).splitlines()[1:]]
    arenas, ids = {}, {}
    touching = {}   # (arena, page) -> live blocks touching it
    backed = set()  # (arena, page)
    idle = set()    # backed pages no live block touches
    state = {'pages': 0, 'peak': 0, 'live': 0, 'peak_live': 0}
    moved = []

    def pages(k, a, r):
        return [(ids[k], p) for p in range(a // PAGE, (a + r - 1) // PAGE + 1)]

    def release(k, a, r):
        for key in pages(k, a, r):
            touching[key] -= 1
            if touching[key] == 0 and key in backed:
                idle.add(key)

    for _ in range(passes):
        moves = 0; live = {}; pending = []
        for op, i, sz, st in ops:
            if op == 'a':
                for A, a, k, r in pending: A.free(a); release(k, a, r)
                pending = []
                r = r512(int(sz)); k = (st, r <= MIB)
                if k not in arenas:
                    arenas[k] = Arena(r <= MIB, bestfit); ids[k] = len(ids)
                A = arenas[k]; a = A.alloc(r); live[i] = [A, a, False, k, r]
                state['live'] += r; state['peak_live'] = max(state['peak_live'], state['live'])
                for key in pages(k, a, r):
                    touching[key] = touching.get(key, 0) + 1
                    if key in backed:
                        idle.discard(key)
                    else:
                        if idle:
                            backed.discard(idle.pop()); moves += 1
                        else:
                            state['pages'] += 1
                        backed.add(key)
                state['peak'] = max(state['peak'], state['pages'])
            elif op == 'r':
                live[i][2] = True
            else:
                A, a, rec, k, r = live.pop(i); state['live'] -= r
                if rec: pending.append((A, a, k, r))
                else: A.free(a); release(k, a, r)
        for A, a, k, r in pending: A.free(a); release(k, a, r)
        for A, a, _, k, r in live.values():
            A.free(a); release(k, a, r); state['live'] -= r
        moved.append(moves)
    return state['peak'] * PAGE / MIB, state['peak_live'] / MIB, state['pages'], moved, len(ops)


if __name__ == '__main__':
    within = n = 0
    for f in sim.trace_paths():
        peak, live, handles, moved, nops = run(f)
        n += 1; within += peak / live <= 1.02
        warm = max(moved[1:])
        print(f"{os.path.basename(f):36s} backed {peak:7.0f} MiB / live {live:8.1f} = {peak / live:.4f}; "
              f"{handles} physical allocations; pages moved by pass {moved}: "
              f"{warm * MOVE_US / 1e3:.0f} ms a warm pass, {warm * MOVE_US * 1e3 / nops:.0f} ns/op")
    print(f"backed / live <= 1.02 on {within} of {n}")
