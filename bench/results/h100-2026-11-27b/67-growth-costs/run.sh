# Where the first pass's time goes when a growth is pages: cuda_vmm_probe (three runs),
# with its new section 3 (a 2 GiB growth as one chunk, 500 MiB chunks or 20 MiB pages;
# pages created from four threads).
source bench/device_bin.sh
for i in 1 2 3; do $bin/cuda_vmm_probe; echo; done 2>&1 | tee $OUT/vmm_probe.txt
