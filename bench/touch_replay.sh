#!/usr/bin/env bash
# Replays the multi-stream traces of tests/data/traces on the GPU with every block
# written on its stream (`gpuscope replay --touch`: the streams are busy when the
# allocator asks, as in training), with pools per stream (the default) and shared
# (share_across_streams:True), and without the writes for reference; then PyTorch's
# allocator (default and expandable segments) with the same writes
# (TORCH_REPLAY_TOUCH=1 bench/torch_replay.sh); JSON lines per setting and PyTorch's
# output under OUT, and a table (bench/touch_table.py).
#
#   bash bench/touch_replay.sh GPUSCOPE_BINARY OUT [PASSES]
set -euo pipefail
bin=$1
out=$2
passes=${3:-6}
mkdir -p "$out"
traces=()
for t in tests/data/traces/*.csv*; do
  # Traces with more than one stream (the fourth column).
  if [[ $(gzip -dcf "$t" | cut -d, -f4 | tail -n +2 | sort -u | wc -l) -gt 1 ]]; then traces+=("$t"); fi
done
for share in False True; do
  for touch in "" --touch; do
    GPUSCOPE_ALLOC_CONF=share_across_streams:$share \
      "$bin" replay --backend cuda --format json --warm-passes "$passes" $touch "${traces[@]}" \
      > "$out/share_${share}${touch:+_touch}.jsonl"
  done
done
TORCH_REPLAY_TOUCH=1 TORCH_REPLAY_PASSES=$((passes + 1)) bash bench/torch_replay.sh "${traces[@]}" \
  > "$out/torch_touch.txt"
python3 bench/touch_table.py "$out"
