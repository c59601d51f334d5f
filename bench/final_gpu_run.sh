#!/usr/bin/env bash
# The whole project on one GPU machine, in one call, after bench/build_device_bins.sh
# here: every test binary (the CUDA tests run for real), the GPT example against its
# PyTorch reference at the default size (same tokens), the data-parallel path as a
# one-rank job (rendezvous, NCCL, DistributedDataParallel), and compute-sanitizer's
# four tools over the train example and the allocator and tensor CUDA tests.
#
#   bash bench/final_gpu_run.sh OUT [PHASE...]      (phases: tests gpt ddp sanitize)
#
# Logs are written under /tmp and packed as OUT/final.tgz (the GPU machine returns only
# a few files from OUT); a summary is printed last and kept as OUT/final_summary.txt.
set -uo pipefail
base=$1
out=/tmp/final_logs/final
shift
phases=${*:-tests gpt ddp sanitize}
has() { [[ " $phases " == *" $1 "* ]]; }
mkdir -p "$out" "$base"
source bench/device_bin.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)

if has tests; then
  for t in $bin/tests/*; do
    name=$(basename "$t")
    # ui (trybuild), the CLI's tests and the architecture check need cargo or the sources' tree.
    [[ $name == ui || $name == lint_cli || $name == replay_cli || $name == view_cli || $name == lint_corpus || $name == architecture ]] && continue
    echo "== $name"
    timeout 120 "$t" --test-threads=4 --nocapture 2>&1 | grep -E "^test |test result|skipped:|panicked|FAILED|error:|^share_across_streams:" || true
  done > "$out/tests.txt" 2>&1
fi

if has gpt; then
  timeout 240 python3 bench/torch_gpt.py --write-data /tmp/tokens.bin > "$out/torch_gpt.txt" 2>&1
  timeout 200 $bin/gpt --device cuda --data /tmp/tokens.bin > "$out/gpt.txt" 2> "$out/gpt.err"
fi

if has ddp; then
  # One rank of a data-parallel job: the whole path (store, NCCL, buckets) on one GPU.
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29561 \
    timeout 200 $bin/gpt --device cuda --steps 60 > "$out/gpt_ddp1.txt" 2> "$out/gpt_ddp1.err"
  timeout 120 $bin/allreduce_bench --sizes-mib 1,256 --iters 10 > "$out/allreduce_1gpu.txt" 2>&1
fi

if has sanitize; then
  # The four tools at once (correctness tools, not timings), each item bounded, and all
  # within SANITIZE_BUDGET_S (default 480 s, so that one call of at most 600 s still
  # packs its logs): an item with too little time left is reported as skipped.
  deadline=$((SECONDS + ${SANITIZE_BUDGET_S:-480}))
  # sanitize TOOL COMMAND...: one item under the tool, within the time left (at most 200 s).
  sanitize() {
    local tool=$1 left=$((deadline - SECONDS)); shift
    ((left > 200)) && left=200
    if ((left < 15)); then echo "skipped: out of time"; return; fi
    timeout "$left" "$cs" --tool "$tool" --print-limit 20 --error-exitcode 9 "$@" 2>&1 \
      | grep -E "ERROR SUMMARY|test result|FAILED|^=========" | head -40
    echo "exit ${PIPESTATUS[0]}"
  }
  small="--device cuda --layers 2 --embd 128 --heads 4 --block 64 --vocab 128 --batch 4 --steps 3 --warmup 1"
  for tool in memcheck racecheck synccheck initcheck; do
    (
      echo "== train ($tool)"
      sanitize $tool $bin/train --device cuda --epochs 1 --samples 2000
      for extra in "" "--checkpoint"; do
        echo "== gpt $extra ($tool)"
        sanitize $tool $bin/gpt $small $extra
      done
      for name in cuda_allocator cuda_tensor ops_cuda_vs_host ops_cuda_transformer gpt_model; do
        echo "== $name ($tool)"
        sanitize $tool $bin/tests/$name --test-threads=1
      done
    ) > "$out/sanitizer_$tool.txt" 2>&1 &
  done
  wait
fi

tar czf "$base/final.tgz" -C /tmp/final_logs final
{
echo "== summary"
cat "$out/gpu.txt"
if [[ -f $out/tests.txt ]]; then
  grep -h "^test result" "$out/tests.txt" | awk '{p+=$4; f+=$6} END {print "tests: " p " passed, " f " failed"}'
  grep -hE "FAILED|panicked" "$out/tests.txt" | head -20
  echo "skips: $(grep -c "skipped:" "$out/tests.txt")"; grep -h "skipped:" "$out/tests.txt" | sort | uniq -c | head -5
fi
for f in torch_gpt gpt gpt_ddp1; do [[ -f $out/$f.txt ]] && { echo "-- $f"; tail -2 "$out/$f.txt"; tail -3 "$out/$f.err" 2>/dev/null; }; done
[[ -f $out/allreduce_1gpu.txt ]] && tail -3 "$out/allreduce_1gpu.txt"
for f in "$out"/sanitizer_*.txt; do [[ -f $f ]] && { echo "-- $(basename "$f")"; grep -E "SUMMARY|^exit|^== |skipped" "$f" | paste -sd" " | sed "s/ == /\n== /g"; }; done
} | tee "$base/final_summary.txt"
exit 0
