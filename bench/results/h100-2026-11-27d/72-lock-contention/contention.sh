# The allocator shared by 1-32 threads (gpuscope-runtime/examples/lock_contention.rs):
# its own lock (alloc/lock.rs) against the same calls serialised by a std::sync::Mutex,
# on the host backend and on CUDA, without and with a thread calling empty_cache every
# 5 ms (growth under the lock), three rounds each. One call on the GPU machine.
set -uo pipefail
source bench/device_bin.sh
nproc > "$OUT/machine.txt"; nvidia-smi --query-gpu=name --format=csv >> "$OUT/machine.txt"
for b in host cuda; do
  for e in 0 5; do
    timeout 120 "$bin/lock_contention" --backend $b --threads 1,2,4,8,16,32 --ops 200000 \
      --rounds 3 --empty-cache-ms $e > "$OUT/$b-empty$e.md" 2>&1
    echo "$b empty $e rc $?"
  done
done
