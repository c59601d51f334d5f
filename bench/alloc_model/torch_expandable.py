"""A model of PyTorch's caching allocator with expandable segments, built on sim.py:
one arena per (stream, pool); best fit over the free blocks, the arena's free top last
(PyTorch's `get_free_block` passes over the block that can expand when another fits);
every block split (with expandable segments PyTorch splits whenever 512 bytes or more
remain); growth at the top by what is missing, in whole 20 MiB pages (large pool) or
2 MiB pages (small pool); device allocations counted per page.

Usage, from the repository root:
    python3 bench/alloc_model/torch_expandable.py CMP_DIR
CMP_DIR: a compare_torch.sh output folder; prints, per trace, the model's peak reserved
MiB and pages beside PyTorch's recorded reserved (expandable mode) and device allocations,
and on how many traces the reserved figures are equal: all 80 of
bench/results/h100-2026-11-26/22-all-80/cmp, the 9 of the twelfth corpus
(bench/results/h100-2026-11-26/36-twelfth-corpus/cmp) and the 6 of the thirteenth
(38-thirteenth-corpus/cmp and async_again/cmp). (PyTorch's replay counts its device
allocations otherwise: they are not pages.) An earlier version took the free top as an
ordinary hole and left holes unsplit when 1 MiB or less would remain (sim.py's
PT_WILDCAND and PT_NOSPLIT): equal on 51 of the 80.
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


def grow(arena, need_total):
    """Maps the pages missing for `need_total` bytes at the arena's free top."""
    w = arena.wild()
    have = arena.blocks[w][0] if w is not None else 0
    page = 2 * MIB if arena.small else 20 * MIB
    size = -(-(need_total - have) // page) * page
    arena.grows += size // page
    if w is not None:
        arena.blocks[w][0] += size
    else:
        arena.blocks[arena.top] = [size, True]
        bisect.insort(arena.addrs, arena.top)
    arena.top += size
    arena.mapped += size
    arena.peak = max(arena.peak, arena.mapped)


sim.Arena.grow = grow


def main(cmp_dir):
    runs, _ = compare_torch.torch_runs(os.path.join(cmp_dir, "torch.txt"))
    recorded = runs["expandable"]
    equal = n = 0
    for path in sim.trace_paths():
        name = os.path.basename(path)
        if name not in recorded:
            continue
        reserved, pages = sim.run(path, sim.bestfit)[-1]
        t = recorded[name]
        same = abs(reserved * MIB - t["peak_reserved"]) < 1
        equal += same
        n += 1
        print(f"{name:36s} model {reserved:8.0f} MiB {pages:5d} pages | PyTorch "
              f"{t['peak_reserved'] / MIB:8.0f} MiB {t['device_allocs']:5d}"
              f"{'' if same else '  differs'}")
    print(f"reserved equal on {equal} of {n}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
