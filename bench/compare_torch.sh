#!/usr/bin/env bash
# Replays allocation traces through PyTorch's CUDA caching allocator (default settings
# and expandable segments, via torch_replay.sh) and through gpuscope's (virtual memory,
# the default, and plain segments), then ten passes of gpuscope, all in one run on the
# GPU machine (the ten passes right after the first round, so that a run cut short by a
# timeout still has them: `python3 bench/compare_torch.py OUT_DIR` then reads the rounds
# that finished), and prints the comparison tables (markdown; compare_torch.py): warm and
# cold ns/op, peak reserved / peak allocated, device allocations and driver calls per
# warm pass, and gpuscope against issue 11's targets.
#
# Both sides run REPEATS times (default 9), alternately (PyTorch, then gpuscope), so that
# both meet the same machine; the tables take each side's median warm and cold ns/op
# over the repeats. Memory figures and driver calls are the same in every repeat.
# PIN_CPU=N runs every process on CPU N alone (taskset); off by default: on the H100
# machine it made gpuscope's warm passes about 1.5x slower, probably because the CUDA
# driver's own threads then share that CPU.
#
# Usage: bench/compare_torch.sh GPUSCOPE_BINARY OUT_DIR TRACE.csv...
# To keep OUT_DIR in the repository, `python3 bench/pack_repeats.py OUT_DIR` first packs
# the later repeats into one archive (compare_torch.py reads it; ~10x smaller).
set -euo pipefail
bin=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
repeats=${REPEATS:-9}
pin=()
if [[ -n ${PIN_CPU:-} ]] && command -v taskset > /dev/null; then
  pin=(taskset -c "$PIN_CPU")
fi
echo "repeats $repeats, pinned: ${pin[*]:-no}" > "$out/method.txt"
# The machine: the card and the host's CPU (warm ns/op differs by 1.6x between calls on
# machines of one kind and CPU; BENCHMARKS.md, "An H200 machine again").
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|CPU family|^Model:|MHz|L2 cache|L3 cache" || true; } >> "$out/method.txt"
for r in $(seq 1 "$repeats"); do
  s=$([[ $r == 1 ]] && echo "" || echo "_$r")
  "${pin[@]}" bash "$here/torch_replay.sh" "$@" > "$out/torch$s.txt" 2>&1 ||
    echo "torch_replay failed: see $out/torch$s.txt"
  "${pin[@]}" "$bin" replay --backend cuda --format json "$@" > "$out/gpuscope$s.jsonl"
  GPUSCOPE_ALLOC_CONF=expandable_segments:False "${pin[@]}" "$bin" replay --backend cuda \
    --format json "$@" > "$out/gpuscope_plain$s.jsonl"
  if [[ $r == 1 ]]; then
    "${pin[@]}" "$bin" replay --backend cuda --format json --warm-passes 10 "$@" \
      > "$out/gpuscope_passes10.jsonl"
  fi
done
python3 "$here/compare_torch.py" "$out" | tee "$out/table.md"
