#!/usr/bin/env bash
# What a program that depends on gpuscope pays to build it: makes a small user crate
# (one #[gpu_scope] training step) that depends on the gpuscope package of REV (a git
# revision of this repository, default HEAD), then prints the number of distinct crates
# it compiles and the time of a clean debug build (wall clock, and CPU time, which a
# loaded machine disturbs less) (dependencies fetched beforehand, so
# the network is not timed).
#
# Usage: bench/user_crate_build.sh [REV]
set -euo pipefail
rev=${1:-HEAD}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$repo" worktree add -q --detach "$work/gpuscope" "$rev"
trap 'git -C "$repo" worktree remove --force "$work/gpuscope"; rm -rf "$work"' EXIT
mkdir -p "$work/user/src"
cat > "$work/user/Cargo.toml" <<TOML
[package]
name = "user"
version = "0.1.0"
edition = "2024"

[dependencies]
gpuscope = { path = "$work/gpuscope" }
TOML
cat > "$work/user/src/main.rs" <<'RS'
use gpuscope::{Device, Tensor, TensorError, gpu_scope};

#[gpu_scope]
fn step(x: &Tensor, dev: &Device) -> Result<Tensor, TensorError> {
    let tmp = Tensor::ones(x.shape(), dev)?;
    x.add(&tmp)
}

fn main() {
    let dev = Device::host().unwrap();
    let x = Tensor::randn(&[4, 4], &dev).unwrap();
    println!("{:?}", step(&x, &dev).unwrap().shape());
}
RS
cd "$work/user"
cargo fetch -q
crates=$(cargo tree -e normal,build --prefix none | sed 's/ (\*)//; s/ (proc-macro)//' | sort -u | grep -vc '^user ')
read -r wall user sys < <({ /usr/bin/time -f "%e %U %S" cargo build -q; } 2>&1 | tail -1)
printf 'rev %s: %s crates besides the user crate, clean debug build %.1f s wall, %.1f s CPU (user %.1f + sys %.1f)\n' \
  "$(git -C "$repo" rev-parse --short "$rev")" "$crates" "$wall" "$(echo "$user + $sys" | bc)" "$user" "$sys"
