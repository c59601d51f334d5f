#!/usr/bin/env bash
# Copies between two GPUs (nvidia-h200-x2), after bench/build_device_bins.sh here
# (carry .device-bin.txz). From the repository root there:
#
#   bash bench/dist/peer_run.sh OUT
#
# The two-GPU copy tests (cuda_peer, with its bandwidth line), PyTorch's copies between
# the same GPUs (bench/dist/torch_peer_copy.py, default and expandable), cuda_peer under
# compute-sanitizer's memcheck, and the CUDA tensor, allocator and multi-process tests,
# which now share the machine's two devices. Logs: OUT/peer/*.txt; summary printed.
set -uo pipefail
out=$1/peer
mkdir -p "$out"
source bench/device_bin.sh
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
nvidia-smi topo -m >> "$out/gpu.txt" 2>&1
timeout 300 $bin/tests/cuda_peer --test-threads=1 --nocapture > "$out/cuda_peer.txt" 2>&1
for mode in "" --expandable; do
  timeout 120 python3 bench/dist/torch_peer_copy.py $mode >> "$out/torch_peer_copy.txt" 2>&1
done
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 $bin/tests/cuda_peer \
  --test-threads=1 > "$out/cuda_peer_memcheck.txt" 2>&1
echo "memcheck exit: $?" >> "$out/cuda_peer_memcheck.txt"
for t in cuda_tensor cuda_allocator dist_processes; do
  timeout 300 $bin/tests/$t --test-threads=1 > "$out/$t.txt" 2>&1
done
{
  cat "$out/gpu.txt"
  for f in cuda_peer torch_peer_copy cuda_peer_memcheck cuda_tensor cuda_allocator dist_processes; do
    echo "-- $f"; grep -E "^test |test result|FAILED|panicked|skipped|GB/s|peer access|ERROR SUMMARY|exit:" "$out/$f.txt"
  done
} | tee "$out/summary.txt"
