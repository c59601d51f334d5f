#!/usr/bin/env bash
# A GPU-machine call that records one corpus and compares it (corpus_run.sh, nine
# rounds) with the carried binaries, packing what it wrote so that it all comes back.
# From the repository root there, after bench/build_device_bins.sh here:
#   bash bench/record_traces/corpus_call.sh NAME     (workloads_NAME.py, e.g. nineteenth)
# Writes $OUT/NAME/ (log.txt ends with corpus_run.sh's exit status) and $OUT/NAME.tgz.
set -uo pipefail
name=$1
source bench/device_bin.sh
O=$OUT/$name; mkdir -p "$O"
bash bench/record_traces/corpus_run.sh "workloads_$name.py" "$bin/gpuscope" "$O" 9 > "$O/log.txt" 2>&1
echo "rc $?" >> "$O/log.txt"
tar czf "$OUT/$name.tgz" -C "$OUT" "$name"
