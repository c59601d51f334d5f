#!/usr/bin/env bash
# The GPT benchmark on the GPU machine, gpuscope and its PyTorch reference in the same
# call. Run from the repository root there, after bench/gpt_build.sh here:
#
#   bash DIR/gpt_run.sh DIR OUT [PHASE...]
#
# DIR holds what gpt_build.sh made (the gpt binary, tests/, torch_gpt.py); logs are
# packed as OUT/gpt.tgz, with the summary (OUT/summary.txt) and the timelines' SVGs
# beside it. Phases (default: all but sanitize and ncu):
#   tests       the CUDA test binaries of the transformer operations and the GPT model
#   default     torch_gpt.py (fp32, writing its tokens) then gpt on those tokens, default size
#   big         both at --layers 12 --embd 768 --block 512 --batch 16
#   sdpa        both with --sdpa (fp32) at both sizes (gpuscope: the attention matrix
#               computed again in backward, not kept)
#   bf16        both with --bf16 --sdpa at both sizes (gpuscope has no autocast: its
#               products run at matmul precision medium, TF32, on f32 storage), and
#               both at matmul precision high (TF32; torch_gpt.py run after
#               torch.set_float32_matmul_precision("high"))
#   checkpoint  gpt --checkpoint at both sizes
#   ab          gpt --tracking-ab: tracking's share of the step, paired rounds
#   timeline    gpt --timeline (a few steps, memory by kind), with and without checkpoint
#   fit         gpt --find-batch-size under a 4 GiB cap; an OOM mid-step under a 1 GiB cap
#   trace       gpt --trace: gpuscope's allocation requests as traces (6 steps, three sizes)
#   leaks       gpt --leaks deny (short run)
#   sanitize    compute-sanitizer memcheck, racecheck, synccheck, initcheck over the
#               CUDA tests and a short gpt run
#   ncu         kernel times of one training step (Nsight Compute)
set -uo pipefail
dir=$1
base=$2
out=/tmp/gptlogs/gpt
shift 2
phases=${*:-tests default big checkpoint ab timeline fit leaks}
mkdir -p "$out"
gpt=$dir/gpt
has() { [[ " $phases " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
export PYTHONUNBUFFERED=1
big="--layers 12 --embd 768 --block 512 --batch 16"

if has tests; then
  for t in "$dir"/tests/*; do
    echo "== $(basename "$t")"
    "$t" --test-threads=4 2>&1 | grep -E "^test |test result|skipped|panicked|FAILED|error" || true
  done > "$out/tests.txt" 2>&1
fi
if has default; then
  python3 "$dir/torch_gpt.py" --write-data /tmp/tokens.bin > "$out/torch_default.txt" 2>&1
  "$gpt" --device cuda --data /tmp/tokens.bin > "$out/gpt_default.txt" 2> "$out/gpt_default.err"
  "$gpt" --device cuda > "$out/gpt_default_chain.txt" 2> "$out/gpt_default_chain.err"
fi
if has big; then
  python3 "$dir/torch_gpt.py" $big --steps 60 > "$out/torch_big.txt" 2>&1
  "$gpt" --device cuda $big --steps 60 > "$out/gpt_big.txt" 2> "$out/gpt_big.err"
fi
if has sdpa; then
  [[ -f /tmp/tokens.bin ]] || python3 "$dir/torch_gpt.py" --steps 12 --write-data /tmp/tokens.bin > /dev/null 2>&1
  python3 "$dir/torch_gpt.py" --sdpa > "$out/torch_sdpa.txt" 2>&1
  "$gpt" --device cuda --data /tmp/tokens.bin --sdpa > "$out/gpt_sdpa.txt" 2> "$out/gpt_sdpa.err"
  python3 "$dir/torch_gpt.py" $big --sdpa --steps 60 > "$out/torch_big_sdpa.txt" 2>&1
  "$gpt" --device cuda $big --sdpa --steps 60 > "$out/gpt_big_sdpa.txt" 2> "$out/gpt_big_sdpa.err"
fi
if has bf16; then
  [[ -f /tmp/tokens.bin ]] || python3 "$dir/torch_gpt.py" --steps 12 --write-data /tmp/tokens.bin > /dev/null 2>&1
  python3 "$dir/torch_gpt.py" --bf16 --sdpa > "$out/torch_bf16.txt" 2>&1
  "$gpt" --device cuda --data /tmp/tokens.bin --bf16 --sdpa > "$out/gpt_bf16.txt" 2> "$out/gpt_bf16.err"
  python3 -c 'import runpy, sys, torch; torch.set_float32_matmul_precision("high"); sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name="__main__")' "$dir/torch_gpt.py" > "$out/torch_tf32.txt" 2>&1
  "$gpt" --device cuda --data /tmp/tokens.bin --matmul-precision high > "$out/gpt_tf32.txt" 2> "$out/gpt_tf32.err"
  python3 "$dir/torch_gpt.py" $big --bf16 --sdpa --steps 60 > "$out/torch_big_bf16.txt" 2>&1
  "$gpt" --device cuda $big --bf16 --sdpa --steps 60 > "$out/gpt_big_bf16.txt" 2> "$out/gpt_big_bf16.err"
fi
if has checkpoint; then
  "$gpt" --device cuda --checkpoint --steps 60 > "$out/gpt_default_ckpt.txt" 2> "$out/gpt_default_ckpt.err"
  "$gpt" --device cuda $big --checkpoint --steps 60 > "$out/gpt_big_ckpt.txt" 2> "$out/gpt_big_ckpt.err"
fi
if has ab; then
  "$gpt" --device cuda --steps 20 --tracking-ab 20 --ab-steps 5 > "$out/gpt_ab.txt" 2> "$out/gpt_ab.err"
fi
if has timeline; then
  "$gpt" --device cuda --steps 12 --timeline "$out/timeline.svg" > "$out/gpt_timeline.txt" 2> "$out/gpt_timeline.err"
  "$gpt" --device cuda --steps 12 --checkpoint --timeline "$out/timeline_ckpt.svg" > "$out/gpt_timeline_ckpt.txt" 2> "$out/gpt_timeline_ckpt.err"
fi
if has trace; then
  # gpuscope's own allocation requests (bench/compare_torch.sh replays them through
  # PyTorch's allocator too): a few steps at each size, from before the model is built.
  "$gpt" --device cuda --steps 6 --warmup 2 --trace "$out/trace_gpt_default.csv" > "$out/gpt_trace.txt" 2>&1
  "$gpt" --device cuda --steps 6 --warmup 2 --checkpoint --trace "$out/trace_gpt_default_ckpt.csv" >> "$out/gpt_trace.txt" 2>&1
  "$gpt" --device cuda $big --steps 6 --warmup 2 --trace "$out/trace_gpt_big.csv" >> "$out/gpt_trace.txt" 2>&1
fi
if has fit; then
  "$gpt" --device cuda --steps 12 --find-batch-size --memory-limit-mib 4096 > "$out/gpt_fit.txt" 2> "$out/gpt_fit.err"
  "$gpt" --device cuda --steps 12 --memory-limit-mib 1024 > "$out/gpt_oom.txt" 2> "$out/gpt_oom.err"
  echo "exit $?" >> "$out/gpt_oom.err"
fi
if has leaks; then
  "$gpt" --device cuda --steps 12 --leaks deny > "$out/gpt_leaks.txt" 2> "$out/gpt_leaks.err"
  echo "exit $?" >> "$out/gpt_leaks.err"
fi
if has sanitize; then
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  small="--device cuda --layers 2 --embd 128 --heads 4 --block 64 --vocab 128 --batch 4 --steps 3 --warmup 1"
  # The four tools at once (correctness tools, not timings), each within 240 s.
  for tool in memcheck racecheck synccheck initcheck; do
    timeout 240 bash -c '
      cs=$1; tool=$2; dir=$3; gpt=$4; small=$5
      for t in ops_cuda_transformer ops_cuda_vs_host cuda_tensor gpt_model; do
        echo "== $t"
        "$cs" --tool $tool --error-exitcode 9 "$dir/tests/$t" --test-threads=1 2>&1 | grep -E "ERROR SUMMARY|test result|^=========" | head -60
        echo "exit ${PIPESTATUS[0]}"
      done
      for extra in "" "--checkpoint"; do
        echo "== gpt $extra"
        "$cs" --tool $tool --error-exitcode 9 "$gpt" $small $extra 2>&1 | grep -E "ERROR SUMMARY|^=========|error" | head -60
        echo "exit ${PIPESTATUS[0]}"
      done' _ "$cs" $tool "$dir" "$gpt" "$small" > "$out/sanitizer_$tool.txt" 2>&1 &
  done
  wait
fi
if has ncu; then
  ncu --print-summary per-kernel --metrics gpu__time_duration.sum --launch-skip 1500 --launch-count 700 \
    "$gpt" --device cuda --steps 12 --warmup 2 > "$out/ncu_step.txt" 2>&1
fi
tar czf "$base/gpt.tgz" -C /tmp/gptlogs gpt
cp "$out"/*.svg "$base/" 2>/dev/null
python3 "$dir/gpt_summary.py" "$out" | tee "$base/summary.txt"
