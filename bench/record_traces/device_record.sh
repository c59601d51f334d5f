#!/usr/bin/env bash
# One GPU-machine call that records the trace corpus and measures what the virtual
# memory calls cost. From the repository root on the GPU machine:
#   bash bench/record_traces/device_record.sh DIR_WITH_SCRIPTS OUT_DIR TRACE.csv...
# DIR_WITH_SCRIPTS holds record.py, workloads.py, record_all.sh, vmm_cost.cpp and
# torch_replay.cpp (copies of bench/ in this branch, when the checkout sent is another).
set -uo pipefail
src=$1; out=$2; shift 2
mkdir -p "$out/rec"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt" 2>&1
python3 -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__, torch.cuda.get_device_name())' >> "$out/gpu.txt" 2>&1
# 1. The corpus.
bash "$src/record_all.sh" "$out/rec"
# 2. Virtual memory costs.
inc=$(dirname "$(find / -name cuda.h -path '*include*' 2>/dev/null | head -1)")
stub=$(dirname "$(find / -name 'libcuda.so' 2>/dev/null | head -1)")
g++ -O2 -std=c++17 -I"$inc" "$src/vmm_cost.cpp" -L"$stub" -lcuda -o /tmp/vmm_cost > "$out/vmm_cost.txt" 2>&1 && /tmp/vmm_cost >> "$out/vmm_cost.txt" 2>&1
# 3. PyTorch's allocator on every trace (the shared three and the new ones).
T=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
rinc=$(dirname "$(find / -name cuda_runtime_api.h -path '*include*' 2>/dev/null | head -1)")
lib=$(dirname "$(find / -name 'libcudart.so*' 2>/dev/null | head -1)")
g++ -O2 -std=c++17 -I"$T/include" -I"$rinc" "$src/torch_replay.cpp" -o /tmp/torch_replay \
  -L"$T/lib" -lc10_cuda -lc10 -Wl,-rpath,"$T/lib" -L"$lib" -lcudart > "$out/torch.txt" 2>&1
echo "== PyTorch default settings" >> "$out/torch.txt"
/tmp/torch_replay "$@" "$out"/rec/*.csv >> "$out/torch.txt" 2>&1
echo "== PyTorch expandable_segments:True" >> "$out/torch.txt"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True /tmp/torch_replay "$@" "$out"/rec/*.csv >> "$out/torch.txt" 2>&1
echo "== PyTorch default settings, 10 passes" >> "$out/torch.txt"
TORCH_REPLAY_PASSES=10 /tmp/torch_replay "$out"/rec/side_stream_loader_train.csv >> "$out/torch.txt" 2>&1
tail -4 "$out/vmm_cost.txt"
grep -c "pass 0" "$out/torch.txt"
