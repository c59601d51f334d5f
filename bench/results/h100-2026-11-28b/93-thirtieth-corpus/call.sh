# The thirtieth corpus (bench/record_traces/workloads_thirtieth.py, b2f8544, written
# without the GPU and held out), recorded and compared with the carried binaries (those of
# 92-all-tests-gpt: the allocator of ff8a727) in one H100 call:
#   bash bench/record_traces/corpus_call.sh thirtieth
# The tree: `python3 bench/device_tree.py slim bench/results/h100-2026-11-28b/93-thirtieth-corpus
# --only-traces bert_infer` (the call records its own traces).
bash bench/record_traces/corpus_call.sh thirtieth
