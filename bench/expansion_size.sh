#!/usr/bin/env bash
# What the macros generate for the ui pass cases (tests/ui/pass/*.rs): each file is
# expanded in process (#[gpu_scope], #[no_grad], #[derive(ScopeValue)], nested ones too)
# and compared with the same file without those attributes, both pretty-printed as
# `cargo expand` does (prettyplease). Prints a markdown table.
# Usage: bash bench/expansion_size.sh   (from the repository root; REV to measure another
# commit: bash bench/expansion_size.sh <rev>, through a temporary git worktree)
set -euo pipefail
root=$(pwd)
if [ $# -ge 1 ]; then
    dir=$(mktemp -d /tmp/expansion-size.XXXXXX)
    git worktree add -q --detach "$dir" "$1"
    trap 'git -C "$root" worktree remove --force "$dir"' EXIT
    cd "$dir"
fi
cargo test -q -p gpuscope-macros --lib expansion_sizes -- --nocapture 2>/dev/null | grep '^|'
