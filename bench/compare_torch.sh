#!/usr/bin/env bash
# Replays allocation traces through PyTorch's CUDA caching allocator (default settings
# and expandable segments, via torch_replay.sh) and through gpuscope's (virtual memory,
# the default, and plain segments), then ten passes of gpuscope, all in one run on the
# GPU machine, and prints the comparison tables (markdown; compare_torch.py): warm and
# cold ns/op, peak reserved / peak allocated, device allocations and driver calls per
# warm pass, and gpuscope against issue 11's targets.
#
# Usage: bench/compare_torch.sh GPUSCOPE_BINARY OUT_DIR TRACE.csv...
set -euo pipefail
bin=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bash "$here/torch_replay.sh" "$@" > "$out/torch.txt" 2>&1 || echo "torch_replay failed: see $out/torch.txt"
"$bin" replay --backend cuda --format json "$@" > "$out/gpuscope.jsonl"
GPUSCOPE_ALLOC_CONF=expandable_segments:False "$bin" replay --backend cuda --format json "$@" > "$out/gpuscope_plain.jsonl"
"$bin" replay --backend cuda --format json --warm-passes 10 "$@" > "$out/gpuscope_passes10.jsonl"
python3 "$here/compare_torch.py" "$out" | tee "$out/table.md"
