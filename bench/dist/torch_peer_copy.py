"""PyTorch's anchor for gpuscope's peer copies: the best of five 1 GiB copies from
cuda:0 to cuda:1 into an existing tensor (`dst.copy_(src)`, what gpuscope's
`copy_from` does), and the same through the host (`src.cpu()` then `.to('cuda:1')`),
in GB/s. Usage: python3 bench/dist/torch_peer_copy.py [--expandable]
"""
import os
import sys
import time

if "--expandable" in sys.argv:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
import torch

n = (1 << 30) // 4
src = torch.full((n,), 3.0, device="cuda:0")
dst = torch.empty(n, device="cuda:1")
dst.copy_(src)


def sync():
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)


def best(f):
    times = []
    for _ in range(5):
        sync()
        t = time.perf_counter()
        f()
        sync()
        times.append(time.perf_counter() - t)
    return min(times)


direct = best(lambda: dst.copy_(src))
staged = best(lambda: src.cpu().to("cuda:1"))
gbs = lambda s: n * 4 / s / 1e9
mode = "expandable" if "--expandable" in sys.argv else "default"
print(
    f"PyTorch ({mode}) 1 GiB cuda:0 -> cuda:1: copy_ {gbs(direct):.1f} GB/s "
    f"(can_device_access_peer: {torch.cuda.can_device_access_peer(1, 0)}); "
    f"through the host {gbs(staged):.1f} GB/s"
)
assert bool((dst == 3.0).all())
