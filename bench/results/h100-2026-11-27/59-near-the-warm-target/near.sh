# The eleven traces whose warm ratio (gpuscope over PyTorch default, warm ns/op) came
# within 0.01 of 0.2 or above it, by medians or fastest rounds, in the 127-trace call
# or at first contact, measured again with fifteen alternating rounds instead of nine.
set -uo pipefail
source bench/device_bin.sh
t=tests/data/traces
REPEATS=15 bash bench/compare_torch.sh $bin/gpuscope $OUT/cmp \
  $t/grpo_generate_train.csv.gz $t/three_stage_stream_infer.csv $t/fastspeech_length_regulator_train.csv.gz \
  $t/neural_ode_adaptive_train.csv $t/offload_layers_infer.csv $t/ensemble_vmap_train.csv \
  $t/contrastive_decoding_generate.csv.gz $t/sinkhorn_match_train.csv.gz $t/vae_tiled_decode_infer.csv.gz \
  $t/early_exit_infer.csv.gz $t/tome_vit_train.csv.gz > /dev/null 2>&1
echo "rc $?"
sed -n '/warm \/ PyTorch default/,/met on/p' $OUT/cmp/table.md
# (next time: tar the cmp folder, a call returns a limited number of files)
