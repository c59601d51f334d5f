#!/usr/bin/env bash
# On the GPU machine, after bench/build_device_bins.sh here (carry .device-bin.txz): how
# close to the device's free memory each allocator lets each trace come (bench/headroom.py):
# PyTorch's default allocator, its expandable segments, and gpuscope on CUDA, one trace
# after another. Usage: bash bench/headroom_gpu.sh OUT [headroom.py options] TRACE.csv...
# Writes OUT/headroom.txt and OUT/nvidia-smi.txt.
set -euo pipefail
out=$1
shift
mkdir -p "$out"
source bench/device_bin.sh
bash bench/torch_replay.sh > /dev/null # builds /tmp/torch_replay
nvidia-smi > "$out/nvidia-smi.txt"
GPUSCOPE=$bin/gpuscope python3 bench/headroom.py --runner torch-default --runner torch-expandable \
  --runner cuda "$@" 2>&1 | tee "$out/headroom.txt"
