#!/usr/bin/env bash
# Collectives on two GPUs (nvidia-h200-x2) with blocking communicators (the default)
# against non-blocking ones (GPUSCOPE_NCCL_NONBLOCKING=1) and NCCL through PyTorch, in
# one call, after bench/build_device_bins.sh here (carry .device-bin.txz). From the
# repository root there:
#
#   bash bench/dist/collectives_run.sh OUT
#
# 1. the multi-process and NCCL tests (dist_processes), in both modes;
# 2. all-reduce, 1 MiB to 1 GiB, 20 iterations each, two rounds: PyTorch, gpuscope,
#    gpuscope non-blocking;
# 3. the GPT on two GPUs (`gpt --devices 2`, and under torchrun) and PyTorch DDP under
#    torchrun.
# Logs: OUT/collectives/*.txt; the summary is printed.
set -uo pipefail
out=$1/collectives
mkdir -p "$out"
source bench/device_bin.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt" 2>&1
timeout 200 $bin/tests/dist_processes --test-threads=1 > "$out/dist_tests.txt" 2>&1
GPUSCOPE_NCCL_NONBLOCKING=1 timeout 200 $bin/tests/dist_processes --test-threads=1 > "$out/dist_tests_nonblocking.txt" 2>&1
sizes=1,16,256,1024
for round in 1 2; do
  timeout 100 torchrun --nproc_per_node=2 bench/dist/torch_allreduce.py --sizes-mib $sizes >> "$out/allreduce_torch.txt" 2>&1
  timeout 100 torchrun --nproc_per_node=2 --no-python $bin/allreduce_bench --sizes-mib $sizes >> "$out/allreduce_gpuscope.txt" 2>&1
  GPUSCOPE_NCCL_NONBLOCKING=1 timeout 100 torchrun --nproc_per_node=2 --no-python $bin/allreduce_bench --sizes-mib $sizes >> "$out/allreduce_gpuscope_nonblocking.txt" 2>&1
done
python3 bench/torch_gpt.py --write-data /tmp/tokens.bin --batch 64 > /dev/null 2>&1
timeout 200 torchrun --nproc_per_node=2 bench/torch_gpt.py > "$out/torch_2gpu.txt" 2>&1
timeout 200 $bin/gpt --devices 2 --data /tmp/tokens.bin > "$out/gpt_2gpu.txt" 2> "$out/gpt_2gpu.err"
timeout 200 torchrun --nproc_per_node=2 --no-python $bin/gpt --data /tmp/tokens.bin > "$out/gpt_2gpu_torchrun.txt" 2> "$out/gpt_2gpu_torchrun.err"
{
  cat "$out/gpu.txt"
  for f in dist_tests dist_tests_nonblocking; do echo "-- $f"; grep -E "^test .*(ok|FAILED)$|test result|panicked" "$out/$f.txt" | grep -v "rank [12]\]"; done
  for f in allreduce_torch allreduce_gpuscope allreduce_gpuscope_nonblocking; do echo "-- $f"; grep '^{' "$out/$f.txt"; done
  for f in torch_2gpu gpt_2gpu gpt_2gpu_torchrun; do echo "-- $f"; grep '^{' "$out/$f.txt" | tail -1; tail -2 "$out/$f.err" 2>/dev/null; done
} | tee "$out/summary.txt"
