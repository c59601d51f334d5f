# Recorded and compared with (one GPU call), then, in the time left, the headroom of the
# new traces (gpuscope on CUDA and PyTorch's two modes, bench/headroom_gpu.sh):
start=$SECONDS
bash bench/record_traces/corpus_call.sh twentieth
left=$((570 - (SECONDS - start)))
timeout $left bash bench/headroom_gpu.sh $OUT/headroom --lo 0.6 --steps 7 $OUT/twentieth/traces/*.csv > /dev/null 2>&1
echo "headroom rc $? after $((SECONDS - start)) s" >> $OUT/headroom/headroom.txt
tar czf $OUT/headroom.tgz -C $OUT headroom
