"""The tenth corpus: data-parallel training on two GPUs, recorded on 2026-11-25 (fifth
session), held out from every change to the allocator (BENCHMARKS.md, "A tenth corpus,
held out: two GPUs"). Same conventions as workloads.py, but each workload runs in one
process per GPU under torchrun (`record_all.sh` launches the names of RANKS with two),
and the trace is rank 0's: its allocations on its own GPU, NCCL's streams included.

What the first nine corpora lack: PyTorch's own data-parallel wrappers, whose
collectives run on NCCL streams of their own and hand memory between streams through
`record_stream` or events. DistributedDataParallel all-reduces gradient buckets while
the backward pass runs (once with micro-batches whose gradients accumulate under
`no_sync`), FullyShardedDataParallel (FSDP1) gathers each block's flat parameter before
using it and frees it after, reduce-scattering gradients, and `fully_shard` (FSDP2)
does the same per parameter with its own all-gather and reduce-scatter streams.
"""
import contextlib
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from workloads import DEV, Block, Gpt


def _group():
    """This process's rank in the process group record.py set up under torchrun, or a
    group of one (gloo on the CPU, NCCL on a GPU) when run alone (`record.py --try`)."""
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29571")
        dist.init_process_group("nccl" if DEV.type == "cuda" else "gloo", rank=0, world_size=1)
    return dist.get_rank()


def _dev():
    return torch.device("cuda", torch.cuda.current_device()) if DEV.type == "cuda" else DEV


def _amp():
    return dict(device_type=DEV.type, dtype=torch.bfloat16, enabled=DEV.type == "cuda")


def _lm_steps(model, dev, gen, steps, autocast):
    """`steps` AdamW steps of next-token prediction on 8 random sequences of 512 tokens
    (vocab 32,000) drawn from `gen`, the forward pass in bf16 autocast if `autocast`."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(steps):
        idx = torch.randint(0, 32000, (8, 513), generator=gen).to(dev)
        with torch.autocast(**_amp()) if autocast else contextlib.nullcontext():
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, 32000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def ddp_bucketed_train(steps):
    """A 12-layer GPT (d 1,024, vocab 32,000, context 512) trained with
    DistributedDataParallel (25 MiB buckets all-reduced during the backward pass) on 8
    sequences of 512 per GPU, bf16 autocast, AdamW."""
    rank = _group()
    torch.manual_seed(101)
    dev = _dev()
    model = DistributedDataParallel(Gpt(32000, 1024, 12, 16, 512).to(dev),
                                    device_ids=[dev.index] if dev.type == "cuda" else None,
                                    bucket_cap_mb=25)
    _lm_steps(model, dev, torch.Generator().manual_seed(101 + rank), steps, autocast=True)


def ddp_no_sync_accum_train(steps):
    """An 8-layer GPT (d 1,024, vocab 32,000, context 512) trained with
    DistributedDataParallel and gradient accumulation: four micro-batches of 4-16
    sequences of 128-512 tokens (drawn per micro-batch), the first three under
    `no_sync` (gradients accumulate locally), the last all-reduced; bf16 autocast,
    AdamW, gradients kept between steps (`set_to_none=False`)."""
    rank = _group()
    torch.manual_seed(102)
    dev = _dev()
    model = DistributedDataParallel(Gpt(32000, 1024, 8, 16, 512).to(dev),
                                    device_ids=[dev.index] if dev.type == "cuda" else None)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(102 + rank)
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        for micro in range(4):
            b = int(torch.randint(4, 17, (1,), generator=gen))
            t = int(torch.randint(128, 513, (1,), generator=gen))
            idx = torch.randint(0, 32000, (b, t + 1), generator=gen).to(dev)
            with model.no_sync() if micro < 3 else contextlib.nullcontext():
                with torch.autocast(**_amp()):
                    logits = model(idx[:, :-1])
                loss = F.cross_entropy(logits.float().reshape(-1, 32000),
                                       idx[:, 1:].reshape(-1)) / 4
                loss.backward()
        opt.step()


def fsdp_wrapped_train(steps):
    """A 16-layer GPT (d 1,024, vocab 32,000, context 512) trained with
    FullyShardedDataParallel (FSDP1: every block wrapped, full sharding, bf16 parameters
    and reductions, `use_orig_params`) on 8 sequences of 512 per GPU, AdamW."""
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    rank = _group()
    torch.manual_seed(103)
    dev = _dev()
    bf16 = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16,
                          buffer_dtype=torch.bfloat16)
    model = FullyShardedDataParallel(
        Gpt(32000, 1024, 16, 16, 512), auto_wrap_policy=ModuleWrapPolicy({Block}),
        mixed_precision=bf16 if DEV.type == "cuda" else None, use_orig_params=True,
        device_id=dev if dev.type == "cuda" else None)
    _lm_steps(model, dev, torch.Generator().manual_seed(103 + rank), steps, autocast=False)


def fsdp2_sharded_train(steps):
    """A 16-layer GPT (d 1,024, vocab 32,000, context 512) trained with `fully_shard`
    (FSDP2: each block, then the whole model, sharded per parameter; bf16 parameters,
    fp32 reductions) on 8 sequences of 512 per GPU, AdamW."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    rank = _group()
    torch.manual_seed(104)
    dev = _dev()
    model = Gpt(32000, 1024, 16, 16, 512).to(dev)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    kw = dict(mp_policy=policy) if DEV.type == "cuda" else {}
    for blk in model.blocks:
        fully_shard(blk, **kw)
    fully_shard(model, **kw)
    _lm_steps(model, dev, torch.Generator().manual_seed(104 + rank), steps, autocast=False)


WORKLOADS = {
    "ddp_bucketed_train": (ddp_bucketed_train, 6),
    "ddp_no_sync_accum_train": (ddp_no_sync_accum_train, 4),
    "fsdp_wrapped_train": (fsdp_wrapped_train, 6),
    "fsdp2_sharded_train": (fsdp2_sharded_train, 6),
}

# Processes (GPUs) each workload runs on: record_all.sh launches these under torchrun.
RANKS = {name: 2 for name in WORKLOADS}
