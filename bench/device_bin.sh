# Sourced, from the repository root on the GPU machine, by the scripts that run there
# after bench/build_device_bins.sh here: unpacks the carried .device-bin.tgz unless
# .device-bin is there already, makes the checkout's path on the build machine lead here
# (test binaries find their data through paths fixed at compile time), and sets `root`
# and `bin`.
[[ -d .device-bin || ! -f .device-bin.tgz ]] || tar xzf .device-bin.tgz
root=$(pwd)
build_root=$(cat .device-bin/build_root)
if [[ $build_root != "$root" ]]; then mkdir -p "$(dirname "$build_root")"; ln -sfn "$root" "$build_root"; fi
bin=.device-bin
