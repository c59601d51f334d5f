"""The twenty-ninth corpus: eight workloads, held out from every change to the allocator until
recorded. Same conventions as workloads.py: `run(steps)` builds its models and data on DEV and
runs `steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and data
are smaller and the streams are left out (every periodic event still happens within two steps).

Each holds memory in a way the first twenty-eight corpora do not: decoding with a KIVI-style
2-bit key/value cache (keys quantised per channel in groups of 128 tokens, values per token in
groups of 32 channels, four codes packed in a byte; a full-precision residual of the last tokens
grown by concatenation and, once 128 long, quantised and appended to the packed cache, which
grows by whole groups; every layer of every token dequantises the whole cache into transient
fp16 keys and values); federated averaging simulated in one process (each round a deep copy of
the global network and its optimizer per sampled client, trained on that client's data set of
its own size, FedProx's proximal term keeping a parameter-sized difference per tensor in the
graph, the update summed into flat buffers, the copy freed; the clients' data made one client
ahead on a side stream; a server Adam over the averaged update); Megatron-style mixed precision
over flat buffers (bf16 parameters as views of one buffer, one fp32 gradient buffer that hooks
fill as backward makes each gradient and free it, fp32 master weights and Adam in four shards
stepped one at a time, each written back through a bf16 staging copy; batch-size ramp-up, so the
number of checkpointed micro-batches grows); ParaDiGMS (a diffusion sampler's whole trajectory
in one buffer, a window of timesteps denoised in parallel by Picard iterations, the window
sliding by the number of converged steps, so the denoiser's batch is data-dependent); attention
multiple-instance learning over whole-slide images (a frozen ResNet trunk encodes a slide's 1k-
24k tiles in chunks that a loader stream makes one ahead, the bag's features kept in an LRU cache
of slides under a byte budget, evicted as new slides come); RigL (dynamic sparse training: a
boolean mask per weight, every 50 steps each layer's weakest weights dropped and as many grown
where the dense gradient is largest, by top-k over the layer; fp16 with a gradient scaler); an
adaptive-input, adaptive-softmax language model over a 267,735-token vocabulary (every cluster
gathers the data-dependent set of tokens that fall in it, in the input and in the loss; the
evaluation's full log-probabilities a 0.5 GiB block); and a differentiable neural computer (an
external memory and a temporal link matrix rewritten whole at every timestep and kept for
backpropagation through time over a new sequence length every step).

Above each workload, a comment estimates its peak on the GPU (from the sizes; PyTorch's
allocated bytes) and its time on an H100.
"""
import copy
import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block, Gpt
# Earlier corpora's helpers: autocast, generators, choices, streams and hand-over (thirteenth);
# an integer in a closed range, fp16 on the GPU (fourteenth); a wide ResNet (fifteenth); Llama
# blocks, RMSNorm, rotary embeddings (sixteenth); a DiT (twentieth); rotary angles (twenty-
# sixth); a clipped optimizer step (twenty-eighth).
from workloads_thirteenth import CUDA, _amp, _generator, _hand_over, _on, _pick, _stream
from workloads_fourteenth import _half, _randint
from workloads_fifteenth import _wide_resnet
from workloads_sixteenth import LlamaBlock, RmsNorm, _rope
from workloads_twentieth import _DiT
from workloads_twentysixth import _angles
from workloads_twentyeighth import _clip_step


# ------------------------------------------------------ KIVI, a 2-bit key/value cache

def _quantise(x, dim, bits):
    """Asymmetric `bits`-bit codes of `x` over `dim` (uint8, one code a byte), and the scale
    and minimum they share (reduced over `dim`, kept)."""
    lo, hi = x.amin(dim, keepdim=True), x.amax(dim, keepdim=True)
    scale = ((hi - lo) / (2 ** bits - 1)).clamp_min(1e-4)
    codes = ((x - lo) / scale).round_().clamp_(0, 2 ** bits - 1).to(torch.uint8)
    return codes, scale, lo


