# The allocator's lock with a waiting room (lock_contention, built from the change)
# against the lock before it (lock_contention_spin: every waiter spins, yields and naps),
# each also against the same calls serialised by a std::sync::Mutex, in one call: host and
# CUDA backends, without and with a thread calling empty_cache every 5 ms, 1-32 threads,
# two rounds each.
set -uo pipefail
source bench/device_bin.sh
nproc > "$OUT/machine.txt"; nvidia-smi --query-gpu=name --format=csv >> "$OUT/machine.txt"
for b in host cuda; do
  for e in 0 5; do
    for v in spin room; do
      x=$bin/lock_contention; [[ $v == spin ]] && x=$bin/lock_contention_spin
      timeout 100 "$x" --backend $b --threads 1,2,4,8,16,32 --ops 100000 \
        --rounds 2 --empty-cache-ms $e > "$OUT/$v-$b-empty$e.md" 2>&1
      echo "$v $b empty $e rc $?"
    done
  done
done
