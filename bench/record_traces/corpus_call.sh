#!/usr/bin/env bash
# A GPU-machine call that records one corpus and compares it (corpus_run.sh) with the
# carried binaries, then measures the new traces' headroom in the time left, and packs
# what it wrote so that it all comes back. From the repository root there, after
# bench/build_device_bins.sh here:
#   bash bench/record_traces/corpus_call.sh NAME     (workloads_NAME.py, e.g. nineteenth)
# Environment: REPEATS (comparison rounds, default 5), RECORD_COMPARE_S (the recording and
# comparison are cut after this many seconds, default 420), LIMIT_S (the headroom stops
# this many seconds after the start, default 555: a call may run 600 s in all).
# Writes $OUT/NAME.tgz (NAME/log.txt, which ends with corpus_run.sh's exit status,
# NAME/cmp/, NAME/machine.txt, NAME/headroom.txt) and the compressed traces as one archive
# in 15 MiB parts, $OUT/NAME_traces.tar.part.aa, .ab, ... (a file comes back only up to
# 16 MiB: `cat NAME_traces.tar.part.* | tar x` here).
set -uo pipefail
name=$1
start=$SECONDS
source bench/device_bin.sh
O=$OUT/$name; mkdir -p "$O"
timeout "${RECORD_COMPARE_S:-420}" bash bench/record_traces/corpus_run.sh "workloads_$name.py" \
  "$bin/gpuscope" "$O" "${REPEATS:-5}" > "$O/log.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$O/log.txt"
left=$((${LIMIT_S:-555} - (SECONDS - start)))
runners=(--runner cuda)
# PyTorch's replayer is built by the comparison's first round; without it, gpuscope's only.
[[ -x /tmp/torch_replay ]] && runners+=(--runner torch-default --runner torch-expandable)
if [[ $left -gt 0 ]] && compgen -G "$O/traces/*.csv" > /dev/null; then
  GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py "${runners[@]}" --lo 0.6 \
    --steps 6 "$O"/traces/*.csv > "$O/headroom.txt" 2>&1
  echo "rc $? after $((SECONDS - start)) s" >> "$O/headroom.txt"
fi
gzip -9n "$O"/traces/*.csv 2> /dev/null
tar cf "$OUT/${name}_traces.tar" -C "$O" traces && rm -rf "$O/traces"
(cd "$OUT" && split -b 15m "${name}_traces.tar" "${name}_traces.tar.part." && rm "${name}_traces.tar")
tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$O"
