#!/usr/bin/env bash
# Builds (here, where the Rust toolchain is) what the GPT benchmark runs on the GPU
# machine: the gpt example and the test binaries of the transformer operations, stripped,
# with the scripts they need, into DEST (default .dev-gpt). Carry DEST to the GPU machine
# and run `bash DEST/gpt_run.sh DEST $OUT` there.
#
# Usage: bench/gpt_build.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.dev-gpt}
target=${CARGO_TARGET_DIR:-target}
rm -rf "$dest" && mkdir -p "$dest/tests"
cargo build --release --example gpt
cp "$target/release/examples/gpt" "$dest/"
{
  cargo test --release --no-run -p gpuscope-runtime --message-format=json \
    --test ops_cuda_transformer --test ops_cuda_vs_host --test cuda_tensor --test training \
    --test ops_transformer --test ops_gradcheck --test views --test autograd_versions
  cargo test --release --no-run -p gpuscope --message-format=json --test gpt_model
} 2>/dev/null | python3 -c 'import sys,json
for l in sys.stdin:
    d=json.loads(l)
    if d.get("reason")=="compiler-artifact" and d.get("executable") and d["profile"]["test"]:
        print(d["target"]["name"], d["executable"])' \
  | while read -r name exe; do cp "$exe" "$dest/tests/$name"; done
strip "$dest/gpt" "$dest"/tests/* 2>/dev/null || true
cp bench/torch_gpt.py bench/gpt_run.sh bench/gpt_summary.py "$dest/"
du -sh "$dest"
