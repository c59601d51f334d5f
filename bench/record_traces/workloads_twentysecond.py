"""The twenty-second corpus: eight workloads written on 2026-11-27, held out from every
change to the allocator until recorded. Same conventions as workloads.py: `run(steps)`
builds its models and data on DEV and runs `steps` steps; random weights; seeded. On the
CPU (RECORD_DEVICE=cpu) the models and data are smaller.

Each holds memory in a way the first twenty-one corpora do not: GPTQ (a block's inputs
for a calibration set in two buffers swapped block by block, Hessians, column-sized
temporaries by the thousand); DARTS (every candidate's activations on every edge, five
passes a step); TimeSformer (tokens reshaped between time and space sequences); HiFi-GAN
(eight discriminators' feature maps of real and generated audio kept); BLIP-2 (a frozen
language model differentiated for its inputs only); AlphaZero (search trees in tensors
grown a node a wave, leaves evaluated in batches of a varying count); SAM2 (a FIFO bank of
frame memories); ColBERT (every query token against every token of every document).
"""
import math
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

from workloads import DEV, Gpt
# Earlier corpora's helpers: autocast, generators, fp16, an MLP, layers, towers, a step.
from workloads_thirteenth import CUDA, _amp, _generator
from workloads_fourteenth import Attn, SamEncoder, TwoWayBlock, _half, _mlp, _randint
from workloads_fifteenth import VisionTower, WideBlock, _conv_bn
from workloads_eleventh import PackedBlock
from workloads_twentieth import _CrossAttend
from workloads_twentyfirst import _update


# ------------------------------------------------------------ GPTQ, block by block

def _gptq(w, h, bits=4, group=128, damp=0.01):
    """GPTQ of `w` (out, in; fp32, changed in place) given its inputs' Hessian `h`: the
    columns quantised one at a time in blocks of `group` (a scale and zero per row and
    block), each one's error spread over the later ones by the inverse's Cholesky factor."""
    maxq = 2 ** bits - 1
    h = h + damp * h.diagonal().mean() * torch.eye(len(h), device=h.device)
    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    q = torch.empty_like(w)
    for i1 in range(0, w.shape[1], group):
        i2 = min(i1 + group, w.shape[1])
        w1, err, h1 = w[:, i1:i2].clone(), torch.empty_like(w[:, i1:i2]), hinv[i1:i2, i1:i2]
        lo, hi = w1.amin(1).clamp(max=0), w1.amax(1).clamp(min=0)
        scale = ((hi - lo) / maxq).clamp(min=1e-8)
        zero = (-lo / scale).round()
        for i in range(i2 - i1):
            c = (w1[:, i] / scale).round_().add_(zero).clamp_(0, maxq).sub_(zero).mul_(scale)
            q[:, i1 + i] = c
            e = (w1[:, i] - c).div_(h1[i, i])
            w1[:, i:].addr_(e, h1[i, i:], alpha=-1)
            err[:, i] = e
        w[:, i2:].sub_(err @ hinv[i1:i2, i2:])
    return q


def gptq_calibrate_quantize(steps):
    """GPTQ (4 bits, groups of 128) of a GPT of `steps` blocks (d 1,024, vocab 32,000,
    fp16), a block a step: its inputs for 128 calibration sequences of 2,048 tokens kept
    (512 MiB), a Hessian (fp32, 1,024^2 or 4,096^2) per linear layer accumulated by hooks
    over chunks of 4 sequences, each weight quantised column by column, the block run
    again to make the next block's inputs; at the end the loss on the set. no_grad."""
    torch.manual_seed(221)
    if CUDA:
        vocab, d, heads, samples, t, chunk = 32000, 1024, 16, 128, 2048, 4
    else:
        vocab, d, heads, samples, t, chunk = 100, 32, 4, 8, 16, 4
    model = _half(Gpt(vocab, d, steps, heads, t).to(DEV)).eval()
    ids = torch.randint(0, vocab, (samples, t), device=DEV)
    with torch.no_grad():
        inps = model.tok(ids) + model.pos(torch.arange(t, device=DEV))
        outs = torch.empty_like(inps)
        for blk in model.blocks:
            linears = [blk.qkv, blk.proj, blk.fc1, blk.fc2]
            hs = {m: torch.zeros(m.in_features, m.in_features, device=DEV) for m in linears}

            def accumulate(mod, inp, out):
                x = inp[0].reshape(-1, mod.in_features).float()
                hs[mod].addmm_(x.t(), x, alpha=2 / (samples * t))

            hooks = [m.register_forward_hook(accumulate) for m in linears]
            for j in range(0, samples, chunk):
                blk(inps[j:j + chunk])
            for hook in hooks:
                hook.remove()
            for m in linears:
                m.weight.copy_(_gptq(m.weight.float(), hs.pop(m)))
            for j in range(0, samples, chunk):
                outs[j:j + chunk] = blk(inps[j:j + chunk])
            inps, outs = outs, inps
        logits = (model.head(model.ln(x[:, :-1])).float() for x in inps.split(chunk))
        sum(F.cross_entropy(z.flatten(0, 1), y[:, 1:].flatten())
            for z, y in zip(logits, ids.split(chunk))).item()


