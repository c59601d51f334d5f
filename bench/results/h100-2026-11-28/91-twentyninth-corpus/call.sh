# The twenty-ninth corpus in one GPU call (H100), with the gpuscope command of
# .device-bin.txz built at c0621c5 (the runtime of this session's start, 432c2ff, and the
# fix for a hole joined for another stream, which replays of one stream never reach; no
# allocator change was made with these workloads in view): recorded and compared
# (corpus_run.sh, five rounds, cut at 420 s), then the new traces' headroom in the time
# left. From the repository root there:
#   bash bench/results/h100-2026-11-28/91-twentyninth-corpus/call.sh
exec bash bench/record_traces/corpus_call.sh twentyninth
