# Near the device's memory, on the H100: three traces scaled (bench/headroom.py's
# write_scaled) so that their live peak is 0.8-0.95 of the 79.18 GiB free, replayed through
# PyTorch's two modes (bench/torch_replay.cpp, three passes: ns/op, device allocations and
# frees, and cudaMalloc retries so far) and gpuscope on CUDA (two warm passes: each pass's
# driver calls), each run cut at 60 s. On the simulated device all three but the CNN move
# memory in every warm pass (BENCHMARKS.md, "Near the device's memory, warm passes move
# memory"). From the repository root there:
#   bash bench/results/h100-2026-11-27h/88-pressure/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
here=bench/results/h100-2026-11-27h/88-pressure
P=$OUT/p
mkdir -p "$P"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$P/gpu.txt"
for n in cnn_keep_grads_clip_train_at90 graphsage_sampled_prefetch_train_at80 bert_infer_at95; do
  gunzip -c "$here/scaled/$n.csv.gz" > "/tmp/$n.csv"
done
# Builds /tmp/torch_replay on the smallest trace (both of PyTorch's modes).
timeout 120 bash bench/torch_replay.sh /tmp/cnn_keep_grads_clip_train_at90.csv > "$P/torch_cnn.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$P/torch_cnn.txt"
for n in cnn_keep_grads_clip_train_at90 graphsage_sampled_prefetch_train_at80 bert_infer_at95; do
  for mode in default expandable; do
    conf=""; [[ $mode == expandable ]] && conf="expandable_segments:True"
    s=$SECONDS
    PYTORCH_CUDA_ALLOC_CONF=$conf TORCH_REPLAY_PASSES=3 timeout 60 /tmp/torch_replay "/tmp/$n.csv" > "$P/torch_${mode}_$n.txt" 2>&1
    echo "rc $? in $((SECONDS - s)) s" >> "$P/torch_${mode}_$n.txt"
  done
  s=$SECONDS
  timeout 60 "$bin/gpuscope" replay --backend cuda --format json --warm-passes 2 "/tmp/$n.csv" > "$P/gpuscope_$n.json" 2> "$P/gpuscope_$n.err"
  echo "rc $? in $((SECONDS - s)) s" >> "$P/gpuscope_$n.err"
done
echo "done after $((SECONDS - start)) s" >> "$P/gpu.txt"
tar czf "$OUT/pressure.tgz" -C "$OUT" p && rm -rf "$P"