# ------------------------------------------------------------- DARTS, second order

def _rcb(c, *layers):
    """`layers` between a ReLU and a non-affine batch norm of `c` channels."""
    return nn.Sequential(nn.ReLU(), *layers, nn.BatchNorm2d(c, affine=False))


def _candidates(c, s):
    """DARTS's candidates on an edge of stride `s`: 3x3, separable and dilated 3x3
    convolutions, max and average pooling, skip; zero has a weight and no output."""
    return nn.ModuleList([
        _rcb(c, nn.Conv2d(c, c, 3, s, 1, bias=False)),
        *(_rcb(c, nn.Conv2d(c, c, 3, s, r, r, groups=c, bias=False),
               nn.Conv2d(c, c, 1, bias=False)) for r in (1, 2)),
        nn.Sequential(nn.MaxPool2d(3, s, 1), nn.BatchNorm2d(c, affine=False)),
        nn.Sequential(nn.AvgPool2d(3, s, 1, count_include_pad=False),
                      nn.BatchNorm2d(c, affine=False)),
        nn.Identity() if s == 1 else _rcb(c, nn.Conv2d(c, c, 1, 2, bias=False))])


class _Supernet(nn.Module):
    """DARTS's supernet: `layers` cells (reductions at a third and two thirds), a node the
    sum over every earlier state of all candidates weighted by softmaxed `alphas`."""

    def __init__(self, c, layers, nodes, classes=10):
        super().__init__()
        self.nodes, self.reductions = nodes, (layers // 3, 2 * layers // 3)
        self.stem = _conv_bn(3, 3 * c)
        self.cells, c_pp, c_p, reduce_prev = nn.ModuleList(), 3 * c, 3 * c, False
        for i in range(layers):
            reduce = i in self.reductions
            c = 2 * c if reduce else c
            pre = nn.ModuleList([_rcb(c, nn.Conv2d(c_pp, c, 1, 1 + reduce_prev, bias=False)),
                                 _rcb(c, nn.Conv2d(c_p, c, 1, bias=False))])
            edges = nn.ModuleList(_candidates(c, 2 if reduce and j < 2 else 1)
                                  for k in range(nodes) for j in range(2 + k))
            self.cells.append(nn.ModuleDict(dict(pre=pre, edges=edges)))
            c_pp, c_p, reduce_prev = c_p, nodes * c, reduce
        self.head = nn.Linear(c_p, classes)

    def forward(self, x, alphas):
        s0 = s1 = self.stem(x)
        for i, cell in enumerate(self.cells):
            edges = iter(zip(cell["edges"], alphas[i in self.reductions].softmax(-1)))
            states = [cell["pre"][0](s0), cell["pre"][1](s1)]
            for _ in range(self.nodes):
                states.append(sum(w * op(h) for h, (ops, ws) in zip(states, edges)
                                  for w, op in zip(ws, ops)))
            s0, s1 = s1, torch.cat(states[2:], 1)
        return self.head(s1.mean((2, 3)))


def darts_bilevel_search_train(steps):
    """DARTS (second order): a supernet of 5 cells (16 channels, 3 nodes, 9 edges of 7
    candidates), a training and a validation batch of 64 32x32 images a step: a virtual
    SGD step, the validation loss differentiated through it, two passes with the weights
    moved by +-eps (a Hessian-vector product), Adam on the architecture; SGD. fp32."""
    torch.manual_seed(222)
    if CUDA:
        c, layers, nodes, batch, side = 16, 5, 3, 64, 32
    else:
        c, layers, nodes, batch, side = 4, 3, 2, 2, 8
    net = _Supernet(c, layers, nodes).to(DEV)
    edges = nodes * (nodes + 3) // 2
    alphas = [(1e-3 * torch.randn(edges, 7, device=DEV)).requires_grad_() for _ in range(2)]
    lr, wd = 0.025, 3e-4
    w_opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=wd)
    a_opt = torch.optim.Adam(alphas, lr=3e-4, betas=(0.5, 0.999), weight_decay=1e-3)
    names, params = zip(*net.named_parameters())

    def loss_of(weights, x, y):
        return F.cross_entropy(functional_call(net, dict(zip(names, weights)), (x, alphas)), y)

    for _ in range(steps):
        xt, xv = (torch.randn(batch, 3, side, side, device=DEV) for _ in range(2))
        yt, yv = (torch.randint(0, 10, (batch,), device=DEV) for _ in range(2))
        grads = torch.autograd.grad(loss_of(params, xt, yt), params)
        with torch.no_grad():  # SGD's step, momentum and weight decay included
            virtual = [(p - lr * (g + wd * p + 0.9 * w_opt.state.get(p, {}).get(
                "momentum_buffer", 0))).requires_grad_() for p, g in zip(params, grads)]
        da, dr, *dw = torch.autograd.grad(loss_of(virtual, xv, yv), [*alphas, *virtual])
        del grads, virtual
        eps = float(0.01 / torch.cat([v.flatten() for v in dw]).norm())
        hvp = [torch.autograd.grad(loss_of([p.detach() + s * v for p, v in zip(params, dw)],
                                           xt, yt), alphas) for s in (eps, -eps)]
        for a, g, gp, gm in zip(alphas, (da, dr), *hvp):
            a.grad = g - lr * (gp - gm) / (2 * eps)
        a_opt.step()
        a_opt.zero_grad(set_to_none=True)
        del da, dr, dw, hvp
        _update(w_opt, F.cross_entropy(net(xt, [a.detach() for a in alphas]), yt))


