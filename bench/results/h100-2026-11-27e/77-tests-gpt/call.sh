# The first call of the seventeenth session (H100), with the binaries of .device-bin.txz
# built at 79f1b6a (for the size limit without ten host-only test binaries: ops_gradcheck,
# ops_transformer, alloc_properties, scope_stress, stress, views, training, view_cli,
# view_browser, gpuscope_cli-lib; nor the gpuscope command): every other test binary, the GPT example against
# bench/torch_gpt.py at the default size (same tokens) and the one-rank data-parallel path
# (bench/final_gpu_run.sh tests gpt ddp), then both GPTs at the large size
# (12 x 768, block 512, batch 16, 60 steps), twice each, alternating.
set -uo pipefail
start=$SECONDS
bash bench/final_gpu_run.sh "$OUT/final" tests gpt ddp
echo "final done after $((SECONDS - start)) s" > "$OUT/log.txt"
source bench/device_bin.sh
big="--layers 12 --embd 768 --block 512 --batch 16 --steps 60"
mkdir -p /tmp/big
for r in 1 2; do
  timeout 120 python3 bench/torch_gpt.py $big > /tmp/big/torch_$r.txt 2>&1
  timeout 120 $bin/gpt --device cuda $big > /tmp/big/gpt_$r.txt 2> /tmp/big/gpt_$r.err
  echo "big round $r after $((SECONDS - start)) s" >> "$OUT/log.txt"
done
for f in /tmp/big/*.txt; do echo "== $f"; tail -2 "$f"; done > "$OUT/big_summary.txt"
tar czf "$OUT/big.tgz" -C /tmp big
