# The twenty-first corpus, three GPU calls on one H100 (device time ran short for one):
# 1. recorded (workloads_twentyfirst.py at commit 0aa67af, before any change):
cd bench/record_traces && names=$(python3 -c 'import ast
for n in ast.parse(open("workloads_twentyfirst.py").read()).body:
    if isinstance(n, ast.Assign) and n.targets[0].id == "WORKLOADS":
        print(" ".join(k.value for k in n.value.keys))') && cd ../..
bash bench/record_traces/record_all.sh $OUT/twentyfirst/traces $names   # log.txt
gzip -9n $OUT/twentyfirst/traces/*.csv     # -> tests/data/traces (commit c3cd710)
# 2. headroom of the eight (gpuscope on CUDA and PyTorch's default; six bisection steps,
#    about 0.6% of the device), with the binaries of .device-bin.txz (commit 20313ec's code):
source bench/device_bin.sh
GPUSCOPE=$bin/gpuscope python3 bench/headroom.py --runner torch-default --runner cuda \
  --lo 0.6 --steps 6 tests/data/traces/{deq_implicit_train,controlnet_frozen_unet_train,revnet_recompute_train,megabyte_patch_lm_train,maskrcnn_varinst_train,dreamer_world_model_train,multi_lora_serve,medusa_tree_decode}.csv.gz
# 3. compared (seven rounds, 146 s), same binaries:
REPEATS=7 bash bench/compare_torch.sh $bin/gpuscope $OUT/cmp tests/data/traces/{...the same eight...}.csv.gz
