# After dist/group's collectives moved to their own file (cdaf58e): the multi-process and
# NCCL tests on two GPUs, and the GPT example on two GPUs (collectives through the moved code).
set -uo pipefail
source bench/device_bin.sh
export NCCL_NVLS_ENABLE=0
timeout 300 $bin/tests/dist_processes --test-threads=1 2>&1 | grep -E "^test |test result|panicked|FAILED"
timeout 200 $bin/gpt --devices 2 --steps 60 2>&1 | tail -2
