# One GPU call after growth::chunk_limit's pages past a quarter of the device: the
# headroom of the twentieth corpus and of the five traces lowest before (gpuscope on CUDA
# and PyTorch's two modes, bench/headroom_gpu.sh), then the one trace whose device
# allocations changed at its own size, compared with PyTorch (five rounds).
start=$SECONDS
source bench/device_bin.sh
T=tests/data/traces
bash bench/headroom_gpu.sh $OUT/headroom --lo 0.6 --steps 7 \
  $T/{sophia_hessian_gpt_train,gradcache_contrastive_train,snn_surrogate_bptt_train,glow_flow_train,sliding_window_rolling_decode,ohem_segmentation_train,perceiver_varlen_train,rectified_flow_sample_train,nca_rollout_train,evoformer_pair_train,transformer_xl_memory_train,compiled_gpt_train,shampoo_precond_train}.csv.gz > /dev/null 2>&1
echo "headroom rc $? after $((SECONDS - start)) s" >> $OUT/headroom/headroom.txt
REPEATS=5 timeout $((580 - (SECONDS - start))) bash bench/compare_torch.sh $bin/gpuscope $OUT/cmp $T/token_budget_batches_train.csv.gz > /dev/null 2> $OUT/cmp_stderr.txt
echo "compare rc $? after $((SECONDS - start)) s" >> $OUT/cmp_stderr.txt
python3 bench/pack_repeats.py $OUT/cmp > /dev/null 2>&1
tar czf $OUT/all.tgz -C $OUT headroom cmp cmp_stderr.txt
