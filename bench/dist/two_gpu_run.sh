#!/usr/bin/env bash
# Issue 15's measurements on a machine with two GPUs (nvidia-h200-x2), gpuscope and its
# PyTorch anchors in the same call, after bench/build_device_bins.sh here (carry
# .device-bin.txz). From the repository root there:
#
#   bash bench/dist/two_gpu_run.sh OUT
#
# 1. the multi-process and NCCL tests (dist_processes: the 2-GPU ones run for real);
# 2. all-reduce bus bandwidth, gpuscope's path against NCCL's through PyTorch, 1 MiB to 1 GiB;
# 3. the GPT: one GPU at batch 64 (the doubled batch) and two GPUs at batch 32 each, for
#    gpuscope (`gpt --devices 2`, and under torchrun) and torch_gpt.py under torchrun;
#    scaling efficiency = tokens/s on 2 / (2 x tokens/s on 1), parameters identical at the end.
# Logs are packed as OUT/two_gpu.tgz; the summary is printed and kept as OUT/two_gpu_summary.txt.
set -uo pipefail
base=$1
out=/tmp/two_gpu_logs/two_gpu
mkdir -p "$out" "$base"
source bench/device_bin.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
nvidia-smi topo -m >> "$out/gpu.txt" 2>&1

timeout 300 $bin/tests/dist_processes --test-threads=1 > "$out/dist_tests.txt" 2>&1

timeout 120 torchrun --nproc_per_node=2 bench/dist/torch_allreduce.py --sizes-mib 1,256,1024 > "$out/allreduce_torch.txt" 2>&1
timeout 120 torchrun --nproc_per_node=2 --no-python $bin/allreduce_bench --sizes-mib 1,256,1024 > "$out/allreduce_gpuscope.txt" 2>&1

python3 bench/torch_gpt.py --write-data /tmp/tokens.bin --batch 64 > "$out/torch_1gpu_b64.txt" 2>&1
timeout 300 torchrun --nproc_per_node=2 bench/torch_gpt.py > "$out/torch_2gpu.txt" 2>&1
timeout 300 $bin/gpt --device cuda --data /tmp/tokens.bin --batch 64 > "$out/gpt_1gpu_b64.txt" 2> "$out/gpt_1gpu_b64.err"
timeout 300 $bin/gpt --devices 2 --data /tmp/tokens.bin > "$out/gpt_2gpu.txt" 2> "$out/gpt_2gpu.err"
timeout 300 torchrun --nproc_per_node=2 --no-python $bin/gpt --data /tmp/tokens.bin > "$out/gpt_2gpu_torchrun.txt" 2> "$out/gpt_2gpu_torchrun.err"

tar czf "$base/two_gpu.tgz" -C /tmp/two_gpu_logs two_gpu
{
  cat "$out/gpu.txt"
  grep -E "test result|FAILED|skipped" "$out/dist_tests.txt"
  for f in allreduce_torch allreduce_gpuscope; do echo "-- $f"; grep '^{' "$out/$f.txt"; done
  for f in torch_1gpu_b64 torch_2gpu gpt_1gpu_b64 gpt_2gpu gpt_2gpu_torchrun; do
    echo "-- $f"; grep '^{' "$out/$f.txt" | tail -1; tail -2 "$out/$f.err" 2>/dev/null
  done
} | tee "$base/two_gpu_summary.txt"
