#!/usr/bin/env bash
# Compile time of 200 `#[gpu_scope]` functions against the same 200 functions without
# the attribute, and the cost of the lint rules on the same code (in process).
# Usage: bash bench/macro_compile_time.sh   (from the repository root; uses /tmp/ct)
#        bash bench/macro_compile_time.sh crate DIR GPUSCOPE NAME   writes only the
#        benchmark crate (bench/macro_compile_compare.sh builds it at two revisions)
set -euo pipefail

# The benchmark crate in DIR: package NAME depending on gpuscope at GPUSCOPE (no default
# features), with src/with_macro.rs (200 training-step functions under `#[gpu_scope]`)
# and src/plain.rs (the same functions without the attribute).
write_crate() {
    local dir=$1 gpuscope=$2 name=$3
    mkdir -p "$dir/src"
    cat > "$dir/Cargo.toml" <<TOML
[package]
name = "$name"
version = "0.1.0"
edition = "2024"
[dependencies]
gpuscope = { path = "$gpuscope", default-features = false }
[workspace]
TOML
    python3 - "$dir/src" <<'PY'
import sys
def gen(attr):
    out = ["use gpuscope::{Device, Tensor, TensorError};", "use gpuscope::optim::{Optimizer, Sgd};", ""]
    if attr:
        out.append("use gpuscope::gpu_scope;")
    for i in range(200):
        if attr:
            out.append("#[gpu_scope]")
        out.append(f"""pub fn step_{i}(xs: &[Tensor], w: &Tensor, opt: &mut Sgd, dev: &Device) -> Result<f64, TensorError> {{
    let mut total = 0.0;
    for x in xs {{
        opt.zero_grad();
        let h = x.matmul(w)?.relu()?;
        let loss = h.mean()?;
        loss.backward()?;
        opt.step()?;
        total += loss.item()?;
    }}
    let extra = Tensor::zeros(&[{i % 7 + 1}], dev)?;
    Ok(total + extra.sum()?.item()?)
}}
""")
    return "\n".join(out)
open(f"{sys.argv[1]}/with_macro.rs", "w").write(gen(True))
open(f"{sys.argv[1]}/plain.rs", "w").write(gen(False))
PY
}

if [ "${1:-}" = crate ]; then
    write_crate "$2" "$3" "$4"
    exit 0
fi
root=$(pwd)
rm -rf /tmp/ct && mkdir -p /tmp/ct/lintonly
write_crate /tmp/ct "$root" ct
cp /tmp/ct/src/with_macro.rs /tmp/ct/lintonly/with_macro.rs
cd /tmp/ct
build() { echo "include!(\"$1.rs\");" > src/lib.rs; local s e; s=$(date +%s.%N); CARGO_TARGET_DIR=/tmp/ct/target cargo build -q; e=$(date +%s.%N); echo "$1: $(echo "$e - $s" | bc) s"; }
build plain >/dev/null   # dependencies
for i in 1 2 3; do build with_macro; build plain; done
cd "$root" && cargo build -q --release -p gpuscope-lint --example time_lint && target/release/examples/time_lint /tmp/ct/lintonly 10
