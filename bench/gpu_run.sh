#!/usr/bin/env bash
# On the GPU machine, from the repository root, after bench/build_device_bins.sh here:
# runs every test binary (CUDA tests run for real there), the allocator comparison with
# PyTorch, and the training example; writes logs under $1 (default ./gpu-out).
set -uo pipefail
out=${1:-gpu-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt"
for t in .device-bin/tests/*; do
  echo "== $(basename "$t")"
  (cd "$(dirname "$0")/.." && "$t" --test-threads=4 2>&1) | grep -E "^test |test result|skipped|panicked" || true
done > "$out/tests.txt" 2>&1
grep -E "test result|FAILED|panicked" "$out/tests.txt" | sort | uniq -c
