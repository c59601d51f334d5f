# An H200 machine: its host CPU, a quarter of the traces (every fourth, by name) against
# PyTorch in nine alternating rounds, then the test binaries and the GPT example.
set -uo pipefail
source bench/device_bin.sh
mkdir -p $OUT/h200
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|MHz|L[23] cache|NUMA node\(s\)|Hypervisor|Vendor ID|CPU family|Model:'; } > $OUT/h200/machine.txt 2>&1
traces=$(ls tests/data/traces/*.csv* | awk 'NR % 4 == 1')
start=$SECONDS
REPEATS=9 bash bench/compare_torch.sh $bin/gpuscope /tmp/cmp $traces > /dev/null 2> $OUT/h200/stderr.txt
echo "compared $(echo $traces | wc -w) traces in $((SECONDS - start)) s" >> $OUT/h200/machine.txt
python3 bench/pack_repeats.py /tmp/cmp >> $OUT/h200/machine.txt
tar czf $OUT/h200/cmp.tgz -C /tmp cmp
bash bench/final_gpu_run.sh $OUT/final tests gpt
