# The allocator's CUDA tests with the new one for pages past page_chunk_threshold, then
# the two traces still below PyTorch's default in headroom, with pages from the start
# (page_chunk_threshold:0) beside the default, PyTorch's default and expandable segments.
set -uo pipefail
source bench/device_bin.sh
timeout 120 $bin/tests/cuda_allocator --test-threads=1 2>&1 | grep -E '^test |test result|skipped|panicked' | tee $OUT/cuda_allocator.txt
T=tests/data/traces
bash bench/torch_replay.sh > /dev/null
GPUSCOPE=$bin/gpuscope timeout 400 python3 bench/headroom.py --runner torch-default --runner torch-expandable \
  --runner cuda --runner 'cuda[GPUSCOPE_ALLOC_CONF=page_chunk_threshold:0]' --lo 0.85 --steps 6 \
  $T/snn_surrogate_bptt_train.csv.gz $T/nca_rollout_train.csv.gz 2>&1 | tee $OUT/headroom.txt | tail -6
