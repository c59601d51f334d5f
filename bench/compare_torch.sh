#!/usr/bin/env bash
# Replays allocation traces through PyTorch's CUDA caching allocator (default settings
# and expandable segments, via torch_replay.sh) and through gpuscope's (virtual memory,
# the default; virtual memory with reserve_ratio 1.02; and plain segments) in one run on the GPU machine, then prints a
# comparison table (markdown) of warm ns/op, peak reserved / peak allocated, and
# device allocations.
#
# Usage: bench/compare_torch.sh GPUSCOPE_BINARY OUT_DIR TRACE.csv...
set -euo pipefail
bin=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bash "$here/torch_replay.sh" "$@" > "$out/torch.txt" 2>&1
"$bin" replay --backend cuda --format json "$@" > "$out/gpuscope.jsonl"
GPUSCOPE_ALLOC_CONF=reserve_ratio:1.02 "$bin" replay --backend cuda --format json "$@" > "$out/gpuscope_tight.jsonl"
GPUSCOPE_ALLOC_CONF=expandable_segments:False "$bin" replay --backend cuda --format json "$@" > "$out/gpuscope_plain.jsonl"
python3 "$here/compare_torch.py" "$out" | tee "$out/table.md"
