#!/usr/bin/env bash
# Builds (here, where the Rust toolchain is) everything the GPU machine runs, strips it
# and copies it into .device-bin/ (git-ignored; carried to the GPU machine):
# the gpuscope command, the examples, and every test binary (CUDA tests skip here and
# run there); also packed as .device-bin.txz, which is what to carry.
# The lint's and the macros' test binaries and examples never touch a GPU (CI runs them)
# and are left out (HOST_ONLY), so that the pack and the working tree fit the 64 MiB the
# GPU machine takes; DEVICE_BIN_ALL=1 keeps them.
set -euo pipefail
HOST_ONLY=" gpuscope_lint-lib gpuscope_macros-proc-macro properties trigger_words rule_docs lint_cli lint_corpus ui architecture fuzz_regressions time_lint gen_crate "
host_only() { [[ -z ${DEVICE_BIN_ALL:-} && $HOST_ONLY == *" $1 "* ]]; }
cd "$(dirname "$0")/.."
rm -rf .device-bin && mkdir -p .device-bin/tests
target=${CARGO_TARGET_DIR:-target}
cargo build --release -p gpuscope-cli --bin gpuscope
cargo build --release --examples
cargo build --release -p gpuscope-runtime --examples
cp "$target/release/gpuscope" .device-bin/
for e in "$target"/release/examples/*; do
  [[ -x $e && ! $e =~ -[0-9a-f]{16}$ && -f $e ]] && ! host_only "$(basename "$e")" && cp "$e" .device-bin/
done
cargo test --release --workspace --no-run --message-format=json \
  | python3 -c 'import sys,json
for l in sys.stdin:
    d=json.loads(l)
    if d.get("reason")=="compiler-artifact" and d.get("executable") and d["profile"]["test"]:
        kind=d["target"]["kind"][0]
        # A crate'"'"'s library and binary test targets share its name: tell them apart.
        name=d["target"]["name"] if kind=="test" else d["target"]["name"]+"-"+kind
        print(name, d["executable"])' \
  | while read -r name exe; do host_only "$name" || cp "$exe" ".device-bin/tests/$name"; done
strip .device-bin/* .device-bin/tests/* 2>/dev/null || true
cp bench/torch_gpt.py bench/gpt_summary.py .device-bin/   # for bench/gpt_run.sh .device-bin OUT
pwd > .device-bin/build_root
du -sh .device-bin
# Packed too: the GPU machine takes at most 64 MiB of carried files and working tree.
# xz with a large window finds the code the binaries share (they link the same crates):
# about a tenth of the binaries' size, against 40% for gzip (bench/device_bin.sh unpacks it
# there).
rm -f .device-bin.tgz
tar cf - .device-bin | xz -T0 -9 > .device-bin.txz
du -sh .device-bin.txz
