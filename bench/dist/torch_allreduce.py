"""NCCL all-reduce bus bandwidth through PyTorch, the anchor for
gpuscope-runtime/examples/allreduce_bench.rs (same sizes, same iteration counts, same
JSON fields). Run under torchrun:

  torchrun --nproc_per_node=2 bench/dist/torch_allreduce.py --sizes-mib 1,256,1024
"""
import argparse, json, os, time
import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--sizes-mib", default="1,256,1024")
p.add_argument("--iters", type=int, default=20)
a = p.parse_args()
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
for mib in [int(s) for s in a.sizes_mib.split(",")]:
    nbytes = mib << 20
    t = torch.ones(nbytes // 4, device="cuda")
    for _ in range(3):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(a.iters):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    secs = (time.perf_counter() - start) / a.iters
    algbw = nbytes / secs / 1e9
    if rank == 0:
        print(json.dumps({"impl": "pytorch " + torch.__version__, "mode": "process per GPU", "world": world,
                          "bytes": nbytes, "ms": round(secs * 1e3, 4), "algbw_gbs": round(algbw, 2),
                          "busbw_gbs": round(algbw * 2 * (world - 1) / world, 2), "registered": False}))
dist.destroy_process_group()
