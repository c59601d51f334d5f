#!/usr/bin/env bash
# `gpuscope view` on a large history: records a real allocation history of EVENTS
# events (default 250,000) from eight lines of code on a host device (the
# gpuscope-runtime example `history_json`), writes it as a gpuscope snapshot (JSON),
# then times `gpuscope view` on it three times (release builds).
#
# Usage: bench/view_250k.sh [EVENTS] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-250000}
out=${2:-${CARGO_TARGET_DIR:-target}/view-bench}
bin=${CARGO_TARGET_DIR:-target}/release/gpuscope
mkdir -p "$out"
cargo build -q --release -p gpuscope-cli --bin gpuscope
cargo run -q --release -p gpuscope-runtime --features serde --example history_json -- "$out/history.json" "$events"
echo "input: $(du -h "$out/history.json" | cut -f1) $out/history.json"
for _ in 1 2 3; do
  /usr/bin/time -f "  wall %e s, max RSS %M KiB" "$bin" view "$out/history.json" -o "$out/history.html"
done
echo "page: $(du -h "$out/history.html" | cut -f1) $out/history.html"