# --------------------------------------------------- TimeSformer, divided attention

def _divided(blk, x, t):
    """TimeSformer's block over a class token and frame-major patches: attention over time
    (each position's frames), then over space (each frame's patches and the class token)."""
    b, _, d = x.shape
    cls, p, n = x[:, :1], x[:, 1:], (x.shape[1] - 1) // t
    h = blk["ln_t"](p).view(b, t, n, d).transpose(1, 2).reshape(b * n, t, d)
    h = blk["time"](h, h, h).view(b, n, t, d).transpose(1, 2).reshape(b, t * n, d)
    p = p + blk["time_fc"](h)
    h = torch.cat([cls.expand(-1, t, -1).reshape(b * t, 1, d), p.reshape(b * t, n, d)], 1)
    h = blk["ln_s"](h)
    h = blk["space"](h, h, h)
    cls = cls + h[:, :1].reshape(b, t, d).mean(1, keepdim=True)
    x = torch.cat([cls, p + h[:, 1:].reshape(b, t * n, d)], 1)
    return x + blk["mlp"](blk["ln_m"](x))


def timesformer_video_train(steps):
    """TimeSformer (ViT-B: d 768, 12 blocks, 400 classes), divided space-time attention,
    trained on 2 clips of 8-32 frames (a new count every step) of 224x224 (up to 6,273
    tokens a clip), the tokens reshaped between (clip x patch, frames) and (clip x frame,
    patches) in every block; bf16 autocast, AdamW."""
    torch.manual_seed(223)
    if CUDA:
        d, depth, heads, batch, side, frames = 768, 12, 12, 2, 224, (8, 32)
    else:
        d, depth, heads, batch, side, frames = 32, 2, 4, 1, 32, (2, 4)
    model = nn.ModuleDict(dict(
        patch=nn.Conv2d(3, d, 16, 16), pos=nn.Embedding((side // 16) ** 2 + 1, d),
        time=nn.Embedding(frames[1], d), ln=nn.LayerNorm(d), head=nn.Linear(d, 400),
        blocks=nn.ModuleList(nn.ModuleDict(dict(
            ln_t=nn.LayerNorm(d), ln_s=nn.LayerNorm(d), ln_m=nn.LayerNorm(d),
            time=Attn(d, heads), space=Attn(d, heads), time_fc=nn.Linear(d, d),
            mlp=nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))))
            for _ in range(depth)))).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
    gen = _generator(223)
    for _ in range(steps):
        t = _randint(gen, *frames)
        clip = torch.randn(batch * t, 3, side, side, device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            p = model["patch"](clip).flatten(2).transpose(1, 2) + model["pos"].weight[1:]
            p = (p.unflatten(0, (batch, t)) + model["time"].weight[:t, None]).flatten(1, 2)
            x = torch.cat([model["pos"].weight[:1].expand(batch, 1, -1), p], 1)
            for blk in model["blocks"]:
                x = _divided(blk, x, t)
            logits = model["head"](model["ln"](x[:, 0]))
        labels = torch.randint(0, 400, (batch,), device=DEV)
        _update(opt, F.cross_entropy(logits.float(), labels))
        del clip, p, x, logits


# ------------------------------------------------------ HiFi-GAN, eight discriminators

def _discriminate(convs, y, period, pool):
    """A HiFi-GAN discriminator's scores and feature maps: 1-D convolutions over the wave
    folded into `period` columns ((k, 1) kernels along each) or pooled `pool` times."""
    for _ in range(pool):
        y = F.avg_pool1d(y, 4, 2, 2)
    b, _, t = y.shape
    y = F.pad(y, (0, -t % period), "reflect").view(b, -1, period).transpose(1, 2)
    y, feats = y.reshape(b * period, 1, -1), []
    for i, conv in enumerate(convs):
        y = conv(y) if i == len(convs) - 1 else F.leaky_relu(conv(y), 0.1)
        feats.append(y)
    return y.flatten(1), feats


def hifigan_multidisc_train(steps):
    """HiFi-GAN: the generator (V1: 512 channels, up-sampling 8, 8, 2, 2, residual blocks
    of kernels 3, 7, 11, weight norm) from log-mels (STFT of 1,024, hop 256) of 16 clips of
    8,192-16,384 samples (a new length every step); five period and three scale
    discriminators trained first; then the generator on mel L1, adversarial and
    feature-matching losses (every feature map of real and generated audio). fp32."""
    torch.manual_seed(224)
    if CUDA:
        mels, c, rates, w, batch, frames = 80, 512, (8, 8, 2, 2), 32, 16, (32, 64)
    else:
        mels, c, rates, w, batch, frames = 8, 16, (4, 4), 4, 2, (4, 6)
    hop, wn = math.prod(rates), nn.utils.parametrizations.weight_norm
    n_fft, fbank = 4 * hop, torch.rand(mels, 2 * hop + 1, device=DEV) / (4 * hop)
    window = torch.hann_window(n_fft, device=DEV)
    g_net = nn.ModuleDict(dict(
        pre=wn(nn.Conv1d(mels, c, 7, 1, 3)), post=wn(nn.Conv1d(c >> len(rates), 1, 7, 1, 3)),
        ups=nn.ModuleList(wn(nn.ConvTranspose1d(c >> i, c >> i + 1, 2 * r, r, r // 2))
                          for i, r in enumerate(rates)),
        res=nn.ModuleList(nn.ModuleList(nn.ModuleList(
            wn(nn.Conv1d(c >> i + 1, c >> i + 1, k, 1, r * (k - 1) // 2, r))
            for r in (1, 1, 3, 1, 5, 1)) for k in (3, 7, 11)) for i in range(len(rates)))))
    mpd = ((1, w, 4 * w, 16 * w, 32 * w, 32 * w, 1), [(5, 3, 1)] * 4 + [(5, 1, 1), (3, 1, 1)])
    msd = ((1, 4 * w, 4 * w, 8 * w, 16 * w, 32 * w, 32 * w, 32 * w, 1), [(15, 1, 1), (
        41, 2, 4), (41, 2, 16), (41, 4, 16), (41, 4, 16), (41, 1, 16), (5, 1, 1), (3, 1, 1)])
    kinds = [(p, 0) for p in (2, 3, 5, 7, 11)] + [(1, k) for k in range(3)]
    discs = nn.ModuleList(nn.ModuleList(
        nn.Conv1d(i, o, k, s, k // 2, groups=g) for i, o, (k, s, g) in zip(ch, ch[1:], sp))
        for ch, sp in [mpd] * 5 + [msd] * 3)
    opt_g = torch.optim.AdamW(g_net.to(DEV).parameters(), lr=2e-4, betas=(0.8, 0.99))
    opt_d = torch.optim.AdamW(discs.to(DEV).parameters(), lr=2e-4, betas=(0.8, 0.99))
    gen = _generator(224)

    def log_mel(y):
        y = F.pad(y, ((n_fft - hop) // 2,) * 2, "reflect").squeeze(1)
        spec = torch.stft(y, n_fft, hop, window=window, center=False, return_complex=True)
        return (fbank @ spec.abs()).clamp(min=1e-5).log()

    def generate(mel):
        x = g_net["pre"](mel)
        for up, blocks in zip(g_net["ups"], g_net["res"]):
            x, outs = up(F.leaky_relu(x, 0.1)), []
            for convs in blocks:
                y = x
                for a, b in zip(convs[::2], convs[1::2]):
                    y = y + b(F.leaky_relu(a(F.leaky_relu(y, 0.1)), 0.1))
                outs.append(y)
            x = sum(outs) / 3
        return torch.tanh(g_net["post"](F.leaky_relu(x)))

    for _ in range(steps):
        audio = torch.rand(batch, 1, hop * _randint(gen, *frames), device=DEV) * 2 - 1
        mel = log_mel(audio)
        fake = generate(mel)
        loss_d = sum(((1 - _discriminate(d, audio, *k)[0]) ** 2).mean()
                     + (_discriminate(d, fake.detach(), *k)[0] ** 2).mean()
                     for d, k in zip(discs, kinds))
        _update(opt_d, loss_d)
        loss_g = 45 * F.l1_loss(log_mel(fake), mel)
        for d, k in zip(discs, kinds):
            (_, real), (score, feats) = _discriminate(d, audio, *k), _discriminate(d, fake, *k)
            loss_g = loss_g + ((1 - score) ** 2).mean() + 2 * sum(
                F.l1_loss(f, r) for f, r in zip(feats, real))
        _update(opt_g, loss_g)
        opt_d.zero_grad(set_to_none=True)
        del audio, mel, fake, loss_d, loss_g, real, score, feats


# ------------------------------------------------- BLIP-2, a Q-Former between frozen models

def blip2_qformer_frozen_train(steps):
    """BLIP-2's generative stage: a frozen ViT-L (24 layers, 224-pixel images; fp16,
    no_grad), a trainable Q-Former (32 queries of d 768, 12 blocks, cross-attention every
    other; bf16 autocast) whose outputs are prepended to the caption in a frozen fp16
    decoder (24 blocks, d 2,048) differentiated for its inputs only. 32 images a step,
    captions of 16-64 tokens (a new length every step); AdamW."""
    torch.manual_seed(225)
    if CUDA:
        vd, vl, vh, d, ql, qh, nq, ld, ll, lh, vocab, batch, caps = (
            1024, 24, 16, 768, 12, 12, 32, 2048, 24, 16, 32000, 32, (16, 64))
    else:
        vd, vl, vh, d, ql, qh, nq, ld, ll, lh, vocab, batch, caps = (
            32, 1, 4, 32, 2, 4, 4, 32, 2, 4, 100, 2, (3, 6))
    vit = _half(VisionTower(vd, vl, vh).to(DEV)).eval().requires_grad_(False)
    lm = _half(Gpt(vocab, ld, ll, lh, nq + caps[1]).to(DEV)).requires_grad_(False)
    qf = nn.ModuleDict(dict(
        query=nn.Embedding(nq, d), selfs=nn.ModuleList(PackedBlock(d, qh) for _ in range(ql)),
        cross=nn.ModuleList(_CrossAttend(d, vd, qh) for _ in range(ql // 2)),
        proj=nn.Linear(d, ld))).to(DEV)
    opt = torch.optim.AdamW(qf.parameters(), lr=1e-4)
    gen = _generator(225)
    for _ in range(steps):
        t = _randint(gen, *caps)
        images = torch.rand(batch, 3, 224, 224, device=DEV, dtype=lm.tok.weight.dtype)
        ids = torch.randint(0, vocab, (batch, t), device=DEV)
        with torch.no_grad():
            feats = F.layer_norm(vit(images), (vd,))
        with torch.autocast(**_amp(torch.bfloat16)):
            q = qf["query"].weight.expand(batch, -1, -1)
            for i, blk in enumerate(qf["selfs"]):
                q = blk(q, None)
                q = qf["cross"][i // 2](q, feats) if i % 2 == 0 else q
            prefix = qf["proj"](q)
        x = torch.cat([prefix.to(lm.tok.weight.dtype), lm.tok(ids)], 1) + lm.pos.weight[:nq + t]
        for blk in lm.blocks:
            x = blk(x)
        logits = lm.head(lm.ln(x[:, nq - 1:-1]))
        _update(opt, F.cross_entropy(logits.float().flatten(0, 1), ids.flatten()))
        del images, ids, feats, q, prefix, x, logits


# ------------------------------------------------------------ AlphaZero, batched MCTS

def _play(boards, moves, kernels):
    """Boards (n, cells; int8, the player to move 1) after that player takes `moves`, from
    the other side; whether the move made a line; whether the board is full."""
    new = boards.clone()
    new[torch.arange(len(moves), device=DEV), moves] = 1
    k, side = kernels.shape[-1], int(boards.shape[1] ** 0.5)
    lines = F.conv2d((new == 1).float().view(-1, 1, side, side), kernels, padding=k - 1)
    return -new, (lines >= k).flatten(1).any(1), (new != 0).all(1)


def _search(net, root, sims, kernels, c_puct=1.5):
    """Batched MCTS, the trees in tensors grown by a node a tree each wave: each descended
    by PUCT to a new edge or a finished game, the new unfinished positions evaluated
    together (a count that varies), values backed up; the roots' visits and values."""
    b, a = root.shape
    ar, zeros = torch.arange(b, device=DEV), torch.zeros(b, a, device=DEV)
    noise = torch.distributions.Dirichlet(torch.full((b, a), 0.3, device=DEV)).sample()
    prior = net(root)[0].float().masked_fill(root != 0, -1e9).softmax(-1) * 0.75 + noise * 0.25
    tree = dict(board=root, child=zeros.long() - 1, visits=zeros, value_sum=zeros, prior=prior,
                done=ar < 0, done_value=zeros[:, 0])
    tree = {key: t[:, None].clone() for key, t in tree.items()}
    for n in range(1, sims + 1):
        node, live, path = torch.zeros_like(ar), ar >= 0, []
        while True:
            live = live & ~tree["done"][ar, node]
            v = tree["visits"][ar, node]
            score = tree["value_sum"][ar, node] / v.clamp(min=1) + c_puct * tree["prior"][
                ar, node] * (v.sum(1, keepdim=True) + 1).sqrt() / (1 + v)
            act = score.masked_fill(tree["board"][ar, node] != 0, -1e9).argmax(1)
            path.append((node, act, live))
            nxt = tree["child"][ar, node, act]
            live = live & (nxt >= 0)
            if not live.any():
                break
            node = torch.where(live, nxt, node)
        new, won, full = _play(tree["board"][ar, node], act, kernels)
        expand = ~tree["done"][ar, node]
        value = torch.where(expand, torch.where(won, -1.0, 0.0), tree["done_value"][ar, node])
        prior = torch.zeros_like(zeros)
        idx = (expand & ~won & ~full).nonzero().squeeze(1)
        if len(idx):
            logits, v = net(new[idx])
            value[idx] = v.float()
            prior[idx] = logits.float().masked_fill(new[idx] != 0, -1e9).softmax(-1)
        tree["child"][ar, node, act] = torch.where(expand, n, tree["child"][ar, node, act])
        rows = dict(board=new, child=zeros.long() - 1, visits=zeros, value_sum=zeros,
                    prior=prior, done=won | full, done_value=value)
        tree = {key: torch.cat([t, rows[key][:, None]], 1) for key, t in tree.items()}
        value = -value
        for nd, ac, taken in reversed(path):
            tree["visits"][ar, nd, ac] += taken.float()
            tree["value_sum"][ar, nd, ac] += taken.float() * value
            value = torch.where(taken, -value, value)
    return tree["visits"][:, 0], tree["value_sum"][:, 0].sum(1) / tree["visits"][:, 0].sum(1)


def alphazero_mcts_selfplay_infer(steps):
    """AlphaZero self-play of 512 games of four in a row on a 9x9 board (a residual net of
    10 blocks of 128 channels; bf16 autocast): each step every running game makes 4 moves
    after a 16-wave batched MCTS (no_grad; an ended game sits out the step), then a
    training step (policy on the visit counts, value on the roots' values), AdamW."""
    torch.manual_seed(226)
    if CUDA:
        side, line, c, blocks, games, moves, sims = 9, 4, 128, 10, 512, 4, 16
    else:
        side, line, c, blocks, games, moves, sims = 5, 3, 8, 1, 4, 2, 3
    cells = side * side
    model = nn.ModuleDict(dict(
        trunk=nn.Sequential(_conv_bn(2, c), *(WideBlock(c, c, 1) for _ in range(blocks))),
        policy=nn.Sequential(nn.Conv2d(c, 2, 1), nn.Flatten(), nn.Linear(2 * cells, cells)),
        value=nn.Sequential(nn.Conv2d(c, 1, 1), nn.Flatten(), nn.ReLU(), nn.Linear(cells, 1),
                            nn.Flatten(0), nn.Tanh()))).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    eye = torch.eye(line, device=DEV)
    row = F.pad(torch.ones_like(eye[:1]), (0, 0, 0, line - 1))
    kernels = torch.stack([row, row.t(), eye, eye.flip(1)])[:, None]
    boards = torch.zeros(games, cells, dtype=torch.int8, device=DEV)

    def net(b):
        x = model["trunk"](torch.stack([b == 1, b == -1], 1).float().unflatten(2, (side, side)))
        return model["policy"](x), model["value"](x)

    for _ in range(steps):
        ended, data = torch.zeros(games, dtype=torch.bool, device=DEV), []
        model.eval()
        with torch.no_grad(), torch.autocast(**_amp(torch.bfloat16)):
            for _ in range(moves):
                running = (~ended).nonzero().squeeze(1)
                counts, value = _search(net, boards[running], sims, kernels)
                pi = counts / counts.sum(1, keepdim=True)
                data.append((boards[running], pi, value))
                new, won, full = _play(boards[running], torch.multinomial(pi, 1)[:, 0], kernels)
                boards[running], ended[running] = new, won | full
        boards[ended] = 0
        model.train()
        x, pi, z = (torch.cat(t) for t in zip(*data))
        with torch.autocast(**_amp(torch.bfloat16)):
            logits, v = net(x)
        loss = -(pi * logits.float().log_softmax(-1)).sum(1).mean() + F.mse_loss(v.float(), z)
        _update(opt, loss)
        del data, x, pi, z, logits, v, loss


# ------------------------------------------------------ SAM2, a memory bank per video

def sam2_memory_bank_track_infer(steps):
    """SAM2-style tracking, a video a step: 16-40 frames of 432-1,088 x 640-1,920 pixels
    (resized to 1,024, all on the GPU), 2-8 objects. Each frame through an image encoder
    (12 windowed ViT blocks, d 768), then per object attention (4 layers) to the first
    frame's memory, a FIFO bank of the last 6 frames' memories (appended and evicted every
    frame) and 16 object pointers, a mask decoder, a memory encoder. no_grad, bf16."""
    torch.manual_seed(227)
    if CUDA:
        ed, eb, eh, side, window, d, mem, ptrs = 768, 12, 12, 1024, 14, 256, 6, 16
        heights, widths, frames, objects = (27, 68), (40, 120), (16, 40), (2, 8)
    else:
        ed, eb, eh, side, window, d, mem, ptrs = 32, 2, 4, 128, 3, 64, 2, 3
        heights, widths, frames, objects = (4, 6), (4, 8), (3, 5), (1, 3)
    g = side // 16
    enc = SamEncoder(ed, eb, eh, g, window, d)
    attend = nn.TransformerDecoder(nn.TransformerDecoderLayer(
        d, 8, 2048, 0.0, batch_first=True, norm_first=True), 4)
    parts = nn.ModuleDict(dict(
        tpos=nn.Embedding(mem + 1, 64), mem_in=nn.Linear(64, d), tokens=nn.Embedding(2, d),
        point=nn.Embedding(2, d), xy=nn.Linear(2, d), hyper=_mlp(d, d // 8, d),
        ptr=_mlp(d, d, d), two_way=nn.ModuleList(TwoWayBlock(d, 8) for _ in range(2)),
        up=nn.Sequential(nn.ConvTranspose2d(d, d // 4, 2, 2), nn.GroupNorm(1, d // 4),
                         nn.GELU(), nn.ConvTranspose2d(d // 4, d // 8, 2, 2), nn.GELU()),
        mask_down=nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1), nn.GELU(),
                                nn.Conv2d(16, 64, 3, 2, 1), nn.GELU(), nn.Conv2d(64, d, 1)),
        fuse=nn.Sequential(nn.Conv2d(d, d, 7, padding=3, groups=d), nn.GroupNorm(1, d),
                           nn.Conv2d(d, 4 * d, 1), nn.GELU(), nn.Conv2d(4 * d, 64, 1))))
    nn.ModuleList([enc, attend, parts]).to(DEV).eval()
    gen = _generator(227)

    def decode(feat, prompt, pe):
        """Each object's mask (4x the grid) and object pointer from its features."""
        o = feat.shape[0]
        tokens = torch.cat([parts["tokens"].weight.expand(o, -1, -1), prompt], 1)
        image, out = feat.flatten(2).transpose(1, 2), tokens
        for blk in parts["two_way"]:
            out, image = blk(out, image, tokens, pe)
        up = parts["up"](image.transpose(1, 2).reshape(feat.shape))
        mask = (parts["hyper"](out[:, 0])[:, None] @ up.flatten(2)).view(o, 1, 4 * g, 4 * g)
        return mask, parts["ptr"](out[:, 1])

    with torch.no_grad(), torch.autocast(**_amp(torch.bfloat16)):
        ramp = torch.linspace(0, 1, g, device=DEV)
        pe = parts["xy"](torch.cartesian_prod(ramp, ramp)[None])
        for _ in range(steps):
            h, w = (16 * _randint(gen, *r) for r in (heights, widths))
            n, o = _randint(gen, *frames), _randint(gen, *objects)
            video = torch.rand(n, 3, side, side, device=DEV)
            bank, pointers, first, masks = deque(maxlen=mem), deque(maxlen=ptrs), None, []
            for f in range(n):
                feat = enc(video[f:f + 1])
                x = feat.flatten(2).transpose(1, 2).expand(o, -1, -1)
                if first is None:
                    cond, prompt = x, parts["point"].weight[1] + parts["xy"](
                        torch.rand(o, 1, 2, device=DEV))
                else:
                    memory = [m + parts["tpos"].weight[i] for i, m in enumerate([first, *bank])]
                    memory.append(torch.cat(list(pointers), 1).view(o, -1, 64))
                    cond = attend(x + pe, parts["mem_in"](torch.cat(memory, 1)))
                    prompt = parts["point"].weight[:1].expand(o, 1, -1)
                mask, ptr = decode(cond.transpose(1, 2).reshape(o, d, g, g), prompt, pe)
                m = parts["fuse"](feat + parts["mask_down"](mask.sigmoid())).flatten(2).mT
                if first is None:
                    first = m
                else:
                    bank.append(m)
                pointers.append(ptr[:, None])
                masks.append(F.interpolate(mask, size=(h, w), mode="bilinear") > 0)
            torch.cat(masks, 1).sum().item()
            del video, bank, pointers, first, masks, feat, x, cond, mask, ptr, m


# ------------------------------------------------------ ColBERT, late interaction

def colbert_late_interaction_train(steps):
    """ColBERT: a BERT-base-like encoder (12 layers, d 768), a normalised 128-d embedding a
    token; 16 queries of 32 tokens, 2-6 documents a query (a new count every step) of
    64-224 tokens each (padded, masked, zeroed); MaxSim of every query against every
    document of the batch, cross-entropy with in-batch negatives. bf16 autocast, AdamW."""
    torch.manual_seed(228)
    if CUDA:
        vocab, d, layers, heads, dim, nq, qlen, docs, lens = (
            30522, 768, 12, 12, 128, 16, 32, (2, 6), (64, 224))
    else:
        vocab, d, layers, heads, dim, nq, qlen, docs, lens = (
            100, 32, 2, 4, 16, 2, 4, (2, 3), (4, 8))
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, 0.0, "gelu", batch_first=True)
    bert = nn.ModuleDict(dict(
        tok=nn.Embedding(vocab, d), pos=nn.Embedding(lens[1], d), proj=nn.Linear(d, dim),
        enc=nn.TransformerEncoder(layer, layers, enable_nested_tensor=False))).to(DEV)
    opt = torch.optim.AdamW(bert.parameters(), lr=3e-6)
    gen = _generator(228)

    def encode(ids, pad=None):
        x = bert["tok"](ids) + bert["pos"](torch.arange(ids.shape[1], device=DEV))
        x = F.normalize(bert["proj"](bert["enc"](x, src_key_padding_mask=pad)).float(), dim=-1)
        return x if pad is None else x.masked_fill(pad[..., None], 0)

    for _ in range(steps):
        k = _randint(gen, *docs)
        length = torch.randint(lens[0], lens[1] + 1, (nq * k,), generator=gen)
        pad = (torch.arange(int(length.max())) >= length[:, None]).to(DEV)
        queries = torch.randint(0, vocab, (nq, qlen), device=DEV)
        documents = torch.randint(0, vocab, pad.shape, device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            q, dv = encode(queries), encode(documents, pad)
            scores = torch.einsum("qid,njd->qnij", q, dv).amax(-1).sum(-1)
        _update(opt, F.cross_entropy(scores.float(), torch.arange(nq, device=DEV) * k))
        del pad, queries, documents, q, dv, scores


WORKLOADS = {
    "gptq_calibrate_quantize": (gptq_calibrate_quantize, 5),
    "darts_bilevel_search_train": (darts_bilevel_search_train, 4),
    "timesformer_video_train": (timesformer_video_train, 20),
    "hifigan_multidisc_train": (hifigan_multidisc_train, 12),
    "blip2_qformer_frozen_train": (blip2_qformer_frozen_train, 20),
    "alphazero_mcts_selfplay_infer": (alphazero_mcts_selfplay_infer, 6),
    "sam2_memory_bank_track_infer": (sam2_memory_bank_track_infer, 5),
    "colbert_late_interaction_train": (colbert_late_interaction_train, 24),
}
