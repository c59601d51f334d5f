# The twenty-sixth corpus's second GPU call (H100; the gpuscope command of .device-bin.txz
# built at 79f1b6a, as the first): the ten-pass replay on CUDA that the first call's
# comparison did not reach, and the headroom of the six traces its headroom did not reach
# (PyTorch's two modes and gpuscope on CUDA). From the repository root there:
#   bash bench/results/h100-2026-11-27g/84-twentysixth-passes/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
mkdir -p "$OUT/p"
t=tests/data/traces
new=(causal_video_vae_chunked_infer deltanet_chunked_state_train galore_layerwise_train
  graphormer_spd_bias_train hyena_fft_longconv_train moe_expert_offload_lru_decode
  qlora_nf4_accum_train sae_activation_buffer_train)
nvidia-smi > "$OUT/p/nvidia-smi.txt"
files=(); for n in "${new[@]}"; do files+=("$t/$n.csv.gz"); done
timeout 200 "$bin/gpuscope" replay --backend cuda --format json --warm-passes 10 "${files[@]}" \
  > "$OUT/p/gpuscope_passes10.jsonl" 2> "$OUT/p/passes10.err"
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/p/passes10.err"
# Builds /tmp/torch_replay (the replayer headroom.py runs) on a small trace.
bash bench/torch_replay.sh "$t/causal_video_vae_chunked_infer.csv.gz" > "$OUT/p/torch_build.txt" 2>&1
rest=(); for n in galore_layerwise_train graphormer_spd_bias_train hyena_fft_longconv_train \
  moe_expert_offload_lru_decode qlora_nf4_accum_train sae_activation_buffer_train; do
  rest+=("$t/$n.csv.gz"); done
left=$((565 - (SECONDS - start)))
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner torch-default \
  --runner torch-expandable --runner cuda --lo 0.6 --steps 6 "${rest[@]}" > "$OUT/p/headroom.txt" 2>&1
echo "rc $? after $((SECONDS - start)) s" >> "$OUT/p/headroom.txt"
