#!/usr/bin/env bash
# The GPU-machine call that made the third corpus (workloads_third.py) and replayed it,
# before any change, through gpuscope and PyTorch (BENCHMARKS.md, "A third corpus, held
# out"). From the repository root, with a release build of the gpuscope command:
#   bash bench/record_traces/third_corpus_run.sh GPUSCOPE_BINARY OUT_DIR [REPEATS]
# (corpus_run.sh with workloads_third.py; ALL_TIMEOUT as there.)
exec bash "$(dirname "$0")/corpus_run.sh" workloads_third.py "$@"
