# Headroom on the H100 of the two traces the simulated device finds lower with pages past
# a quarter (muon_optimizer_train, grad_hook_buckets_train) and two shared-style
# training traces, with the default rule and with page_chunk_threshold:1 (no pages)
# beside PyTorch's default, in one call.
set -uo pipefail
source bench/device_bin.sh
T=tests/data/traces
bash bench/torch_replay.sh > /dev/null 2>&1
GPUSCOPE=$bin/gpuscope timeout 500 python3 bench/headroom.py --runner torch-default --runner cuda \
  --runner 'cuda[GPUSCOPE_ALLOC_CONF=page_chunk_threshold:1]' --lo 0.85 --steps 6 \
  $T/muon_optimizer_train.csv.gz $T/grad_hook_buckets_train.csv.gz $T/gpt2_train.csv $T/vit_b16_train_bf16.csv.gz \
  2>&1 | tee $OUT/headroom.txt | tail -8
