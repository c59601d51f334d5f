#!/usr/bin/env bash
# Compile cost of the macros' expansions at two revisions: the crate of
# bench/macro_compile_time.sh (200 `#[gpu_scope]` training-step functions, and the same
# functions without the attribute) built against gpuscope at OLD and at NEW, alternating,
# N rounds; dependencies are built first. Prints wall and CPU (user+sys) seconds of each
# build of the crate, then the medians. CPU time is the steadier figure on a shared machine.
# Usage: bash bench/macro_compile_compare.sh OLD [NEW=HEAD] [N=5]   (from the repository
# root; uses /tmp/mcc and two temporary git worktrees)
set -euo pipefail
old=$1
new=${2:-HEAD}
rounds=${3:-5}
root=$(pwd)
rm -rf /tmp/mcc && mkdir -p /tmp/mcc
cleanup() {
    for side in old new; do
        git -C "$root" worktree remove --force "/tmp/mcc/$side/tree" 2>/dev/null || true
    done
}
trap cleanup EXIT
for side in old new; do
    rev=$old; [ "$side" = new ] && rev=$new
    git -C "$root" worktree add -q --detach "/tmp/mcc/$side/tree" "$rev"
    bash "$root/bench/macro_compile_time.sh" crate "/tmp/mcc/$side/crate" "/tmp/mcc/$side/tree" mcc
done
# One build of the crate: "<wall> <cpu>" seconds.
build() {
    local side=$1 what=$2
    echo "include!(\"$what.rs\");" > "/tmp/mcc/$side/crate/src/lib.rs"
    (cd "/tmp/mcc/$side/crate" && CARGO_TARGET_DIR="/tmp/mcc/$side/target" \
        /usr/bin/time -f "%e %U %S" -o /tmp/mcc/time cargo build -q)
    awk '{printf "%.2f %.2f\n", $1, $2 + $3}' /tmp/mcc/time
}
for side in old new; do build "$side" plain >/dev/null; done   # dependencies
: > /tmp/mcc/results
for i in $(seq "$rounds"); do
    for side in old new; do
        for what in with_macro plain; do
            r=$(build "$side" "$what")
            echo "$side $what $r" | tee -a /tmp/mcc/results
        done
    done
done
python3 - "$rounds" <<'PY'
import statistics, sys
rows = [line.split() for line in open("/tmp/mcc/results")]
print(f"median over {sys.argv[1]} rounds (seconds):")
for side in ("old", "new"):
    for what in ("with_macro", "plain"):
        got = [r for r in rows if r[0] == side and r[1] == what]
        wall = statistics.median(float(r[2]) for r in got)
        cpu = statistics.median(float(r[3]) for r in got)
        print(f"  {side} {what:<10} wall {wall:.2f}  cpu {cpu:.2f}")
PY
