# After the duplicates clean-up of dist/, ops/matmul and the host kernels (commits
# 23a5ad1..3dbf746): every test binary on a machine with two GPUs (the multi-GPU ones run
# for real), the GPT example against torch_gpt.py on one GPU, then issue 15's two-GPU
# measurements (dist_processes again, all-reduce, GPT on two GPUs against torchrun).
set -uo pipefail
start=$SECONDS
bash bench/final_gpu_run.sh $OUT/final tests gpt
echo "final at $((SECONDS - start)) s"
timeout $((570 - (SECONDS - start))) bash bench/dist/two_gpu_run.sh $OUT/two
echo "two-GPU at $((SECONDS - start)) s"
