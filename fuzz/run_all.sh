#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 180) each, JOBS at a time (default 2),
# from the seeded corpus (./seed.sh first), and prints one line per target: runs,
# executions per second, corpus size, coverage at the start and at the end, and whether
# it crashed. Logs go to fuzz/logs/<target>.log; a crash leaves its input in
# fuzz/artifacts/<target>/.
#
# Usage: fuzz/run_all.sh [SECONDS] [JOBS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-180}
jobs=${2:-2}
shift 2 2>/dev/null || shift $#
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || mapfile -t targets < <(cargo +nightly fuzz list)
mkdir -p logs
run() {
  t=$1
  cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=4096 \
    -timeout=20 -print_final_stats=1 > "logs/$t.log" 2>&1
  echo "$t exit=$?"
}
export -f run
export secs
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run {}'
for t in "${targets[@]}"; do
  log=logs/$t.log
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  eps=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  first=$(grep -m1 -oE 'cov: [0-9]+' "$log" | grep -oE '[0-9]+')
  last=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
  lastnew=$(grep -E '#[0-9]+\s+(NEW|REDUCE)' "$log" | tail -1 | grep -oE '^#[0-9]+')
  corpus=$(ls "corpus/$t" | wc -l)
  crash=$(grep -cE 'ERROR: libFuzzer|panicked|deadly signal' "$log")
  echo "$t: ${runs:-?} runs, ${eps:-?} exec/s, corpus $corpus, cov ${first:-?} -> ${last:-?}, last new input at ${lastnew:-?}, crashes $crash"
done
