"""Where gpuscope's reserved / allocated misses PyTorch's better mode although it reserves
no more than either PyTorch mode: PyTorch's default allocator counts a block's unsplit
remainder (at most 1 MiB in the large pool) as allocated, so its peak allocated, the
ratio's denominator, is larger than the trace's (which gpuscope and expandable segments
report) on most traces.

Usage (repository root): python3 bench/alloc_model/denominators.py CMP_DIR
(a compare_torch.sh output folder: torch.txt, gpuscope.jsonl)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import compare_torch  # noqa: E402

MIB = 1 << 20


def main(d):
    torch, _ = compare_torch.torch_runs(os.path.join(d, "torch.txt"))
    ours = compare_torch.gpuscope_runs(os.path.join(d, "gpuscope.jsonl"))
    differs = misses = 0
    rows = []
    for t in sorted(ours):
        dflt, exp, o = torch["default"][t], torch["expandable"][t], ours[t]
        differs += dflt["peak_allocated"] != o["peak_allocated"]
        better = min(m["peak_reserved"] / m["peak_allocated"] for m in (dflt, exp))
        ratio = o["peak_reserved"] / o["peak_allocated"]
        if ratio > better + 1e-9:
            misses += 1
            if o["peak_reserved"] <= min(dflt["peak_reserved"], exp["peak_reserved"]):
                rows.append((t, o, dflt, exp, ratio, better))
    print(f"{len(ours)} traces; PyTorch default's peak allocated differs from the trace's on {differs}")
    print(f"ratio above PyTorch's better mode on {misses}; of those, reserved at most both modes' on {len(rows)}:")
    for t, o, dflt, exp, ratio, better in rows:
        print(f"  {t}: reserved {o['peak_reserved'] / MIB:.0f} MiB (default {dflt['peak_reserved'] / MIB:.0f}, "
              f"expandable {exp['peak_reserved'] / MIB:.0f}); peak allocated {o['peak_allocated'] / MIB:.1f} "
              f"(default {dflt['peak_allocated'] / MIB:.1f}); ratio {ratio:.4f} vs {better:.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
