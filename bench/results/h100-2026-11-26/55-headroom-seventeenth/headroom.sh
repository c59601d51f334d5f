# Headroom on the H100 of the two seventeenth-corpus traces lowest on the simulated device
# (from the repository root on the GPU machine, after bench/build_device_bins.sh here).
set -uo pipefail
lscpu | grep -E "Model name|^CPU\(s\)|MHz|L2 cache" > $OUT/cpu.txt 2>&1
bash bench/headroom_gpu.sh $OUT/head --lo 0.6 --steps 7 tests/data/traces/raft_flow_train.csv.gz \
  tests/data/traces/ctc_speech_train.csv.gz > $OUT/log.txt 2>&1
