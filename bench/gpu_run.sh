#!/usr/bin/env bash
# Everything the GPU machine runs, in one call, after bench/build_device_bins.sh here.
# From the repository root on the GPU machine: bash bench/gpu_run.sh OUT_DIR
# The working tree is larger than the GPU machine takes: `python3 bench/device_tree.py slim`
# here before the call (earlier results stay behind), `python3 bench/device_tree.py restore` after.
# Writes logs into OUT_DIR/gpu and packs them as OUT_DIR/gpu.tgz.
set -uo pipefail
out=$1/gpu
mkdir -p "$out"
source bench/device_bin.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt"

# 1. Every test binary (CUDA tests run for real here). ui (trybuild), lint_cli and replay_cli need
#    cargo and the build tree, so they run where the code is built.
for t in .device-bin/tests/*; do
  name=$(basename "$t")
  [[ $name == ui || $name == lint_cli || $name == replay_cli ]] && continue
  echo "== $name"
  "$t" --test-threads=4 2>&1 | grep -E "^test |test result|skipped|panicked|FAILED" || true
done > "$out/tests.txt" 2>&1

# 2. The allocator against PyTorch's.
bash bench/compare_torch.sh .device-bin/gpuscope "$out/cmp" tests/data/traces/*.csv* > /dev/null 2>&1
.device-bin/gpuscope replay --backend cuda --format json --warm-passes 10 tests/data/traces/*.csv* > "$out/cmp/gpuscope_passes10.jsonl"

# 3. Training: gpuscope (tracking on, the example's default; and off), PyTorch's twin.
.device-bin/train --device cuda --timeline "$out/timeline.svg" > "$out/train_cuda.txt" 2>&1
.device-bin/train --device cuda --no-tracking --timeline /tmp/t.svg > "$out/train_cuda_untracked.txt" 2>&1
python3 bench/torch_mlp.py > "$out/torch_mlp.txt" 2>&1
.device-bin/train --device cuda --hidden 1024 --batch-size 1024 --samples 100000 --epochs 3 --timeline /tmp/t.svg > "$out/train_cuda_1024.txt" 2>&1
python3 bench/torch_mlp.py --hidden 1024 --batch-size 1024 --samples 100000 --epochs 3 > "$out/torch_mlp_1024.txt" 2>&1
# What tracking costs a step, end to end: paired rounds of 20 steps on and off (alternating).
.device-bin/train --device cuda --epochs 1 --tracking-ab 600 --timeline /tmp/t.svg > "$out/tracking_ab.txt" 2>&1
# The same with a stream fence at every scope exit (no fence_interval_us limit).
GPUSCOPE_ALLOC_CONF=fence_interval_us:0 .device-bin/train --device cuda --epochs 1 --tracking-ab 600 --timeline /tmp/t.svg > "$out/tracking_ab_every_fence.txt" 2>&1
.device-bin/train --device cuda --hidden 1024 --batch-size 1024 --samples 100000 --epochs 1 --tracking-ab 150 --timeline /tmp/t.svg > "$out/tracking_ab_1024.txt" 2>&1

# 4. compute-sanitizer memcheck over a short training run.
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
"$cs" --tool memcheck --leak-check no .device-bin/train --device cuda --epochs 1 --samples 2000 --timeline /tmp/t.svg > "$out/memcheck.txt" 2>&1
tar czf "$1/gpu.tgz" -C "$1" gpu
grep -hE "test result|FAILED|panicked" "$out/tests.txt" | sort | uniq -c
tail -3 "$out/memcheck.txt"
grep -h "warm steps\|ms/step" "$out"/train_cuda*.txt "$out"/torch_mlp*.txt
for f in "$out"/tracking_ab*.txt; do echo "$(basename "$f"): $(grep -h "tracking A/B" "$f")"; done
cat "$out/cmp/table.md"
