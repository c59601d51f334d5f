# Sourced, from the repository root on the GPU machine, by the scripts that run there
# after bench/build_device_bins.sh here: unpacks the carried .device-bin.txz unless
# .device-bin is there already, makes the checkout's path on the build machine lead here
# (test binaries find their data through paths fixed at compile time), and sets `root`
# and `bin`.
if [[ ! -d .device-bin && -f .device-bin.txz ]]; then
  # Python's lzma where the machine has no xz.
  tar xJf .device-bin.txz 2> /dev/null ||
    python3 -c 'import tarfile; tarfile.open(".device-bin.txz").extractall()'
fi
root=$(pwd)
build_root=$(cat .device-bin/build_root)
if [[ $build_root != "$root" ]]; then mkdir -p "$(dirname "$build_root")"; ln -sfn "$root" "$build_root"; fi
bin=.device-bin
