# The last call of the session (H100), with the binaries of .device-bin.txz built at the
# lock with its waiting room and the twenty-third corpus stored: every test binary that
# runs on the GPU (bench/final_gpu_run.sh's tests phase), the twenty-third corpus compared
# again in nine rounds, then the headroom of the new traces the first call had no time
# for (vits first), PyTorch's two modes and gpuscope on CUDA.
set -uo pipefail
start=$SECONDS
bash bench/final_gpu_run.sh "$OUT/final" tests
echo "tests done after $((SECONDS - start)) s" > "$OUT/log.txt"
source bench/device_bin.sh
d=tests/data/traces
T=()
for n in ppo_rlhf_four_models_train detr_set_match_train vits_monotonic_align_train \
  instant_ngp_hashgrid_train wav2vec2_quantizer_pretrain swin_shifted_window_varres_train \
  dpm_solver_history_sample impala_vtrace_varlen_train; do T+=("$d/$n.csv.gz"); done
REPEATS=9 timeout $((330 - (SECONDS - start))) bash bench/compare_torch.sh "$bin/gpuscope" "$OUT/cmp" "${T[@]}" > "$OUT/cmp.log" 2>&1
echo "compare rc $? after $((SECONDS - start)) s" >> "$OUT/log.txt"
mkdir -p "$OUT/headroom"
GPUSCOPE=$bin/gpuscope timeout $((530 - (SECONDS - start))) python3 bench/headroom.py --runner torch-default \
  --runner torch-expandable --runner cuda --lo 0.6 --steps 6 $d/vits_monotonic_align_train.csv.gz \
  $d/wav2vec2_quantizer_pretrain.csv.gz $d/swin_shifted_window_varres_train.csv.gz \
  $d/instant_ngp_hashgrid_train.csv.gz $d/ppo_rlhf_four_models_train.csv.gz > "$OUT/headroom/headroom.txt" 2>&1
echo "headroom rc $? after $((SECONDS - start)) s" >> "$OUT/log.txt"
tar czf "$OUT/again.tgz" -C "$OUT" cmp cmp.log headroom log.txt && rm -rf "$OUT/cmp" "$OUT/headroom"
