# The twenty-eighth corpus in one GPU call (H100), with the gpuscope command of
# .device-bin.txz built at 43db799 (the runtime as at 3084731: before any change this
# session): recorded and compared before any change (corpus_run.sh, five rounds, cut at
# 420 s), then the new traces' headroom in the time left. From the repository root there:
#   bash bench/results/h100-2026-11-27i/89-twentyeighth-corpus/call.sh
exec bash bench/record_traces/corpus_call.sh twentyeighth
