# The session's second call (H100), binaries of .device-bin.txz built at 79f1b6a (no
# runtime, command or example source changed since): the GPT example against
# bench/torch_gpt.py at a size neither was measured at before, GPT-2 medium's depth and
# width (24 x 1024, 16 heads) with a block of 1,024 tokens, batch 4 and a vocabulary of
# 4,096, fp32, then the same with fused attention (--sdpa); twice each, alternating
# PyTorch and gpuscope. Then, in the time left, gpuscope's headroom on GraphSAGE (the
# twenty-fourth corpus's one trace that had none).
#   bash bench/results/h100-2026-11-27f/81-gpt-medium/call.sh
set -uo pipefail
start=$SECONDS
source bench/device_bin.sh
mkdir -p /tmp/med "$OUT"
nvidia-smi > /tmp/med/nvidia-smi.txt
med="--layers 24 --embd 1024 --heads 16 --block 1024 --vocab 4096 --batch 4 --steps 40"
for variant in plain sdpa; do
  extra=$([[ $variant == sdpa ]] && echo "--sdpa" || echo "")
  for r in 1 2; do
    timeout 150 python3 bench/torch_gpt.py $med $extra > /tmp/med/torch_${variant}_$r.txt 2>&1
    timeout 150 $bin/gpt --device cuda $med $extra > /tmp/med/gpt_${variant}_$r.txt 2> /tmp/med/gpt_${variant}_$r.err
    echo "$variant round $r after $((SECONDS - start)) s" >> /tmp/med/log.txt
  done
done
for f in /tmp/med/*_[12].txt; do echo "== $f"; tail -1 "$f"; done > /tmp/med/summary.txt
left=$((540 - (SECONDS - start)))
GPUSCOPE=$bin/gpuscope timeout "$left" python3 bench/headroom.py --runner cuda --lo 0.6 --steps 6 \
  tests/data/traces/graphsage_sampled_prefetch_train.csv.gz > /tmp/med/headroom_graphsage.txt 2>&1
echo "headroom rc $? after $((SECONDS - start)) s" >> /tmp/med/headroom_graphsage.txt
cp /tmp/med/summary.txt /tmp/med/log.txt "$OUT/"
tar czf "$OUT/med.tgz" -C /tmp med
