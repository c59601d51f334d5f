# After page_chunk_threshold (commits 91dec26..): every test binary on one H100 (the
# CUDA tests run for real) and the GPT example against torch_gpt.py, then the first pass's
# cost of pages past a quarter of the device on the one trace that reserves more than a
# quarter at its own size: token_budget_batches_train compared with PyTorch, three rounds,
# with the default (pages past 0.25) and with page_chunk_threshold:1 (no pages).
set -uo pipefail
start=$SECONDS
bash bench/final_gpu_run.sh $OUT/final tests gpt
echo "final at $((SECONDS - start)) s"
source bench/device_bin.sh
T=tests/data/traces/token_budget_batches_train.csv.gz
REPEATS=3 timeout $((560 - (SECONDS - start))) bash bench/compare_torch.sh $bin/gpuscope $OUT/cmp_default $T > /dev/null 2> $OUT/cmp_stderr.txt
echo "default at $((SECONDS - start)) s"
GPUSCOPE_ALLOC_CONF=page_chunk_threshold:1 REPEATS=3 timeout $((570 - (SECONDS - start))) bash bench/compare_torch.sh $bin/gpuscope $OUT/cmp_no_pages $T > /dev/null 2>> $OUT/cmp_stderr.txt
echo "no pages at $((SECONDS - start)) s"
for d in cmp_default cmp_no_pages; do python3 bench/pack_repeats.py $OUT/$d > /dev/null 2>&1; done
tar czf $OUT/cmp.tgz -C $OUT cmp_default cmp_no_pages cmp_stderr.txt
