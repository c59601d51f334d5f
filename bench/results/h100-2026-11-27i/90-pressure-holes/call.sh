# Near the device's memory, on the H100: the allocator before this session's change
# (.device-bin/gpuscope-before, built at 43db799) and after it (.device-bin/gpuscope, built at 96db25d: holes
# that memory given back left are mapped again in place), on six traces scaled so that their live peak is
# 0.8-0.95 of the 79.18 GiB free (bench/headroom.py's write_scaled; three of them those of
# 88-pressure), each replayed cold and twice warm on CUDA (each pass's driver calls), and
# PyTorch's two modes on the three new ones (bench/torch_replay.cpp, three passes). Every run
# is cut at 45 s, and none starts past 520 s. From the repository root there:
#   bash bench/results/h100-2026-11-27i/90-pressure-holes/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
here=bench/results/h100-2026-11-27i/90-pressure-holes
P=$OUT/p
mkdir -p "$P"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$P/gpu.txt"
names=(cnn_keep_grads_clip_train_at90 graphsage_sampled_prefetch_train_at80 bert_infer_at95
       compiled_gpt_train_at90 int8_dequant_infer_at90 reformer_lsh_attention_train_at90)
for n in "${names[@]}"; do gunzip -c "$here/scaled/$n.csv.gz" > "/tmp/$n.csv"; done
run_gpuscope() {  # binary label trace
  [[ $((SECONDS - start)) -gt 520 ]] && return
  local s=$SECONDS
  timeout 45 "$bin/$1" replay --backend cuda --format json --warm-passes 2 "/tmp/$3.csv" \
    > "$P/$2_$3.json" 2> "$P/$2_$3.err"
  echo "rc $? in $((SECONDS - s)) s" >> "$P/$2_$3.err"
}
for n in "${names[@]}"; do
  run_gpuscope gpuscope-before before "$n"
  run_gpuscope gpuscope after "$n"
done
# Builds /tmp/torch_replay on the smallest trace (both of PyTorch's modes).
timeout 120 bash bench/torch_replay.sh /tmp/cnn_keep_grads_clip_train_at90.csv > "$P/torch_cnn.txt" 2>&1
for n in compiled_gpt_train_at90 int8_dequant_infer_at90 reformer_lsh_attention_train_at90; do
  for mode in default expandable; do
    [[ $((SECONDS - start)) -gt 520 ]] && continue
    conf=""; [[ $mode == expandable ]] && conf="expandable_segments:True"
    s=$SECONDS
    PYTORCH_CUDA_ALLOC_CONF=$conf TORCH_REPLAY_PASSES=3 timeout 45 /tmp/torch_replay "/tmp/$n.csv" > "$P/torch_${mode}_$n.txt" 2>&1
    echo "rc $? in $((SECONDS - s)) s" >> "$P/torch_${mode}_$n.txt"
  done
done
echo "done after $((SECONDS - start)) s" >> "$P/gpu.txt"
tar czf "$OUT/pressure.tgz" -C "$OUT" p && rm -rf "$P"
