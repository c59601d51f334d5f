# Headroom on the H100 of the two nineteenth-corpus traces lowest on the simulated device
# (from the repository root on the GPU machine, after bench/build_device_bins.sh here).
set -uo pipefail
bash bench/headroom_gpu.sh $OUT/head --lo 0.6 --steps 7 tests/data/traces/nca_rollout_train.csv.gz \
  tests/data/traces/dpsgd_per_sample_train.csv.gz > $OUT/log.txt 2>&1
tail -12 $OUT/log.txt
