# The session's third call (H100), gpuscope command of .device-bin.txz built at 79f1b6a
# (no runtime or command source changed since): the twenty-fifth corpus's eight traces
# compared again, nine alternating rounds rather than five (the first call's medians set
# gpuscope's slow rounds against PyTorch's fast ones on four traces), then gpuscope's
# headroom on CUDA on the five traces the first call had no time for, then PyTorch's two
# modes on them in the time left. Results go straight to $OUT, so a cut call keeps them.
#   bash bench/results/h100-2026-11-27f/82-twentyfifth-again/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
d=tests/data/traces
T=()
for n in bigbird_block_sparse_train meanflow_jvp_dit_train minkunet_sparse_voxel_train \
  mtp_sequential_heads_train ofa_sandwich_supernet_train painn_force_field_train \
  prefix_cache_multiturn_serve var_next_scale_train; do T+=("$d/$n.csv.gz"); done
REPEATS=9 timeout 330 bash bench/compare_torch.sh "$bin/gpuscope" /tmp/cmp9 "${T[@]}" > /dev/null 2>&1
echo "compare rc $? after $((SECONDS - start)) s" > "$OUT/log.txt"
python3 bench/pack_repeats.py /tmp/cmp9 >> "$OUT/log.txt" 2>&1
tar czf "$OUT/cmp9.tgz" -C /tmp cmp9
R=()
for n in mtp_sequential_heads_train ofa_sandwich_supernet_train painn_force_field_train \
  var_next_scale_train prefix_cache_multiturn_serve; do R+=("$d/$n.csv.gz"); done
nvidia-smi > "$OUT/nvidia-smi.txt"
GPUSCOPE=$bin/gpuscope timeout $((430 - (SECONDS - start))) python3 bench/headroom.py --runner cuda \
  --lo 0.6 --steps 6 "${R[@]}" > "$OUT/headroom_cuda.txt" 2>&1
echo "cuda rc $? after $((SECONDS - start)) s" >> "$OUT/headroom_cuda.txt"
GPUSCOPE=$bin/gpuscope timeout $((520 - (SECONDS - start))) python3 bench/headroom.py --runner torch-default \
  --runner torch-expandable --lo 0.6 --steps 6 "${R[@]}" > "$OUT/headroom_torch.txt" 2>&1
echo "torch rc $? after $((SECONDS - start)) s" >> "$OUT/headroom_torch.txt"
