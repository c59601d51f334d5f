# The session's last call (H100), gpuscope command of .device-bin.txz built at 79f1b6a:
# the headroom of the twenty-fourth corpus's traces that the first call had no time for,
# gpuscope on CUDA first (six traces), then PyTorch's two modes (five: GraphSAGE's were
# measured in the first call), in the time left.
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
bash bench/torch_replay.sh > /dev/null 2>&1
d=tests/data/traces
T=()
for n in mamba2_ssd_chunked_train unet3d_sliding_window_train h2o_kv_evict_decode \
  sparse_csr_prune_sweep_infer tacotron2_location_attn_train graphsage_sampled_prefetch_train; do T+=("$d/$n.csv.gz"); done
nvidia-smi > "$OUT/nvidia-smi.txt"
GPUSCOPE=$bin/gpuscope timeout 100 python3 bench/headroom.py --runner cuda --lo 0.6 --steps 6 "${T[@]}" > "$OUT/headroom_cuda.txt" 2>&1
echo "cuda rc $? after $((SECONDS - start)) s" >> "$OUT/headroom_cuda.txt"
GPUSCOPE=$bin/gpuscope timeout $((265 - (SECONDS - start))) python3 bench/headroom.py --runner torch-default --runner torch-expandable \
  --lo 0.6 --steps 6 "${T[@]:0:5}" > "$OUT/headroom_torch.txt" 2>&1
echo "torch rc $? after $((SECONDS - start)) s" >> "$OUT/headroom_torch.txt"
