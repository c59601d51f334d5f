# The twenty-third corpus in one GPU call (H100), with the binaries of .device-bin.txz
# (built from the lock with a waiting room; no placement or growth rule has changed since
# the twenty-second corpus): recorded and compared before any change (corpus_run.sh, five
# rounds); then the allocator shared by 1-32 threads under four locks (lock_contention:
# spin = every waiter spins, yields and naps; room1 = a waiting room left once the flag is
# taken; room2 = left when the lock is given back; lock_contention = room2 with the one
# waiter spinning 1,024 rounds and yielding 1,024 before it naps), each against a
# std::sync::Mutex, on the host backend; then, in the time left, the headroom of each new
# trace. From the repository root there:
#   bash bench/results/h100-2026-11-27d/74-twentythird-corpus/twentythird.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
O=$OUT/twentythird
mkdir -p "$O" "$OUT/headroom" "$OUT/lock"
timeout 400 bash bench/record_traces/corpus_run.sh workloads_twentythird.py "$bin/gpuscope" "$O" 5 > "$O/log.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$O/log.txt"
nproc > "$OUT/lock/machine.txt"
for v in spin room1 room2 room3; do
  x=$bin/lock_contention_$v; [[ $v == room3 ]] && x=$bin/lock_contention
  timeout 40 "$x" --backend host --threads 1,2,4,8,16,32 --ops 100000 --rounds 2 > "$OUT/lock/$v-host.md" 2>&1
  echo "$v rc $? after $((SECONDS - start)) s" >> "$OUT/lock/log.txt"
done
left=$((580 - (SECONDS - start)))
nvidia-smi > "$OUT/headroom/nvidia-smi.txt"
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner torch-default \
  --runner torch-expandable --runner cuda --lo 0.6 --steps 6 "$O"/traces/*.csv > "$OUT/headroom/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/headroom/headroom.txt"
gzip -9n "$O"/traces/*.csv
tar czf "$OUT/t23.tgz" -C "$OUT" twentythird headroom lock && rm -rf "$O" "$OUT/headroom" "$OUT/lock"
