#!/usr/bin/env bash
# The GPU call that measured BENCHMARKS.md's "Allocator on twelve traces against
# PyTorch": the allocator's CUDA tests, then bench/compare_torch.sh on every trace.
# It runs from a folder carried to the GPU machine, laid out as
#   bins/gpuscope, bins/tests/{cuda_allocator,cuda_tensor,ops_cuda_vs_host}
#     (release builds from here, stripped),
#   repo/tests/data/traces/, repo/bench/{compare_torch,torch_replay}.*,
#   repo/gpuscope-runtime/ (empty: test binaries resolve their data through it),
#   run.sh (this file);
# the test binaries look for their data under the build machine's checkout
# (/work/wt/alloc here), which is linked to repo/.
# Usage, from the repository root on the GPU machine: bash FOLDER/run.sh OUT
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1/alloc
mkdir -p "$out"
# Test binaries find data through the build machine's path: make it lead here.
mkdir -p /work/wt && ln -sfn "$here/repo" /work/wt/alloc
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt"
for t in cuda_allocator cuda_tensor ops_cuda_vs_host; do
  echo "== $t"; timeout 120 "$here/bins/tests/$t" --test-threads=4 2>&1 | grep -E "^test |test result|skipped|panicked|FAILED|assert" 
done > "$out/tests.txt" 2>&1
cd "$here/repo"
timeout 400 bash bench/compare_torch.sh "$here/bins/gpuscope" "$out/cmp" tests/data/traces/*.csv > /dev/null 2> "$out/cmp_stderr.txt"
grep -hE "test result|FAILED|panicked" "$out/tests.txt"
tail -3 "$out/cmp_stderr.txt"
grep -c "pass 0" "$out/cmp/torch.txt"
sed -n '/warm \/ PyTorch default/,$p' "$out/cmp/table.md"
cd "$1" && tar czf alloc.tgz alloc && rm -rf alloc
