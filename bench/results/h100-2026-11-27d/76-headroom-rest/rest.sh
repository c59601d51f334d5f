# The headroom of the twenty-third corpus that the two calls before had no time for
# (H100; the gpuscope command of the calls before, alone in .device-bin.txz): gpuscope on
# IMPALA, expandable segments and gpuscope on Instant-NGP, every runner on PPO.
set -uo pipefail
source bench/device_bin.sh
d=tests/data/traces
h() { local t=$1; shift; PYTHONUNBUFFERED=1 GPUSCOPE=$bin/gpuscope timeout "$t" python3 bench/headroom.py "$@" --lo 0.6 --steps 6; }
{ h 40 --runner cuda $d/impala_vtrace_varlen_train.csv.gz
  h 50 --runner torch-expandable --runner cuda $d/instant_ngp_hashgrid_train.csv.gz
  h 80 --runner cuda --runner torch-default --runner torch-expandable $d/ppo_rlhf_four_models_train.csv.gz
} > "$OUT/headroom.txt" 2>&1
echo "rc $?" >> "$OUT/headroom.txt"
