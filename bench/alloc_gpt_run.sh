#!/usr/bin/env bash
# One GPU-machine call for the allocator (issue 11) after bench/build_device_bins.sh
# here: the CUDA tests of the allocator and tensors, bench/compare_torch.sh on every
# trace of tests/data/traces (three alternated repeats), and the GPT example
# against torch_gpt.py at both sizes (bench/gpt_run.sh default big). From the
# repository root on the GPU machine, with .device-bin.txz carried:
#   bash bench/alloc_gpt_run.sh OUT
# Everything it writes is packed as OUT/alloc_gpt.tgz; the tables are printed.
set -uo pipefail
out=$1/alloc_gpt
mkdir -p "$out"
source bench/device_bin.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt"
for t in cuda_allocator cuda_tensor; do
  echo "== $t"; timeout 120 ".device-bin/tests/$t" --test-threads=4 2>&1 | grep -E "^test |test result|skipped|panicked|FAILED|assert"
done > "$out/tests.txt" 2>&1
grep -hE "test result|FAILED|panicked" "$out/tests.txt"
REPEATS=3 timeout 330 bash bench/compare_torch.sh .device-bin/gpuscope "$out/cmp" tests/data/traces/*.csv* > /dev/null 2> "$out/cmp_stderr.txt"
tail -3 "$out/cmp_stderr.txt"
sed -n '/warm \/ PyTorch default/,/^$/p' "$out/cmp/table.md"
mkdir -p "$out/gpt"
timeout 200 bash bench/gpt_run.sh .device-bin "$out/gpt" default big > "$out/gpt_run.log" 2>&1
tail -12 "$out/gpt_run.log"
cd "$1" && tar czf alloc_gpt.tgz alloc_gpt && rm -rf alloc_gpt
