#!/usr/bin/env bash
# Seeds each fuzz target's corpus (fuzz/corpus/<target>/, not committed) from the real
# inputs in the repository: traces, allocator settings, gpuscope.toml files, Rust
# sources, PyTorch snapshot pickles, gpuscope snapshots, attribute arguments.
set -euo pipefail
cd "$(dirname "$0")"
root=..
c=corpus
mkdir -p $c/{trace_parse,alloc_conf,lint_config,lint_source,pytorch_snapshot,gpuscope_json,macro_args,alloc_drive,replay_input}
# Traces (each cut to its first 300 lines, so the fuzzer mutates small inputs) and the bad ones.
for f in $root/tests/data/traces/*.csv*; do (gzip -dcf "$f" || true) | head -300 > $c/trace_parse/$(basename "$f" .gz); done
find $root -path ./target -prune -o -name '*.csv' -path '*bad*' -print 2>/dev/null | while read -r f; do cp "$f" $c/trace_parse/bad-$(basename "$f"); done
# Allocator settings: every key with a typical value, and a few mistakes.
i=0
for s in "expandable_segments:True" "expandable_segments:False,max_split_size_mb:128" \
  "garbage_collection_threshold:0.8" "roundup_power2_divisions:4" "roundup_power2_divisions:[256:1,512:2,>:8]" \
  "max_non_split_rounding_mb:64" "fence_interval_us:0" "per_process_memory_fraction:0.5" \
  "memory_limit_mb:1024" "max_split_size:100" "expandable_segments:maybe" ""; do
  printf '%s' "$s" > $c/alloc_conf/seed$i; i=$((i+1))
done
# gpuscope.toml files.
find $root/gpuscope-cli/tests/fixtures -name '*.toml' | while read -r f; do cp "$f" $c/lint_config/$(echo "${f#../}" | tr / _); done
# Rust sources: the lint fixtures and corpus sample, the examples, a few runtime files.
find $root/gpuscope-cli/tests/fixtures $root/tests/data/lint-corpus $root/examples -name '*.rs' | head -120 | while read -r f; do
  cp "$f" $c/lint_source/$(echo "${f#../}" | tr / _); done
# Snapshots.
cp $root/tests/data/pytorch-snapshots/*.pickle $c/pytorch_snapshot/ 2>/dev/null || true
find $root/tests/data/pytorch-snapshots/bad -type f 2>/dev/null | while read -r f; do cp "$f" $c/pytorch_snapshot/bad-$(basename "$f"); done
find $root/tests/data/pytorch-snapshots/other-encodings -type f 2>/dev/null | while read -r f; do cp "$f" $c/pytorch_snapshot/enc-$(basename "$f"); done
# A gpuscope snapshot with its history, written by the runtime's example.
(cd $root && cargo run -q -p gpuscope-runtime --features serde --example history_json -- "$PWD/fuzz/$c/gpuscope_json/history.json" 2000 > /dev/null)
# Attribute arguments, as written in the ui tests.
grep -rhoE '#\[(gpu_scope|no_grad)\((.*)\)\]' $root/tests/ui | sed -E 's/^#\[(gpu_scope|no_grad)\((.*)\)\]$/\2/' | sort -u | \
  awk -v d=$c/macro_args '{ f = d "/seed" NR; printf "%s", $0 > f; close(f) }'
# What replay reads: a few traces (cut) and snapshots, plain and gzip-compressed.
for f in $root/tests/data/traces/{bert_infer,prefetch_train,pipeline_two_stream_train}.csv; do
  head -200 "$f" > $c/replay_input/$(basename "$f"); gzip -c $c/replay_input/$(basename "$f") > $c/replay_input/$(basename "$f").gz; done
for f in $root/tests/data/pytorch-snapshots/{small_train,synthetic_training}.pickle $root/tests/data/pytorch-snapshots/other-encodings/small_train.json; do
  cp "$f" $c/replay_input/; gzip -c "$f" > $c/replay_input/$(basename "$f").gz; done
# Allocator drives: a few byte strings.
printf '\x01\x00\x07\xc8\x01\x01\x07\x03' > $c/alloc_drive/seed0
printf '\x03\x00\x10\x10\x00\x20\x20\x01\x05\x00\x01\x03\x00\x07' > $c/alloc_drive/seed1
for d in $c/*; do echo "$(basename "$d"): $(ls "$d" | wc -l) seeds"; done
