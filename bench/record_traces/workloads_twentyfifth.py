"""The twenty-fifth corpus: eight workloads written on 2026-11-27, held out from every
change to the allocator until recorded. Same conventions as workloads.py: `run(steps)`
builds its models and data on DEV and runs `steps` steps; random weights; seeded. On the
CPU (RECORD_DEVICE=cpu) the models and data are smaller.

Each holds memory in a way the first twenty-four corpora do not: MeanFlow (forward-mode
differentiation by `torch.func.jvp`, a tangent beside every activation); VAR (quantisation at
ten scales, caches grown a scale at a time); MinkUNet (sparse convolutions on LiDAR scans:
kernel maps, gathers per offset, scatter-adds); multi-token prediction (four heads' logits
made and freed one at a time); a once-for-all supernet (four sub-networks a step cut from one
set of weights); BigBird (random key blocks gathered per layer and step); chat serving (prompt
caches copied, conversations' caches kept between turns and evicted least recently used);
PaiNN (forces over a radius graph kept for a double backward).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from workloads import DEV, Gpt
# Earlier corpora's helpers: autocast, generators, choices; an integer in a range, fp16 on the
# GPU; Llama blocks and RMSNorm; the DiT block; a step.
from workloads_thirteenth import CUDA, _amp, _generator, _pick
from workloads_fourteenth import _half, _randint
from workloads_sixteenth import LlamaBlock, RmsNorm
from workloads_twentieth import _DiTBlock
from workloads_twentyfirst import _update


class _AdaBlock(_DiTBlock):
    """The DiT block with a mask and a cache, or attention written out (`manual`: the fused
    kernels have no forward-mode formula)."""
    manual = False

    def forward(self, x, cond, mask=None, cache=None):
        b, t, d = x.shape
        s1, c1, g1, s2, c2, g2 = self.ada(F.silu(cond))[:, None].chunk(6, -1)
        h = self.ln1(x) * (1 + c1) + s1
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        if cache is not None:
            if cache:
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
            cache.update(k=k, v=v)
        y = ((q @ k.mT * q.shape[-1] ** -0.5).softmax(-1) @ v if self.manual
             else F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        x = x + g1 * self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + g2 * self.mlp(self.ln2(x) * (1 + c2) + s2)


# --------------------------------------------------------- MeanFlow, a JVP through a DiT

def _sincos(x, d):
    a = x.float()[:, None] * torch.exp(torch.arange(d // 2, device=x.device) * (-9.21 / (d // 2)))
    return torch.cat([a.sin(), a.cos()], -1)


class _MeanFlowDiT(nn.Module):
    """A DiT of u(z, r, t); fixed 2-D sin-cos positions for any grid."""

    def __init__(self, d, depth, heads, ch, classes, p=2):
        super().__init__()
        self.p, self.d, self.embed = p, d, nn.Conv2d(ch, d, p, p)
        self.times = nn.ModuleList(nn.Sequential(nn.Linear(256, d), nn.SiLU(), nn.Linear(d, d))
                                   for _ in range(2))
        self.label, self.out = nn.Embedding(classes + 1, d), nn.Linear(d, p * p * ch)
        self.blocks = nn.ModuleList(_AdaBlock(d, heads) for _ in range(depth))
        for blk in self.blocks:
            blk.manual = True

    def forward(self, x, r, t, label):
        (b, c, hh, ww), p = x.shape, self.p
        grid = torch.meshgrid(torch.arange(hh // p), torch.arange(ww // p), indexing="ij")
        pos = torch.cat([_sincos(g.flatten(), self.d // 2) for g in grid], -1).to(x.device)
        h = self.embed(x).flatten(2).mT + pos
        cond = self.label(label) + sum(m(_sincos(1000 * s, 256)) for m, s in zip(self.times,
                                                                                 (t, t - r)))
        for blk in self.blocks:
            h = blk(h, cond)
        h = self.out(F.layer_norm(h, (self.d,)))
        return h.view(b, hh // p, ww // p, p, p, c).permute(0, 5, 1, 3, 2, 4).reshape(x.shape)


def meanflow_jvp_dit_train(steps):
    """MeanFlow (Geng et al. 2025) on a DiT-B/2 (d 768, 12 blocks, 12 heads, 4-channel latents,
    1,000 classes): latents in aspect buckets of 32 x 32, 24 x 40, 40 x 24, 48 x 48 and 64 x 64
    (batch 32 to 8; a bucket drawn each step); the guided velocity from an unconditional
    no_grad pass, then u and du/dt together by `torch.func.jvp` along (v, 0, 1), attention
    written out, an adaptively weighted loss. bf16, AdamW; every sixth step 16-64 images
    sampled in one step and in two."""
    torch.manual_seed(251)
    d, depth, heads, buckets, samples = (
        (768, 12, 12, ((32, 32, 32), (24, 40, 34), (40, 24, 34), (48, 48, 14), (64, 64, 8)),
         (16, 64)) if CUDA else (32, 2, 4, ((8, 8, 2), (4, 8, 3), (8, 12, 1)), (1, 2)))
    model = _MeanFlowDiT(d, depth, heads, 4, 1000).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.0)
    amp, gen = _amp(torch.bfloat16), _generator(251)
    for step in range(steps):
        hh, ww, b = _pick(gen, buckets)
        x, e = torch.randn(2, b, 4, hh, ww, device=DEV)
        t, r = torch.sigmoid(torch.randn(2, b, device=DEV) - 0.4).sort(0).values.flip(0)
        r = torch.where(torch.rand(b, device=DEV) < 0.75, t, r)  # t >= r, r = t for 75%
        label = torch.randint(0, 1000, (b,), device=DEV)
        label = label.masked_fill(torch.rand(b, device=DEV) < 0.1, 1000)
        z = (1 - t[:, None, None, None]) * x + t[:, None, None, None] * e
        with torch.no_grad(), torch.autocast(**amp):  # guidance folded into the velocity
            vu = model(z, t, t, torch.full_like(label, 1000)).float()
        v = torch.where((label == 1000)[:, None, None, None], e - x, 2.0 * (e - x) - vu)
        with torch.autocast(**amp):
            u, dudt = torch.func.jvp(lambda z, r, t: model(z, r, t, label), (z, r, t),
                                     (v, torch.zeros_like(r), torch.ones_like(t)))
        err = (u.float() - (v - (t - r)[:, None, None, None] * dudt.float()).detach()).pow(2)
        err = err.flatten(1).mean(1)
        _update(opt, (err / (err.detach() + 1e-3)).mean())
        del x, e, z, vu, v, u, dudt, err
        if step % 6 == 5:
            n, (hh, ww, _) = _randint(gen, *samples), _pick(gen, buckets)
            with torch.no_grad(), torch.autocast(**amp):
                cls, one = torch.randint(0, 1000, (n,), device=DEV), torch.ones(n, device=DEV)
                for ts in ((1.0, 0.0), (1.0, 0.5, 0.0)):
                    x = torch.randn(n, 4, hh, ww, device=DEV)
                    for t1, t0 in zip(ts, ts[1:]):
                        x = x - (t1 - t0) * model(x, t0 * one, t1 * one, cls).float()
                    x.cpu()


# ----------------------------------------------------------- VAR, next-scale prediction

def var_next_scale_train(steps):
    """VAR (Tian et al. 2024), next-scale prediction: VAR-d16 (d 1,024, 16 adaLN blocks, 16
    heads; 310M parameters) over 10 scales (1-16 a side, 680 tokens) of a frozen multi-scale
    VQ-VAE (4,096 codes of 32, 256 x 256 images), batch 32: the residual quantisation on the GPU
    (a positions x 4,096 distance matrix a scale), the block-causal transformer. bf16, AdamW.
    Every fourth step 8-32 images sampled with classifier-free guidance (a doubled batch), each
    scale's tokens run onto the caches, top-900 sampling; then decoded."""
    torch.manual_seed(252)
    d, depth, heads, w, cz, vocab, batch, scales, samples, topk = (
        (1024, 16, 16, (128, 128, 256, 256, 512), 32, 4096, 32, (1, 2, 3, 4, 5, 6, 8, 10, 13, 16),
         (8, 32), 900) if CUDA else (32, 2, 4, (8, 8, 16), 8, 64, 2, (1, 2, 4), (1, 2), 16))
    side, res = scales[-1], scales[-1] * 2 ** (len(w) - 1)
    down = [m for i, o in zip(w, w[1:])
            for m in (nn.GroupNorm(8, i), nn.SiLU(), nn.Conv2d(i, o, 3, 2, 1))]
    up = [m for i, o in zip(w[::-1], w[-2::-1]) for m in (
        nn.GroupNorm(8, i), nn.SiLU(), nn.Upsample(scale_factor=2), nn.Conv2d(i, o, 3, 1, 1))]
    vq = nn.ModuleDict(dict(  # VAR's VQ-VAE in brief: one codebook for all scales, four phi
        enc=nn.Sequential(nn.Conv2d(3, w[0], 3, 1, 1), *down, nn.Conv2d(w[-1], cz, 1)),
        dec=nn.Sequential(nn.Conv2d(cz, w[-1], 3, 1, 1), *up, nn.Conv2d(w[0], 3, 3, 1, 1)),
        codebook=nn.Embedding(vocab, cz), phi=nn.ModuleList(nn.Conv2d(cz, cz, 3, 1, 1)
                                                            for _ in range(4))))
    var = nn.ModuleDict(dict(
        cls=nn.Embedding(1001, d), word=nn.Linear(cz, d), lvl=nn.Embedding(len(scales), d),
        blocks=nn.ModuleList(_AdaBlock(d, heads) for _ in range(depth)),
        head_ada=nn.Linear(d, 2 * d), head=nn.Linear(d, vocab)))
    var.pos = nn.Parameter(0.02 * torch.randn(1, sum(s * s for s in scales), d))
    vq, var = vq.to(DEV).requires_grad_(False).eval(), var.to(DEV)
    level = torch.cat([torch.full((s * s,), k) for k, s in enumerate(scales)]).to(DEV)
    opt = torch.optim.AdamW(var.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.05)
    mask, amp, gen = level[:, None] >= level[None], _amp(torch.bfloat16), _generator(252)

    def lookup(rest):  # the nearest code to each position of (b, cz, s, s): (b, s * s)
        f, cb = rest.float().permute(0, 2, 3, 1).flatten(0, 2), vq["codebook"].weight.float()
        dist = f.pow(2).sum(1, keepdim=True) - 2 * f @ cb.t() + cb.pow(2).sum(1)
        return dist.argmin(1).view(len(rest), -1)

    def residual(idx, k):  # scale k's codes upsampled bicubically to the full map, through phi
        s = math.isqrt(idx.shape[1])
        h = vq["codebook"](idx).view(len(idx), s, s, -1).permute(0, 3, 1, 2)
        h = F.interpolate(h, size=(side, side), mode="bicubic") if s != side else h
        return (0.5 * h + 0.5 * vq["phi"][k * 4 // len(scales)](h)).float()

    def down(f_hat, k):  # the map so far at scale k + 1, as tokens
        return F.interpolate(f_hat, size=(scales[k + 1],) * 2, mode="area").flatten(2).mT

    def run(x, cond, at, mask=None, caches=None):
        x = x + var.pos[:, at] + var["lvl"](level[at])
        for i, blk in enumerate(var["blocks"]):
            x = blk(x, cond, mask, None if caches is None else caches[i])
        shift, scale = var["head_ada"](F.silu(cond))[:, None].chunk(2, -1)
        return var["head"](F.layer_norm(x, x.shape[-1:]) * (1 + scale) + shift).float()

    for step in range(steps):
        img = torch.rand(batch, 3, res, res, device=DEV) * 2 - 1
        label = torch.randint(0, 1000, (batch,), device=DEV)
        label = torch.where(torch.rand(batch, device=DEV) < 0.1, 1000, label)
        with torch.no_grad(), torch.autocast(**amp):
            rest = vq["enc"](img).float()
            f_hat, targets, inputs = torch.zeros_like(rest), [], []
            for k, s in enumerate(scales):
                targets.append(lookup(F.interpolate(rest, size=(s, s), mode="area")))
                h = residual(targets[-1], k)
                f_hat, rest = f_hat + h, rest - h
                inputs += [down(f_hat, k)] if k + 1 < len(scales) else []
        with torch.autocast(**amp):
            cond = var["cls"](label)
            logits = run(torch.cat([cond[:, None], var["word"](torch.cat(inputs, 1))], 1), cond,
                         slice(None), mask)
        _update(opt, F.cross_entropy(logits.flatten(0, 1), torch.cat(targets, 1).flatten(),
                                     label_smoothing=0.1))
        del img, rest, f_hat, h, targets, inputs, cond, logits
        if step % 4 == 1:
            n, at = _randint(gen, *samples), 0
            with torch.no_grad(), torch.autocast(**amp):
                label = torch.randint(0, 1000, (n,), device=DEV)
                cond = var["cls"](torch.cat([label, torch.full_like(label, 1000)]))
                caches, x = [{} for _ in var["blocks"]], cond[:, None]
                f_hat = torch.zeros(n, cz, side, side, device=DEV)
                for k, s in enumerate(scales):
                    lc, lu = run(x, cond, slice(at, at + s * s), caches=caches).chunk(2)
                    at += s * s
                    top = (lu + (1 + 3 * k / (len(scales) - 1)) * (lc - lu)).topk(min(topk, vocab))
                    pick = torch.multinomial(top.values.softmax(-1).flatten(0, 1), 1)
                    f_hat = f_hat + residual(top.indices.flatten(0, 1).gather(1, pick).view(n, -1),
                                             k)
                    if k + 1 < len(scales):
                        x = var["word"](down(f_hat, k)).repeat(2, 1, 1)
                vq["dec"](f_hat).clamp(-1, 1).cpu()
            del caches, f_hat, x, cond


# ------------------------------------------------- MinkUNet, sparse voxel convolutions

def _keys(c, span):  # a voxel's key from its (batch, x, y, z), each in [0, span)
    return ((c[:, 0] * span + c[:, 1]) * span + c[:, 2]) * span + c[:, 3]


def _unkey(k, span):
    return torch.stack([k // span ** 3, k // span ** 2 % span, k // span % span, k % span], 1)


def _kernel_map(c, span, offsets):
    """torchsparse's kernel map of a 3^3 convolution: each offset's (input, output) pairs."""
    sk, order = _keys(c, span).sort()
    ins, outs = [], []
    for o in offsets:
        q = _keys(c + o, span)
        pos = torch.searchsorted(sk, q).clamp_(max=len(sk) - 1)
        hit = sk[pos] == q
        ins.append(order[pos[hit]])
        outs.append(hit.nonzero()[:, 0])
    return torch.cat(ins), torch.cat(outs), [len(i) for i in ins]


def _down(c, span):
    """A stride-2 2^3 convolution's coarse voxels and map, grouped by offset."""
    parent = torch.cat([c[:, :1], (c[:, 1:] - 1) // 2 + 1], 1)
    keys, up = torch.unique(_keys(parent, span), return_inverse=True)
    off = (c[:, 1:] - 1) % 2
    which, order = (off[:, 0] * 4 + off[:, 1] * 2 + off[:, 2]).sort()
    return _unkey(keys, span), (order, up[order], torch.bincount(which, minlength=8).tolist())


class _SpConv(nn.Module):
    """Gather every pair's input, a product per offset, scatter-add; batch norm, ReLU."""

    def __init__(self, i, o, k=27):
        super().__init__()
        self.w, self.bn = nn.Parameter(torch.randn(k, i, o) / (k * i) ** 0.5), nn.BatchNorm1d(o)

    def forward(self, x, kmap, n, relu=True):
        ins, outs, sizes = kmap
        y = torch.cat([g @ w for g, w in zip(x[ins].split(sizes), self.w)])
        y = self.bn(x.new_zeros(n, y.shape[1]).index_add_(0, outs, y))
        return F.relu(y) if relu else y


class _MinkUNet(nn.Module):
    """MinkUNet as SPVNAS's, a residual block a level, four levels down and up."""

    def __init__(self, cin, cs, classes):
        super().__init__()
        pair = lambda i, o: nn.ModuleList([_SpConv(i, o), _SpConv(o, o)])  # noqa: E731
        self.stem, self.cls = pair(cin, cs[0]), nn.Linear(cs[8], classes)
        self.down = nn.ModuleList(_SpConv(cs[i], cs[i + 1], 8) for i in range(4))
        self.enc = nn.ModuleList(pair(cs[i + 1], cs[i + 1]) for i in range(4))
        self.up = nn.ModuleList(_SpConv(cs[4 + i], cs[5 + i], 8) for i in range(4))
        self.dec = nn.ModuleList(pair(cs[5 + i] + cs[3 - i], cs[5 + i]) for i in range(4))

    def forward(self, x, c, span, offsets):
        kmap, n, skips = _kernel_map(c, span, offsets), len(c), []
        x = self.stem[1](self.stem[0](x, kmap, n), kmap, n)
        for down, (a, b) in zip(self.down, self.enc):
            c, dmap = _down(c, span)
            skips.append((x, kmap, n, dmap))
            x = down(x, dmap, len(c))
            kmap, n = _kernel_map(c, span, offsets), len(c)
            x = F.relu(x + b(a(x, kmap, n), kmap, n, relu=False))
        for up, (a, b) in zip(self.up, self.dec):
            sx, kmap, n, (fine, coarse, sizes) = skips.pop()
            x = up(x, (coarse, fine, sizes), n)
            x = b(a(torch.cat([x, sx], 1), kmap, n), kmap, n)
        return self.cls(x)


def _lidar_scan(gen, n, beams):  # n returns (x, y, z, intensity), labels: ground, walls
    elev = torch.deg2rad(-25 + 28 * torch.randint(0, beams, (n,), generator=gen) / (beams - 1))
    az, ground = 2 * math.pi * torch.rand(n, generator=gen), 1.73 / (-elev).sin().clamp_min(0.02)
    rng = torch.minimum(4 + 60 * torch.rand(360, generator=gen)[(az * 57.29).long() % 360], ground)
    xyz = rng[:, None] * torch.stack([elev.cos() * az.cos(), elev.cos() * az.sin(), elev.sin()], 1)
    return (torch.cat([xyz, torch.rand(n, 1, generator=gen)], 1),
            torch.where(rng < ground, (az * 57.29).long() % 18 + 1, 0))


def minkunet_sparse_voxel_train(steps):
    """LiDAR segmentation as SPVNAS/torchsparse train MinkUNet on SemanticKITTI: 2 scans a
    batch of 100k-130k points (64 beams, a new count every step, made on the host), voxelised
    at 5 cm on the GPU; MinkUNet (32-256 channels, 19 classes): each level's kernel map by sort
    and binary search; each convolution one gathered buffer of every pair, a product per
    offset, a scatter-add into the output (sizes set by the scan). fp32, SGD."""
    torch.manual_seed(253)
    cs, points, beams, voxel, span, batch = (
        ((32, 32, 64, 128, 256, 256, 128, 96, 96), (100_000, 130_000), 64, 0.05, 4096, 2) if CUDA
        else ((8, 8, 8, 16, 16, 16, 16, 8, 8), (1000, 1500), 16, 0.5, 512, 2))
    model, gen = _MinkUNet(4, cs, 19).to(DEV), _generator(253)
    opt = torch.optim.SGD(model.parameters(), 0.24, 0.9, weight_decay=1e-4, nesterov=True)
    offsets = F.pad(torch.cartesian_prod(*[torch.arange(-1, 2)] * 3), (1, 0)).to(DEV)
    for _ in range(steps):
        scans = [_lidar_scan(gen, _randint(gen, *points), beams) for _ in range(batch)]
        pts, labels = (torch.cat(z).to(DEV) for z in zip(*scans))
        scan = torch.cat([torch.full((len(y),), k) for k, (_, y) in enumerate(scans)]).to(DEV)
        c = torch.cat([scan[:, None], ((pts[:, :3] + 70) / voxel).long() + 1], 1)
        keys, inv = torch.unique(_keys(c, span), return_inverse=True)
        count = torch.bincount(inv, minlength=len(keys))[:, None]
        feats = pts.new_zeros(len(keys), 4).index_add_(0, inv, pts) / count
        target = labels.new_zeros(len(keys)).scatter_(0, inv, labels)
        _update(opt, F.cross_entropy(model(feats, _unkey(keys, span), span, offsets), target))


# ------------------------------------------- multi-token prediction, heads one at a time

def mtp_sequential_heads_train(steps):
    """Multi-token prediction in Gloeckle et al.'s (2024) memory-saving order: a Llama-style
    trunk of 12 blocks (d 2,048, 16 heads sharing 4 key/value heads, SwiGLU 5,632, vocab 32,000;
    about 1B parameters with the heads), each checkpointed, its output detached; then each of
    4 head blocks (tokens 1-4 ahead) through the shared unembedding, its loss backpropagated
    and its logits freed before the next; then the trunk's backward. Sequence-length warmup:
    16 x 512, then 8 x 1,024, then 4 x 2,048 tokens. bf16 autocast, fused AdamW, clipping."""
    torch.manual_seed(254)
    vocab, d, depth, n, heads, kv, hidden, plan = (
        (32000, 2048, 12, 4, 16, 4, 5632, ((512, 16), (1024, 8), (2048, 4))) if CUDA
        else (100, 32, 2, 3, 4, 2, 64, ((8, 4), (16, 2))))
    with torch.device(DEV):
        emb, norm, unembed = nn.Embedding(vocab, d), RmsNorm(d), nn.Linear(d, vocab, bias=False)
        trunk = nn.ModuleList(LlamaBlock(d, heads, kv, hidden) for _ in range(depth))
        extra = nn.ModuleList(LlamaBlock(d, heads, kv, hidden) for _ in range(n))
    params = list(nn.ModuleList([emb, norm, unembed, trunk, extra]).parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if CUDA else {}))
    hd, amp = d // heads, _amp(torch.bfloat16)
    freqs = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=DEV).float() / hd))
    angles = torch.outer(torch.arange(plan[-1][0], device=DEV).float(), freqs)
    for step in range(steps):
        t, b = plan[min(step * len(plan) // steps, len(plan) - 1)]
        cos, sin = angles[:t].cos(), angles[:t].sin()
        ids = torch.randint(0, vocab, (b, t + n), device=DEV)
        with torch.autocast(**amp):
            z = emb(ids[:, :t])
            for blk in trunk:
                z = checkpoint(blk, z, cos, sin, use_reentrant=False)
        zd = z.detach().requires_grad_()
        for i, blk in enumerate(extra):
            with torch.autocast(**amp):
                logits = unembed(norm(blk(zd, cos, sin))).float().flatten(0, 1)
            (F.cross_entropy(logits, ids[:, i + 1:i + 1 + t].flatten()) / n).backward()
            del logits
        z.backward(zd.grad)
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


# ------------------------------------------- once-for-all supernet, the sandwich rule

class _ElasticMb(nn.Module):
    """OFA's dynamic MBConv: expansion sliced, the depthwise kernel's centre cropped."""

    def __init__(self, i, o, stride, e=6, k=7):
        super().__init__()
        self.stride, self.res, m = stride, stride == 1 and i == o, i * e
        self.expand, self.project = nn.Conv2d(i, m, 1, bias=False), nn.Conv2d(m, o, 1, bias=False)
        self.dw = nn.Conv2d(m, m, k, groups=m, bias=False)
        self.bns = nn.ModuleList(nn.BatchNorm2d(c) for c in (m, m, o))

    def bn(self, n, x):  # OFA's DynamicBatchNorm2d: the first of the statistics and weights
        bn, c = self.bns[n], x.shape[1]
        return F.batch_norm(x, bn.running_mean[:c], bn.running_var[:c], bn.weight[:c],
                            bn.bias[:c], bn.training, bn.momentum, bn.eps)

    def forward(self, x, e, k):
        m, c = x.shape[1] * e, (self.dw.kernel_size[0] - k) // 2
        h = F.hardswish(self.bn(0, F.conv2d(x, self.expand.weight[:m])))
        h = F.conv2d(h, self.dw.weight[:m, :, c:c + k, c:c + k], None, self.stride, k // 2, 1, m)
        h = self.bn(2, F.conv2d(F.hardswish(self.bn(1, h)), self.project.weight[:, :m]))
        return x + h if self.res else h


def ofa_sandwich_supernet_train(steps):
    """A once-for-all supernet (OFA's MobileNetV3 space at width 1.2: stages of 32-192 channels,
    2-4 blocks, expand ratio 3/4/6, kernel 3/5/7; head 1,152 -> 1,536 -> 1,000) trained by
    BigNAS's sandwich rule: each step, on a batch of 256 images, the largest sub-network at 224
    pixels on the labels, the smallest at 160 and two random ones at 160-224 distilled from it,
    gradients accumulated, one SGD step. Every sub-network cuts its weights from the same
    tensors (sliced kernels copied, gradients the whole weight's size). bf16 autocast."""
    torch.manual_seed(255)
    w, strides, head, batch, res = (
        ((24, 32, 48, 96, 136, 192), (2, 2, 2, 1, 2), 1536, 256, (160, 176, 192, 208, 224))
        if CUDA else ((8, 8, 8, 16, 16, 16), (2, 2, 2, 1, 2), 32, 2, (32, 48)))
    net = nn.ModuleDict(dict(
        stem=nn.Sequential(nn.Conv2d(3, w[0], 3, 2, 1, bias=False), nn.BatchNorm2d(w[0]),
                           nn.Hardswish()),
        stages=nn.ModuleList(nn.ModuleList(_ElasticMb(o if j else i, o, 1 if j else s)
                                           for j in range(4))
                             for i, o, s in zip(w, w[1:], strides)),
        final=nn.Sequential(nn.Conv2d(w[-1], 6 * w[-1], 1, bias=False), nn.BatchNorm2d(6 * w[-1]),
                            nn.Hardswish()),
        head=nn.Sequential(nn.Linear(6 * w[-1], head), nn.Hardswish(), nn.Dropout(0.1),
                           nn.Linear(head, 1000)))).to(DEV)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=3e-5)
    amp, gen = _amp(torch.bfloat16), _generator(255)
    for _ in range(steps):
        x = torch.randn(batch, 3, res[-1], res[-1], device=DEV)
        y, teacher = torch.randint(0, 1000, (batch,), device=DEV), None
        for r, arch in [(res[-1], [[(6, 7)] * 4] * 5), (res[0], [[(3, 3)] * 2] * 5)] + [
                (_pick(gen, res), [[(_pick(gen, (3, 4, 6)), _pick(gen, (3, 5, 7)))
                                    for _ in range(_randint(gen, 2, 4))] for _ in range(5)])
                for _ in range(2)]:
            xi = x if r == res[-1] else F.interpolate(x, size=(r, r), mode="bilinear")
            with torch.autocast(**amp):
                h = net["stem"](xi)
                for stage, blocks in zip(net["stages"], arch):
                    for blk, (e, k) in zip(stage, blocks):
                        h = blk(h, e, k)
                logits = net["head"](net["final"](h).mean((2, 3))).float()
            if teacher is None:
                loss, teacher = F.cross_entropy(logits, y, label_smoothing=0.1), logits.detach()
            else:
                loss = F.kl_div(logits.log_softmax(-1), teacher.softmax(-1), reduction="batchmean")
            loss.backward()
            del xi, h, logits, loss
        nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


# ------------------------------------------------------ BigBird, block-sparse attention

def _bigbird_layer(m, x, rand, bs):
    """A post-norm layer with BigBird's ITC attention: the first and last query blocks dense,
    the others over two global, three sliding and `rand`'s random key blocks, gathered."""
    (b, t, d), h, nb = x.shape, len(rand), x.shape[1] // bs
    qb, kb, vb = m["qkv"](x).view(b, nb, bs, 3, h, -1).permute(3, 0, 4, 1, 2, 5)
    mid = torch.arange(1, nb - 1, device=x.device)[:, None]
    idx = torch.cat([torch.zeros_like(mid), torch.full_like(mid, nb - 1), mid - 1, mid, mid + 1], 1)
    idx, heads = torch.cat([idx.expand(h, -1, -1), rand], 2), torch.arange(h, device=x.device)
    kg, vg = (z[:, heads[:, None, None], idx].flatten(3, 4) for z in (kb, vb))
    y = ((qb[:, :, 1:-1] @ kg.mT) * qb.shape[-1] ** -0.5).softmax(-1) @ vg
    ends = F.scaled_dot_product_attention(qb[:, :, [0, -1]].flatten(2, 3), kb.flatten(2, 3),
                                          vb.flatten(2, 3))
    y = torch.cat([ends[:, :, :bs], y.flatten(2, 3), ends[:, :, bs:]], 2)
    x = m["ln1"](x + m["o"](y.transpose(1, 2).reshape(b, t, d)))
    return m["ln2"](x + m["ff"](x))


def bigbird_block_sparse_train(steps):
    """BigBird-RoBERTa-base (12 layers, d 768, 12 heads, vocab 50,358) pretrained by masked
    language modelling on documents of 1,024-4,096 tokens (a new length every step, 16,384
    tokens a batch), attention in blocks of 64: each layer's 3 random key blocks per query block
    and head drawn afresh every step on the host (as HuggingFace's code does in training), keys
    and values gathered per layer; logits at every position. bf16 autocast, AdamW."""
    torch.manual_seed(256)
    vocab, d, depth, heads, bs, r, blocks, budget = (
        (50358, 768, 12, 12, 64, 3, (16, 24, 32, 40, 48, 64), 16384) if CUDA
        else (100, 32, 2, 4, 4, 2, (8, 12), 48))
    with torch.device(DEV):
        tok, pos, ln = nn.Embedding(vocab, d), nn.Embedding(blocks[-1] * bs, d), nn.LayerNorm(d)
        layers = nn.ModuleList(nn.ModuleDict(dict(
            qkv=nn.Linear(d, 3 * d), o=nn.Linear(d, d), ln1=nn.LayerNorm(d), ln2=nn.LayerNorm(d),
            ff=nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))))
            for _ in range(depth))
        head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d))
    params = [p for m in (tok, pos, ln, layers, head) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    amp, gen = _amp(torch.bfloat16), _generator(256)
    for _ in range(steps):
        nb = _pick(gen, blocks)
        ids = torch.randint(5, vocab, (budget // (nb * bs), nb * bs), device=DEV)
        masked = torch.rand(ids.shape, device=DEV) < 0.15
        rand = torch.randint(1, nb - 1, (depth, heads, nb - 2, r), generator=gen).to(DEV)
        with torch.autocast(**amp):
            x = ln(tok(ids.masked_fill(masked, 4)) + pos.weight[:nb * bs])
            for layer, rnd in zip(layers, rand):
                x = _bigbird_layer(layer, x, rnd, bs)
            logits = (head(x) @ tok.weight.t()).float().flatten(0, 1)
        _update(opt, F.cross_entropy(logits, ids.masked_fill(~masked, -100).flatten()))


# ---------------------------------------------- conversations' caches kept and reused

def prefix_cache_multiturn_serve(steps):
    """Chat serving that keeps key/value caches between requests as HuggingFace's cache reuse
    does (4 system prompts of 512-1,536 tokens prefilled once, copied into each new
    conversation; a conversation's cache kept and extended turn after turn): a 24-layer GPT (d
    2,048, 16 heads; fp16, inference mode); 6 requests a round, a third new, the rest a live
    conversation's next turn: 32-256 tokens prefilled, 16-64 decoded (caches concatenated on);
    past 16k cached tokens the least recently used evicted, past 8k tokens one closed."""
    torch.manual_seed(257)
    vocab, d, layers, heads, systems, turns, news, budget, ctx, per = (
        (32000, 2048, 24, 16, (512, 1536), (32, 256), (16, 64), 16384, 8192, 6) if CUDA
        else (100, 32, 2, 4, (8, 16), (2, 6), (2, 4), 96, 64, 3))
    with torch.device(DEV):
        model = _half(Gpt(vocab, d, layers, heads, ctx)).eval()
    gen, chats, prompts = _generator(257), {}, []  # chats: id -> (caches, length), oldest first
    with torch.inference_mode():
        for _ in range(4):
            prompts.append([{} for _ in range(layers)])
            model(torch.randint(0, vocab, (1, _randint(gen, *systems)), device=DEV), prompts[-1])
        for step in range(steps):
            for r in range(per):
                if not chats or _randint(gen, 0, 2) == 0:
                    cid, caches = (step, r), [{k: t.clone() for k, t in c.items()}
                                              for c in _pick(gen, prompts)]
                    n = caches[0]["k"].shape[2]
                else:
                    cid = _pick(gen, list(chats))
                    caches, n = chats.pop(cid)
                turn, new = _randint(gen, *turns), _randint(gen, *news)
                tok = model(torch.randint(0, vocab, (1, turn), device=DEV), caches, n)[:, -1:]
                for i in range(new):
                    tok = model(tok.argmax(-1), caches, n + turn + i)[:, -1:]
                if n + turn + new + turns[1] + news[1] <= ctx:
                    chats[cid] = (caches, n + turn + new)
                while sum(m for _, m in chats.values()) > budget:
                    del chats[next(iter(chats))]
                del caches, tok


# -------------------------------------------------- PaiNN, forces by a double backward

def _painn(m, z, pos, i, j, mol, nmol, f, cutoff=5.0):
    """PaiNN's energies (Schütt et al. 2021, as SchNetPack's): scalar and vector features
    per atom, messages over the edges, gated equivariant updates; summed per molecule."""
    vec = pos[j] - pos[i]
    dist = vec.norm(dim=1, keepdim=True)
    freq = torch.arange(1, m["filt"][0].in_features + 1, device=pos.device) * math.pi / cutoff
    basis = torch.sin(freq * dist) / dist * (0.5 * torch.cos(math.pi * dist / cutoff) + 0.5)
    unit, s, v = (vec / dist)[:, :, None], m["embed"](z), pos.new_zeros(len(z), 3, f)
    for phi, filt, uv, upd in zip(m["phi"], m["filt"], m["uv"], m["upd"]):
        ds, dvv, dvs = (phi(s)[j] * filt(basis)).split(f, 1)
        s = s.index_add(0, i, ds)
        v = v.index_add(0, i, dvv[:, None] * v[j] + dvs[:, None] * unit)
        u, w = uv(v).split(f, 2)
        avv, asv, ass = upd(torch.cat([s, torch.sqrt(w.pow(2).sum(1) + 1e-8)], 1)).split(f, 1)
        v, s = v + avv[:, None] * u, s + asv * (u * w).sum(1) + ass
    return pos.new_zeros(nmol).index_add(0, mol, m["out"](s)[:, 0])


def painn_force_field_train(steps):
    """A PaiNN interatomic potential (128 features, 3 interaction blocks, 20 radial functions,
    cutoff 5 Å) trained on energies and forces as SchNetPack does: 128 molecules of 10-80 atoms
    a batch (new atom and edge counts every step; about 60k edges), the radius graph from a
    distance matrix on the GPU; forces the energy's gradient in the positions with
    `create_graph`, the loss (0.01 energy + 0.99 forces) backpropagated through it (a double
    backward over every edge tensor). fp32, AdamW."""
    torch.manual_seed(258)
    f, depth, rbf, batch, sizes = (128, 3, 20, 128, (10, 80)) if CUDA else (16, 2, 8, 4, (3, 8))
    mlp = lambda i: nn.Sequential(nn.Linear(i, f), nn.SiLU(), nn.Linear(f, 3 * f))  # noqa: E731
    model = nn.ModuleDict(dict(
        embed=nn.Embedding(100, f), phi=nn.ModuleList(mlp(f) for _ in range(depth)),
        upd=nn.ModuleList(mlp(2 * f) for _ in range(depth)),
        filt=nn.ModuleList(nn.Linear(rbf, 3 * f) for _ in range(depth)),
        uv=nn.ModuleList(nn.Linear(f, 2 * f, bias=False) for _ in range(depth)),
        out=nn.Sequential(nn.Linear(f, f // 2), nn.SiLU(), nn.Linear(f // 2, 1)))).to(DEV)
    opt, gen = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01), _generator(258)
    elements = torch.tensor([1, 1, 1, 6, 6, 7, 8, 9, 16, 17])
    for _ in range(steps):
        n = torch.randint(sizes[0], sizes[1] + 1, (batch,), generator=gen)
        mol = torch.repeat_interleave(torch.arange(batch), n)
        pos = torch.randn(len(mol), 3, generator=gen) * (0.9 * n.float() ** (1 / 3))[mol, None]
        z = elements[torch.randint(0, 10, (len(mol),), generator=gen)].to(DEV)
        pos, mol = pos.to(DEV).requires_grad_(), mol.to(DEV)
        adj = (torch.cdist(pos.detach(), pos.detach()) < 5.0) & (mol[:, None] == mol[None])
        i, j = adj.fill_diagonal_(False).nonzero(as_tuple=True)
        energy = _painn(model, z, pos, i, j, mol, batch, f)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
        _update(opt, 0.01 * F.mse_loss(energy, torch.randn_like(energy))
                + 0.99 * F.mse_loss(forces, torch.randn_like(forces)))
        del z, pos, mol, adj, i, j, energy, forces


WORKLOADS = {
    "meanflow_jvp_dit_train": (meanflow_jvp_dit_train, 30),
    "var_next_scale_train": (var_next_scale_train, 20),
    "minkunet_sparse_voxel_train": (minkunet_sparse_voxel_train, 60),
    "mtp_sequential_heads_train": (mtp_sequential_heads_train, 24),
    "ofa_sandwich_supernet_train": (ofa_sandwich_supernet_train, 40),
    "bigbird_block_sparse_train": (bigbird_block_sparse_train, 40),
    "prefix_cache_multiturn_serve": (prefix_cache_multiturn_serve, 8),
    "painn_force_field_train": (painn_force_field_train, 80),
}
