"""Growth steps for bursts of growths, chosen on the first 25 traces and tried on the
third corpus (BENCHMARKS.md, "A third corpus, held out").

A large arena's growth within N allocations of its last growth (frees or not) is a
burst: its step is 5/4 of the last growth, up to C MiB or 1/8 of the arena (otherwise
the step of vmm::min_growth, as sim.py). For each (N, C), and for the policy of
sim.py, prints on the first 25 traces and on the ten of workloads_third.py: traces
whose peak reserved is above PyTorch's lower mode, traces with more device allocations
than PyTorch's default, the MiB above PyTorch's lower mode in all, and traces whose
second pass grows (must be none). PyTorch's figures are those of one H100 call
(bench/results/h100-2026-11-25/1-third-corpus/cmp_all/table.md).

    python3 bench/alloc_model/burst.py          # from the repository root, ~10 min
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402

MIB = sim.MIB
THIRD = {"bert_mlm_dynpad_fp16", "resnet34_train_with_eval", "gpt_beam_search",
         "clip_contrastive_bf16", "gru_packed_varlen_train", "vae_conv_train",
         "mlp_growing_batch_train", "dit_diffusion_bf16_ema", "two_models_serving",
         "cnn_keep_grads_clip_train"}


def pytorch_figures(table):
    """trace -> (PyTorch's lower peak reserved MiB, PyTorch default's device allocs)."""
    out = {}
    for line in open(table):
        m = re.match(r"\| (\S+)\.csv \|(?: [^|]+\|){4} \d+ vs (\d+)[^|]*\| \d+ vs (\d+)", line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


def burst_arena(window, cap):
    class Burst(sim.Arena):
        allocs = 0
        last_growth_at = -10**9

        def alloc(self, r):
            self.allocs += 1
            return super().alloc(r)

        def free(self, a):
            run = self.run
            super().free(a)
            self.run = run  # a free does not end a burst

        def min_step(self):
            if self.small:
                return super().min_step()
            if self.allocs - self.last_growth_at > window:
                self.run = None
            step = max(20 * MIB, self.mapped // 128)
            if self.run is not None:
                step = max(step, min(self.run + self.run // 4, self.mapped // 8))
            return step

        def grow(self, need_total):
            super().grow(need_total)
            if not self.small:
                self.run = min(self.last_growth, cap * MIB)
                self.last_growth_at = self.allocs
    return Burst


def score(arena, figures):
    sim_arena = sim.Arena
    sim.Arena = arena
    rows = {True: [0, 0, 0, []], False: [0, 0, 0, []]}
    try:
        for f in sim.trace_paths():
            name = sim.stem(f)
            if name not in figures:
                continue  # recorded after this experiment (the fourth corpus)
            first, second = sim.run(f, sim.bestfit)
            reserved, allocs = second
            lower, device = figures[name]
            r = rows[name in THIRD]
            r[0] += reserved > lower
            r[1] += allocs > device
            r[2] += max(0, reserved - lower)
            if first != second:
                r[3].append(name)
    finally:
        sim.Arena = sim_arena
    return rows


if __name__ == "__main__":
    figures = pytorch_figures("bench/results/h100-2026-11-25/1-third-corpus/cmp_all/table.md")
    print("policy | first 25: above lower, device allocs above, MiB above, warm growth "
          "| third 10: the same")
    combos = [("sim.py", sim.Arena)] + [
        (f"burst N {n} C {c}", burst_arena(n, c)) for n in (2, 3, 4, 6, 8) for c in (32, 48, 64, 96)]
    for label, arena in combos:
        rows = score(arena, figures)
        print(f"{label} | {rows[False]} | {rows[True]}", flush=True)