def _pack(codes, dim, bits):
    """8 / bits codes packed into each byte along `dim` (a positive axis)."""
    per = 8 // bits
    c = codes.unflatten(dim, (codes.shape[dim] // per, per))
    out = c.select(dim + 1, 0).clone()
    for j in range(1, per):
        out |= c.select(dim + 1, j) << (bits * j)
    return out


def _unpack(packed, dim, bits, dtype):
    per, mask = 8 // bits, 2 ** bits - 1
    parts = [(packed >> (bits * j)) & mask for j in range(per)]
    return torch.stack(parts, dim + 1).flatten(dim, dim + 1).to(dtype)


def _kivi_append(cache, k, v, group, bits):
    """Whole groups of k, v (b, kv heads, n, hd; n a multiple of `group`) quantised and
    appended: keys per channel over each group of tokens, values per token over groups of
    32 channels."""
    b, h, n, hd = k.shape
    kc, ks, kz = _quantise(k.reshape(b, h, n // group, group, hd), 3, bits)
    vc, vs, vz = _quantise(v.reshape(b, h, n, hd // 32, 32), 4, bits)
    for name, t in (("kq", _pack(kc, 3, bits)), ("ks", ks), ("kz", kz),
                    ("vq", _pack(vc, 4, bits)), ("vs", vs), ("vz", vz)):
        cache[name] = torch.cat([cache[name], t], 2) if name in cache else t


def _kivi_layer(blk, x, cos, sin, cache, group, bits):
    """A Llama block over a prompt (b, t, d; its keys and values quantised into `cache` but
    for the last t mod group, kept in fp16) or over one token (b, 1, d; attending to the whole
    cache dequantised, the residual flushed into the packed cache when a group is full)."""
    b, t, d = x.shape
    kvh, hd, g = blk.kv_heads, blk.hd, blk.heads // blk.kv_heads
    h = blk.norm1(x)
    q = blk.q(h).view(b, t, blk.heads, hd).transpose(1, 2)
    k, v = blk.kv(h).view(b, t, 2, kvh, hd).permute(2, 0, 3, 1, 4)
    q, k = _rope(q, cos, sin), _rope(k, cos, sin)
    if t > 1:
        y = F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                           is_causal=True)
        whole = t // group * group
        _kivi_append(cache, k[:, :, :whole], v[:, :, :whole], group, bits)
        cache["rk"], cache["rv"] = k[:, :, whole:].contiguous(), v[:, :, whole:].contiguous()
    else:
        cache["rk"] = torch.cat([cache["rk"], k], 2)
        cache["rv"] = torch.cat([cache["rv"], v], 2)
        keys = _unpack(cache["kq"], 3, bits, x.dtype) * cache["ks"] + cache["kz"]
        vals = _unpack(cache["vq"], 4, bits, x.dtype) * cache["vs"] + cache["vz"]
        keys = torch.cat([keys.flatten(2, 3), cache["rk"]], 2).repeat_interleave(g, 1)
        vals = torch.cat([vals.flatten(3), cache["rv"]], 2).repeat_interleave(g, 1)
        y = F.scaled_dot_product_attention(q, keys, vals)
        del keys, vals
        if cache["rk"].shape[2] == group:
            _kivi_append(cache, cache["rk"], cache["rv"], group, bits)
            cache["rk"], cache["rv"] = cache["rk"][:, :, :0].clone(), cache["rv"][:, :, :0].clone()
    x = x + blk.o(y.transpose(1, 2).reshape(b, t, d))
    h = blk.norm2(x)
    return x + blk.down(F.silu(blk.gate(h)) * blk.up(h))


# GPU peak about 6 GiB: a 0.9B-parameter Llama-style model in fp16 (1.8 GiB); the packed cache
# at its largest (12 requests x 6,300 positions x 16 layers, about 660 bytes a position and
# layer with the scales: 0.8 GiB); a wave's prefill of up to 72k tokens (SwiGLU's three
# 72k x 5,632 fp16 tensors, 0.8 GiB each, the repeated keys and values); a decoded token's
# dequantised keys and values of one layer (the unpacked codes, their fp16 copy, the scaled
# result, the concatenation with the residual and its repetition over the query heads: some
# 0.15 GiB each, about 1.2 GiB). Time: prefill of some 40k tokens a wave on average (80 TFLOP,
# 0.2-0.3 s); 64-160 tokens decoded, each dequantising the cache in some 40 kernels a layer
# (up to 4 GiB of memory traffic a layer; 3-25 ms a token): 10 waves, some 10-20 s.
def kivi_quant_kv_decode(steps):
    """Batched decoding with a KIVI-style 2-bit key/value cache (Liu et al. 2024): a 16-layer
    Llama-style model (d 2,048, 16 query heads over 8 key/value heads of 128, SwiGLU 5,632,
    vocab 32,000, fp16, inference mode). Each step a wave of 4-12 requests with a prompt of
    1k-6k tokens (one length a wave) is prefilled at once; every layer quantises its keys per
    channel over groups of 128 tokens and its values per token over groups of 32 channels
    (asymmetric 2-bit codes, four packed in a byte, fp16 scales and minima), keeping the last
    length mod 128 tokens in fp16. Then 64-160 tokens are decoded greedily: each layer appends
    the new key and value to the fp16 residual, dequantises the packed cache, attends to both,
    and once the residual holds 128 tokens quantises it and appends it to the packed cache."""
    torch.manual_seed(291)
    vocab, d, layers, heads, kvh, hidden, batches, prompts, news, group = (
        (32000, 2048, 16, 16, 8, 5632, (4, 12), (1024, 6144), (64, 160), 128) if CUDA
        else (100, 64, 2, 2, 1, 128, (1, 3), (10, 30), (10, 20), 8))
    bits = 2
    with torch.device(DEV):
        emb = _half(nn.Embedding(vocab, d))
        blocks = _half(nn.ModuleList(LlamaBlock(d, heads, kvh, hidden) for _ in range(layers)))
        norm, head = _half(RmsNorm(d)), _half(nn.Linear(d, vocab, bias=False))
    dt = emb.weight.dtype
    angles = _angles(prompts[1] + news[1] + 1, d // heads)
    cos, sin = angles.cos().to(dt), angles.sin().to(dt)
    gen = _generator(291)
    with torch.inference_mode():
        for _ in range(steps):
            b, length, new = _randint(gen, *batches), _randint(gen, *prompts), _randint(gen, *news)
            caches = [{} for _ in range(layers)]
            x = emb(torch.randint(0, vocab, (b, length), device=DEV))
            for blk, cache in zip(blocks, caches):
                x = _kivi_layer(blk, x, cos[:length], sin[:length], cache, group, bits)
            tok = head(norm(x[:, -1:])).argmax(-1)
            del x
            out = [tok]
            for p in range(length, length + new - 1):
                x = emb(tok)
                for blk, cache in zip(blocks, caches):
                    x = _kivi_layer(blk, x, cos[p:p + 1], sin[p:p + 1], cache, group, bits)
                tok = head(norm(x)).argmax(-1)
                out.append(tok)
                del x
            torch.cat(out, 1).cpu()
            del caches, tok, out


# ------------------------------------------ federated averaging, a model copy per client

# GPU peak about 3.5 GiB: WRN-26-8 (23.4M parameters) with the server's Adam moments (0.28
# GiB); a client's copy, its gradients and SGD momentum (0.28 GiB), FedProx's parameter-sized
# differences kept in the graph (94 MiB), the flat update sums (94 MiB); a local step's
# activations (128 images at 32 x 32, 128-512 channels, bf16: some 1.5-2 GiB); a client's data
# set and the next one's (up to 4,096 images, 48 MiB each). Time: about 1,350 images a client
# on average, so some 90 local steps a round at 15-25 ms; 10 rounds and 2 evaluations of 2,048
# images, some 15-25 s.
def fedavg_clients_round_train(steps):
    """Federated learning simulated in one process, as FedProx / FedOpt studies run it: a pool
    of 100 clients, each with a non-IID data set (two of 100 classes) of 256-4,096 images of
    32 x 32 (log-uniform, fixed per client). Each step is a round: 8 clients sampled; for each,
    a deep copy of the global WRN-26-8 and a new SGD with momentum train one local epoch over
    its data (batches of 128, bf16 autocast) with FedProx's proximal term (mu 0.01, the
    squared distance to the global weights); its update, weighted by its data size, is added
    into a flat sum (parameters) and its floating buffers into another, then the copy and its
    optimizer are freed. Clients' data sets are made on a side stream one client ahead and
    handed over. The server applies the negated average update as a gradient with Adam
    (FedAdam) and takes the average of the buffers; every 4 rounds the global model is
    evaluated on 2,048 held-out images. Two copies of the network in one process."""
    torch.manual_seed(292)
    width, size, batch, pool, per_round, sizes, classes, mu, every, held_n, eval_batch = (
        (8, 32, 128, 100, 8, (256, 4096), 100, 0.01, 4, 2048, 512) if CUDA
        else (1, 16, 4, 6, 2, (4, 12), 10, 0.01, 2, 8, 4))
    with torch.device(DEV):
        glob = _wide_resnet(width, classes).to(memory_format=torch.channels_last)
    gparams = list(glob.parameters())
    gbufs = [t for t in glob.buffers() if t.is_floating_point()]
    server = torch.optim.Adam(gparams, lr=1e-3, betas=(0.9, 0.99), eps=1e-3)
    gen, side, amp = _generator(292), _stream(), _amp(torch.bfloat16)
    main = torch.cuda.current_stream() if CUDA else None
    data_sizes = [int(sizes[0] * (sizes[1] / sizes[0]) ** float(torch.rand(1, generator=gen)))
                  for _ in range(pool)]
    their = [torch.randperm(classes, generator=gen)[:2] for _ in range(pool)]
    held = torch.randn(held_n, 3, size, size, device=DEV).to(memory_format=torch.channels_last)
    held_y = torch.randint(0, classes, (held_n,), device=DEV)

    def load(c):  # client c's data set, on the side stream
        n = data_sizes[c]
        pick = torch.randint(0, 2, (n,), generator=gen)
        if side is not None:
            side.wait_stream(main)
        with _on(side):
            y = their[c][pick].to(DEV, non_blocking=True)
            x = (torch.randn(n, 3, size, size, device=DEV) + 0.1 * y[:, None, None, None]
                 ).contiguous(memory_format=torch.channels_last)
        return x, y

    for rnd in range(steps):
        chosen = torch.randperm(pool, generator=gen)[:per_round].tolist()
        acc = torch.zeros(sum(p.numel() for p in gparams), device=DEV)
        bacc = torch.zeros(sum(t.numel() for t in gbufs), device=DEV)
        total, pending = 0, load(chosen[0])
        for i, c in enumerate(chosen):
            x, y = pending
            _hand_over([x, y], side)
            pending = load(chosen[i + 1]) if i + 1 < len(chosen) else None
            local = copy.deepcopy(glob).train()
            lparams = list(local.parameters())
            opt = torch.optim.SGD(lparams, lr=0.05, momentum=0.9, weight_decay=5e-4)
            n = x.shape[0]
            order = torch.randperm(n, device=DEV)
            for lo in range(0, n, batch):
                idx = order[lo:lo + batch]
                with torch.autocast(**amp):
                    loss = F.cross_entropy(local(x[idx]), y[idx])
                prox = sum((p - g.detach()).pow(2).sum() for p, g in zip(lparams, gparams))
                (loss + mu / 2 * prox).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del idx, loss, prox
            with torch.no_grad():
                acc.add_(torch.cat([(p - g).flatten() for p, g in zip(lparams, gparams)]), alpha=n)
                bufs = [t.flatten() for t in local.buffers() if t.is_floating_point()]
                bacc.add_(torch.cat(bufs), alpha=n)
                del bufs
            total += n
            del x, y, order, local, lparams, opt
        acc.div_(-total)
        for p, g in zip(gparams, acc.split([p.numel() for p in gparams])):
            p.grad = g.view(p.shape)
        server.step()
        server.zero_grad(set_to_none=True)
        with torch.no_grad():
            for t, m in zip(gbufs, bacc.div_(total).split([t.numel() for t in gbufs])):
                t.copy_(m.view(t.shape))
        del acc, bacc, pending
        if rnd % every == every - 1:
            glob.eval()
            with torch.no_grad(), torch.autocast(**amp):
                hits = sum((glob(held[i:i + eval_batch]).argmax(-1)
                            == held_y[i:i + eval_batch]).sum()
                           for i in range(0, held_n, eval_batch))
                int(hits)
            glob.train()


# ------------------------------------- Megatron-style flat buffers, sharded optimizer

# GPU peak about 19 GiB: a 24-layer GPT of d 1,536 (779M parameters): the bf16 parameter buffer
# 1.5 GiB, the fp32 gradient buffer 2.9 GiB, the fp32 master weights 2.9 GiB and AdamW's moments
# 5.8 GiB; a micro-batch of 4 x 1,024 tokens with every block checkpointed (24 block inputs,
# 0.3 GiB; one block recomputed, about 0.3 GiB; a layer's bf16 gradients before their hooks add
# them in); the logits 4,096 x 32,000 (bf16, fp32, log-softmax, gradient: about 1.5 GiB); a
# shard's AdamW temporaries (0.7 GiB each) and bf16 staging copy (0.36 GiB). Time: about 25
# TFLOP a micro-batch with recomputation (60-80 ms); 2 to 16 micro-batches a step as the batch
# ramps up, 246 in all: 24 steps, some 15-20 s.
def megatron_flat_buffers_train(steps):
    """Megatron-LM-style mixed precision over flat buffers: a 24-layer GPT (d 1,536, 16 heads,
    vocab 32,000, context 1,024) whose bf16 parameters are views of one contiguous buffer; a
    hook after each parameter's gradient is accumulated adds it into that parameter's view of
    one contiguous fp32 gradient buffer (`main_grad`) and frees it, so backward never holds
    more than a layer's bf16 gradients. The fp32 master weights are one flat buffer in four
    shards, each with its own AdamW (as the distributed optimizer's ranks own them), stepped
    one after another with its slice of the gradient buffer, clipped by that buffer's norm,
    and written back into the parameter buffer through a bf16 staging copy (standing in for
    the all-gather); the gradient buffer is zeroed in place. Every block is checkpointed; the
    global batch ramps up from 8 to 64 sequences by 8 over the first two thirds of the run
    (micro-batches of 4, so 2 to 16 of them a step)."""
    torch.manual_seed(293)
    vocab, d, layers, heads, ctx, micro, ramp, shards = (
        (32000, 1536, 24, 16, 1024, 4, (8, 64, 8), 4) if CUDA
        else (100, 32, 2, 4, 16, 2, (2, 6, 2), 4))
    with torch.device(DEV):
        model = Gpt(vocab, d, layers, heads, ctx, ckpt=True)
    params = list(model.parameters())
    numel = sum(p.numel() for p in params)
    with torch.no_grad():
        master = torch.cat([p.detach().flatten() for p in params]).float()
        flat = master.to(torch.bfloat16)
        main_grad = torch.zeros(numel, device=DEV)
        off = 0
        for p in params:
            n = p.numel()
            p.data = flat[off:off + n].view(p.shape)
            p.main_grad = main_grad[off:off + n].view(p.shape)
            off += n

    def into_main_grad(p):
        p.main_grad.add_(p.grad)
        p.grad = None

    for p in params:
        p.register_post_accumulate_grad_hook(into_main_grad)
    bounds = [numel * i // shards for i in range(shards + 1)]
    parts, opts = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        part = nn.Parameter(master[lo:hi])
        part.grad = main_grad[lo:hi]
        parts.append((lo, hi))
        opts.append(torch.optim.AdamW([part], lr=3e-4, weight_decay=0.1))
    first, last, by = ramp
    ramp_steps = max(1, 2 * steps // 3)
    for step in range(steps):
        sequences = min(last, first + by * ((last - first) // by * step // ramp_steps))
        count = sequences // micro
        for _ in range(count):
            ids = torch.randint(0, vocab, (micro, ctx + 1), device=DEV)
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()) / count
            del logits
            loss.backward()
            del ids, loss
        with torch.no_grad():
            main_grad.mul_((1.0 / (main_grad.norm() + 1e-6)).clamp(max=1.0))
            for (lo, hi), opt in zip(parts, opts):
                opt.step()
                staging = master[lo:hi].to(torch.bfloat16)
                flat[lo:hi].copy_(staging)
                del staging
            main_grad.zero_()


# --------------------------------------------- ParaDiGMS, Picard iterations over a window

# GPU peak about 2.5 GiB: DiT-B/2 (130M parameters, fp16, 0.25 GiB); the trajectory of 51
# latents of up to 12 images (10 MiB); one Picard iteration's batch of up to 2 x 12 x 16 =
# 384 latents (98k tokens of d 768: 0.15 GiB a tensor, the MLP's 0.6 GiB, the velocities and
# their fp32 copies, cumulative sums and errors). Time: up to 26 TFLOP an iteration (30-80
# ms); 8-30 iterations a sample batch as the window slides by 1-16 steps: 8 steps, some 4-12 s.
def paradigms_picard_sample(steps):
    """Parallel sampling of a diffusion model by Picard iterations (ParaDiGMS, Shih et al.
    2023): a class-conditional DiT-B/2 (d 768, 12 blocks, 12 heads) on 32 x 32 x 4 latents,
    fp16, inference mode, a 50-step Euler sampler of a flow with classifier-free guidance
    (scale 4, conditional and unconditional halves in one batch). Each step samples 4-12
    images: the whole trajectory (51 latents) is one buffer, initialised with the noise; a
    window of 16 timesteps is evaluated in one batch (2 x images x window), the new estimates
    are the start of the window plus the cumulative sums of the drifts, and the window slides
    past the leading steps whose estimate changed by less than the tolerance (at least one),
    its new tail starting from the latest estimate; near the end the window shrinks."""
    torch.manual_seed(294)
    d, depth, heads, side, classes, counts, total, window, tol = (
        (768, 12, 12, 32, 1000, (4, 12), 50, 16, 1e-4) if CUDA
        else (32, 2, 4, 8, 10, (1, 3), 8, 4, 1e-4))
    with torch.device(DEV):
        model = _half(_DiT(d, depth, heads, 4, side, 2, classes)).eval()
    dt = model.pos.dtype
    ts = torch.linspace(0, 1, total + 1, device=DEV)
    gen = _generator(294)
    with torch.inference_mode():
        for _ in range(steps):
            n = _randint(gen, *counts)
            cls = torch.randint(0, classes, (n,), device=DEV)
            traj = torch.randn(1, n, 4, side, side, device=DEV).repeat(total + 1, 1, 1, 1, 1)
            begin = 0
            while begin < total:
                end = min(begin + window, total)
                w = end - begin
                xs = traj[begin:end].flatten(0, 1).to(dt)
                tt = ts[begin:end].repeat_interleave(n).to(dt)
                lab = cls.repeat(w)
                v = model(torch.cat([xs, xs]), torch.cat([tt, tt]),
                          torch.cat([lab, torch.full_like(lab, classes)])).float()
                vc, vu = v.chunk(2)
                drift = (vu + 4.0 * (vc - vu)).view(w, n, 4, side, side) / total
                new = traj[begin] + drift.cumsum(0)
                err = (new - traj[begin + 1:end + 1]).pow(2).flatten(2).mean(-1).amax(1).cpu()
                traj[begin + 1:end + 1] = new
                bad = (err > tol).nonzero()
                stride = max(1, int(bad[0, 0]) if len(bad) else w)
                begin += stride
                ahead = min(begin + window, total)
                if ahead > end:
                    traj[end + 1:ahead + 1] = traj[end]
                del xs, tt, lab, v, vc, vu, drift, new, err
            traj[total].cpu()
            del traj, cls


# ------------------------------- multiple-instance learning over whole-slide images

class _Bottleneck(nn.Module):
    def __init__(self, i, mid, stride):
        super().__init__()
        o = 4 * mid
        self.body = nn.Sequential(
            nn.Conv2d(i, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True), nn.Conv2d(mid, o, 1, bias=False), nn.BatchNorm2d(o))
        self.skip = (nn.Identity() if i == o and stride == 1 else
                     nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), nn.BatchNorm2d(o)))

    def forward(self, x):
        return F.relu(self.body(x) + self.skip(x))


def _resnet50_trunk(w=64):
    """ResNet-50 up to its third stage, average-pooled (16 w features), as CLAM's tile
    encoder."""
    layers = [nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    i = w
    for mid, n, stride in ((w, 3, 1), (2 * w, 4, 2), (4 * w, 6, 2)):
        for j in range(n):
            layers.append(_Bottleneck(i, mid, stride if j == 0 else 1))
            i = 4 * mid
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())


class _ClamHead(nn.Module):
    """CLAM-SB (Lu et al. 2021): a projection, gated attention pooling over the bag, a bag
    classifier, and per class an instance classifier over the top and bottom k attended
    tiles."""

    def __init__(self, d_in, d=512, att=256, classes=2):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(d_in, d), nn.ReLU(), nn.Dropout(0.25))
        self.a, self.b, self.c = nn.Linear(d, att), nn.Linear(d, att), nn.Linear(att, 1)
        self.cls = nn.Linear(d, classes)
        self.inst = nn.ModuleList(nn.Linear(d, 2) for _ in range(classes))

    def forward(self, feats, label, k):
        h = self.fc(feats)
        a = self.c(torch.tanh(self.a(h)) * torch.sigmoid(self.b(h)))[:, 0]
        logits = self.cls(a.softmax(0) @ h)[None]
        picked = torch.cat([a.topk(k).indices, (-a).topk(k).indices])
        target = torch.cat([torch.ones(k), torch.zeros(k)]).long().to(DEV)
        return logits, F.cross_entropy(self.inst[label](h[picked]), target)


# GPU peak about 5 GiB: the frozen trunk (8.5M parameters, fp16); a chunk of 512 tiles of 224
# x 224 through it (the stem's and first stage's fp16 maps, 0.8 GiB each, two or three at once)
# while the loader stream makes the next chunk (uint8 and fp16 copies, 77 and 154 MiB); the
# LRU cache of slides' features under its 512 MiB budget (1k-24k x 1,024 fp16, 2-48 MiB a
# slide); a bag's head pass in fp32 (24k x 1,024 input, 24k x 512 projections and gates,
# 0.1-0.2 GiB). Time: about 3.2 GFLOP a tile in fp16, 0.03-0.5 s a slide; about half of the
# 160 steps miss the cache: some 10-20 s.
def mil_wsi_bag_train(steps):
    """Attention multiple-instance learning over whole-slide images, as CLAM trains it: 64
    slides of 1,000-24,000 tiles of 224 x 224 (log-uniform, fixed per slide; binary labels);
    each step one slide drawn (popular slides more often). A slide not in the feature cache
    is encoded by a frozen ResNet-50 trunk (to its third stage, 1,024 features, fp16,
    channels-last, no gradients) in chunks of 512 tiles that a loader stream makes (uint8
    tiles normalised to fp16) one chunk ahead, handed over with record_stream; its features
    go into an LRU cache of slides bounded at 512 MiB (the least recently used evicted). The
    CLAM-SB head trains on the bag (fp32, Adam, clipping): bag cross-entropy 0.7, instance
    loss over the top and bottom 8 attended tiles 0.3. Two networks in one process."""
    torch.manual_seed(295)
    base, tile, chunk, slides, tiles, budget, k = (
        (64, 224, 512, 64, (1000, 24000), 512 << 20, 8) if CUDA
        else (4, 32, 16, 6, (10, 60), 6 << 10, 2))
    with torch.device(DEV):
        encoder = _half(_resnet50_trunk(base)).eval().requires_grad_(False)
        encoder = encoder.to(memory_format=torch.channels_last)
        head = _ClamHead(16 * base)
    dt = next(encoder.parameters()).dtype
    params = list(head.parameters())
    opt = torch.optim.Adam(params, lr=2e-4, weight_decay=1e-5)
    gen, side = _generator(295), _stream()
    main = torch.cuda.current_stream() if CUDA else None
    counts = [int(tiles[0] * (tiles[1] / tiles[0]) ** float(torch.rand(1, generator=gen)))
              for _ in range(slides)]
    labels = torch.randint(0, 2, (slides,), generator=gen).tolist()
    popularity = 1 / (torch.arange(slides) + 4.0)
    cache, held = OrderedDict(), 0

    def load(m):  # m tiles, on the loader stream
        if side is not None:
            side.wait_stream(main)
        with _on(side):
            raw = torch.randint(0, 256, (m, 3, tile, tile), dtype=torch.uint8, device=DEV)
            x = raw.to(dt).div_(127.5).sub_(1).contiguous(memory_format=torch.channels_last)
            del raw
        return x

    def encode(n):
        out, pending = [], load(min(chunk, n))
        with torch.no_grad():
            for lo in range(0, n, chunk):
                x = pending
                _hand_over([x], side)
                pending = load(min(chunk, n - lo - chunk)) if lo + chunk < n else None
                out.append(encoder(x))
                del x
        return torch.cat(out)

    for _ in range(steps):
        s = int(torch.multinomial(popularity, 1, generator=gen))
        feats = cache.pop(s, None)
        if feats is None:
            feats = encode(counts[s])
        else:
            held -= feats.numel() * feats.element_size()
        cache[s] = feats
        held += feats.numel() * feats.element_size()
        while held > budget and len(cache) > 1:
            _, old = cache.popitem(last=False)
            held -= old.numel() * old.element_size()
            del old
        logits, inst = head(feats.float(), labels[s], k)
        loss = 0.7 * F.cross_entropy(logits, torch.tensor([labels[s]], device=DEV)) + 0.3 * inst
        _clip_step(opt, params, loss)
        del feats, logits, inst, loss


# -------------------------------------------------------- RigL, dynamic sparse training

# GPU peak about 4 GiB: WRN-26-10 (36.5M parameters: weights, gradients, momentum, 0.44 GiB)
# and its masks (one byte a weight, 35 MiB); a step's fp16 activations at batch 128 of 32 x 32
# (160-640 channels, about 2.5-3 GiB); at a mask update, each layer's drop and grow scores
# (fp32 of the layer's size, up to 14 MiB, and a flattened copy), its top-k values and indices
# (up to 10% of its live weights) and the grown mask. Time: about 3.7 TFLOP a step (25-40 ms);
# 4 mask updates of 24 layers (some 150 small kernels each); 300 steps and 2 evaluations, some
# 9-13 s.
def rigl_dynamic_sparse_train(steps):
    """RigL (Evci et al. 2020): a wide ResNet (WRN-26-10, 100 classes, 32 x 32 images, batch
    128, channels-last, fp16 autocast with a gradient scaler, SGD with Nesterov momentum)
    trained at 90% sparsity in every convolution but the stem (the head dense): a boolean mask
    per weight, random at first, applied after every optimizer step. Every 50 steps until
    three quarters of the run, each layer drops the fraction 0.3 (cosine-decayed) of its live
    weights of smallest magnitude and grows as many where the dense gradient of the step is
    largest (top-k over the layer), the grown weights and their momentum set to zero. Every
    150 steps an evaluation on 1,024 images."""
    torch.manual_seed(296)
    width, batch, size, sparsity, every, stop, alpha, each, held_n = (
        (10, 128, 32, 0.9, 50, 0.75, 0.3, 150, 1024) if CUDA
        else (1, 4, 16, 0.9, 1, 1.0, 0.3, 2, 8))
    with torch.device(DEV):
        model = _wide_resnet(width).to(memory_format=torch.channels_last)
    sparse = [m.weight for m in model.modules()
              if isinstance(m, nn.Conv2d) and m.in_channels > 3]
    masks = []
    with torch.no_grad():
        for w in sparse:
            keep = torch.rand(w.numel(), device=DEV).topk(int((1 - sparsity) * w.numel())).indices
            m = torch.zeros(w.shape, dtype=torch.bool, device=DEV)
            m.view(-1)[keep] = True
            w.mul_(m)
            masks.append(m)
            del keep
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    scaler = torch.amp.GradScaler(DEV.type, enabled=CUDA)
    amp, end = _amp(torch.float16), int(stop * steps)

    def images(n):
        return torch.randn(n, 3, size, size, device=DEV).to(memory_format=torch.channels_last)

    held = images(held_n)
    for step in range(steps):
        x, y = images(batch), torch.randint(0, 100, (batch,), device=DEV)
        with torch.autocast(**amp):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, 5.0)
        if step % every == every - 1 and step < end:
            frac = alpha / 2 * (1 + math.cos(math.pi * step / max(1, end)))
            with torch.no_grad():
                for w, m in zip(sparse, masks):
                    n = int(frac * (1 - sparsity) * w.numel())
                    if n == 0:
                        continue
                    score = torch.where(m, w.abs(), math.inf).flatten()
                    m.view(-1)[score.topk(n, largest=False).indices] = False
                    grow = torch.where(m, -1.0, w.grad.abs().nan_to_num(0.0)).flatten()
                    grown = torch.zeros_like(m)
                    grown.view(-1)[grow.topk(n).indices] = True
                    m |= grown
                    w.masked_fill_(grown, 0.0)
                    state = opt.state.get(w, {})
                    if state.get("momentum_buffer") is not None:
                        state["momentum_buffer"].masked_fill_(grown, 0.0)
                    del score, grow, grown
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for w, m in zip(sparse, masks):
                w.mul_(m)
        del x, y, loss
        if step % each == each - 1:
            model.eval()
            with torch.no_grad(), torch.autocast(**amp):
                model(held).argmax(-1).cpu()
            model.train()


# ------------------------------------------ adaptive input and adaptive softmax

class _AdaptiveInput(nn.Module):
    """Adaptive input embeddings (Baevski and Auli 2019): the vocabulary in bands, band i
    embedded in d / div^i and projected to d; each band's tokens gathered, embedded and
    copied back into place."""

    def __init__(self, vocab, d, cutoffs, div):
        super().__init__()
        edges = [0, *cutoffs, vocab]
        self.bands = list(zip(edges[:-1], edges[1:]))
        self.emb = nn.ModuleList(nn.Embedding(hi - lo, d // div ** i)
                                 for i, (lo, hi) in enumerate(self.bands))
        self.proj = nn.ModuleList(nn.Linear(d // div ** i, d, bias=False)
                                  for i in range(len(self.bands)))
        self.d = d

    def forward(self, ids):
        flat, out = ids.flatten(), None
        for (lo, hi), emb, proj in zip(self.bands, self.emb, self.proj):
            idx = ((flat >= lo) & (flat < hi)).nonzero()[:, 0]
            e = proj(emb(flat[idx] - lo))
            out = e.new_zeros(len(flat), self.d) if out is None else out
            out = out.index_copy(0, idx, e)
        return out.view(*ids.shape, self.d) * self.d ** 0.5


def _log_uniform(vocab, shape):
    """Token ids with P(k) proportional to 1 / (k + 1), as a Zipfian corpus's."""
    ids = (torch.rand(shape, device=DEV) * math.log(vocab)).exp().long().sub_(1)
    return ids.clamp_(0, vocab - 1)


# GPU peak about 12 GiB: 275M parameters (16 blocks of d 1,024, 201M; the adaptive input and
# softmax, about 37M each) with gradients and Adam 4.4 GiB; 8,192 tokens of bf16 activations
# through 16 blocks (about 0.33 GiB a block, 5.3 GiB); the adaptive softmax in fp32: the head's
# 8,192 x 20,003 logits, log-softmax and gradient (0.6 GiB each), each tail's gathered rows
# (some 450-1,000 tokens, up to 1,000 x 160,000 fp32, 0.6 GiB, with its log-softmax); the
# evaluation's full log-probabilities 512 x 267,735 (0.5 GiB) and the per-cluster parts they
# are built from. Time: about 14 TFLOP a step (50-70 ms with the gathers' host syncs); 160
# steps and 4 evaluations, some 9-12 s.
def adaptive_softmax_lm_train(steps):
    """A WikiText-103-sized language model (Baevski and Auli 2019, smaller): vocab 267,735
    in bands at 20,000, 40,000 and 200,000 (division factor 4) for both the adaptive input
    and the adaptive softmax (`nn.AdaptiveLogSoftmaxWithLoss`), 16 pre-norm blocks of d 1,024
    and 16 heads, learned positions to 2,048. Zipf-like token ids, so every band's count (of
    inputs and of targets) changes each step and each tail cluster's projection and logits
    are computed for its own data-dependent rows. 8,192 tokens a step as 16 x 512, 8 x 1,024
    or 4 x 2,048; bf16 autocast for the trunk, the adaptive softmax in fp32; Adam, clipping.
    Every 40 steps an evaluation computes full log-probabilities (`log_prob`) for 512
    positions."""
    torch.manual_seed(297)
    vocab, d, layers, heads, cutoffs, shapes, every, rows = (
        (267735, 1024, 16, 16, (20000, 40000, 200000), ((16, 512), (8, 1024), (4, 2048)), 40, 512)
        if CUDA else (300, 64, 2, 4, (50, 100, 200), ((2, 8), (1, 16)), 2, 8))
    ctx = max(t for _, t in shapes)
    with torch.device(DEV):
        tok, pos = _AdaptiveInput(vocab, d, cutoffs, 4), nn.Embedding(ctx, d)
        blocks, ln = nn.ModuleList(Block(d, heads) for _ in range(layers)), nn.LayerNorm(d)
        asm = nn.AdaptiveLogSoftmaxWithLoss(d, vocab, list(cutoffs), div_value=4.0)
    params = [*tok.parameters(), *pos.parameters(), *blocks.parameters(), *ln.parameters(),
              *asm.parameters()]
    opt = torch.optim.Adam(params, lr=2e-4)
    gen, amp = _generator(297), _amp(torch.bfloat16)

    def trunk(ids):
        with torch.autocast(**amp):
            x = tok(ids) + pos(torch.arange(ids.shape[1], device=DEV))
            for blk in blocks:
                x = blk(x)
            return ln(x)

    for step in range(steps):
        b, t = _pick(gen, shapes)
        ids = _log_uniform(vocab, (b, t + 1))
        h = trunk(ids[:, :-1])
        loss = asm(h.float().flatten(0, 1), ids[:, 1:].flatten()).loss
        del h
        _clip_step(opt, params, loss)
        del ids, loss
        if step % every == every - 1:
            with torch.no_grad():
                ids = _log_uniform(vocab, (1, rows + 1))
                lp = asm.log_prob(trunk(ids[:, :-1])[0].float())
                (-lp.gather(1, ids[0, 1:, None])).mean().item()
                del ids, lp


# ------------------------------------------------------ a differentiable neural computer

class _Dnc(nn.Module):
    """A differentiable neural computer (Graves et al. 2016): an LSTM controller, an external
    memory of n slots of w, r read heads, content addressing, dynamic allocation by sorted
    usage, a temporal link matrix (n x n per sequence) for forward and backward reads. Every
    timestep rewrites the memory and the link matrix as new tensors (kept for backward)."""

    def __init__(self, inp, out, hidden, n, w, r):
        super().__init__()
        self.n, self.w, self.r, self.hidden = n, w, r, hidden
        self.ctrl = nn.LSTMCell(inp + r * w, hidden)
        self.iface = nn.Linear(hidden, r * w + 5 * r + 3 * w + 3)
        self.out = nn.Linear(hidden + r * w, out)

    @staticmethod
    def _content(mem, keys, strength):
        sim = F.normalize(keys, dim=-1, eps=1e-6) @ F.normalize(mem, dim=-1, eps=1e-6).mT
        return (sim * strength[..., None]).softmax(-1)

    def forward(self, xs):
        steps, b, _ = xs.shape
        n, w, r = self.n, self.w, self.r
        h = c = xs.new_zeros(b, self.hidden)
        mem = xs.new_full((b, n, w), 1e-6)
        link, prec, usage, ww = xs.new_zeros(b, n, n), xs.new_zeros(b, n), xs.new_zeros(b, n), \
            xs.new_zeros(b, n)
        wr, reads = xs.new_zeros(b, r, n), xs.new_zeros(b, r * w)
        off_diag = 1 - torch.eye(n, device=xs.device)
        outs = []
        for t in range(steps):
            h, c = self.ctrl(torch.cat([xs[t], reads], 1), (h, c))
            rk, rs, wk, ws, er, wv, fg, ag, wg, rm = self.iface(h).split(
                [r * w, r, w, 1, w, w, r, 1, 1, 3 * r], 1)
            rs, ws = 1 + F.softplus(rs), 1 + F.softplus(ws)
            er, fg, ag, wg = er.sigmoid(), fg.sigmoid(), ag.sigmoid(), wg.sigmoid()
            rm = rm.view(b, r, 3).softmax(-1)
            usage = (usage + ww - usage * ww) * (1 - fg[:, :, None] * wr).prod(1)
            su, order = usage.sort(-1)
            excl = torch.cat([su.new_ones(b, 1), su.cumprod(-1)[:, :-1]], 1)
            alloc = torch.zeros_like(su).scatter(1, order, (1 - su) * excl)
            cw = self._content(mem, wk[:, None], ws)[:, 0]
            ww = wg * (ag * alloc + (1 - ag) * cw)
            mem = mem * (1 - ww[:, :, None] * er[:, None]) + ww[:, :, None] * wv[:, None]
            link = ((1 - ww[:, :, None] - ww[:, None]) * link + ww[:, :, None] * prec[:, None]) \
                * off_diag
            prec = (1 - ww.sum(1, keepdim=True)) * prec + ww
            fwd, bwd = wr @ link.mT, wr @ link
            cr = self._content(mem, rk.view(b, r, w), rs)
            wr = rm[..., 0:1] * bwd + rm[..., 1:2] * cr + rm[..., 2:3] * fwd
            reads = (wr @ mem).flatten(1)
            outs.append(self.out(torch.cat([h, reads], 1)))
        return torch.stack(outs)


# GPU peak about 19 GiB: per timestep the new link matrix and the factor it was rescaled by
# (64 x 384 x 384 fp32, 38 MiB each) are kept for backward, with the new memory (64 x 384 x 64,
# 6 MiB, with the rescaled and normalised copies it is read through) and the weightings: some
# 95 MiB a timestep, up to 194 timesteps (repeat-copy of 32
# vectors 5 times); in backward the link's gradient and its temporaries (a few times 38 MiB).
# Time: some 70 kernels a timestep forward and 150 backward (about 2-2.5 ms), 19-194 timesteps
# (82 on average): 40 steps, some 8-14 s.
def dnc_external_memory_train(steps):
    """A differentiable neural computer (LSTM controller of 256, memory of 384 slots of 64,
    4 read heads) trained on repeat-copy: each step a batch of 64 sequences of 8-32 random
    8-bit vectors (one length a step), a delimiter carrying the repeat count (1-5), then the
    sequence to be emitted that many times and an end marker, so a step runs 19-194 timesteps.
    Backpropagation through time over the whole sequence (every timestep's memory, link
    matrix and weightings kept), sigmoid cross-entropy on the answer, RMSprop with momentum
    (as the paper), clipping at 10. fp32."""
    torch.manual_seed(298)
    batch, hidden, n, w, r, bits, lens, repeats = (
        (64, 256, 384, 64, 4, 8, (8, 32), (1, 5)) if CUDA
        else (4, 32, 16, 8, 2, 4, (2, 4), (1, 2)))
    with torch.device(DEV):
        model = _Dnc(bits + 2, bits + 1, hidden, n, w, r)
    params = list(model.parameters())
    opt = torch.optim.RMSprop(params, lr=1e-4, momentum=0.9, eps=1e-10)
    gen = _generator(298)
    for _ in range(steps):
        length, reps = _randint(gen, *lens), _randint(gen, *repeats)
        total = length + 1 + length * reps + 1
        seq = torch.randint(0, 2, (length, batch, bits), device=DEV).float()
        x = torch.zeros(total, batch, bits + 2, device=DEV)
        x[:length, :, :bits] = seq
        x[length, :, bits] = 1
        x[length, :, bits + 1] = reps / repeats[1]
        target = torch.zeros(total, batch, bits + 1, device=DEV)
        target[length + 1:total - 1, :, :bits] = seq.repeat(reps, 1, 1)
        target[total - 1, :, bits] = 1
        y = model(x)[length + 1:]
        loss = F.binary_cross_entropy_with_logits(y, target[length + 1:], reduction="none")
        loss = loss.sum(-1).mean()
        del y
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del seq, x, target, loss


WORKLOADS = {
    "kivi_quant_kv_decode": (kivi_quant_kv_decode, 10),
    "fedavg_clients_round_train": (fedavg_clients_round_train, 10),
    "megatron_flat_buffers_train": (megatron_flat_buffers_train, 24),
    "paradigms_picard_sample": (paradigms_picard_sample, 8),
    "mil_wsi_bag_train": (mil_wsi_bag_train, 160),
    "rigl_dynamic_sparse_train": (rigl_dynamic_sparse_train, 300),
    "adaptive_softmax_lm_train": (adaptive_softmax_lm_train, 160),
    "dnc_external_memory_train": (dnc_external_memory_train, 40),
}
