"""The twenty-third corpus: eight workloads written on 2026-11-27, held out from every
change to the allocator until recorded. Same conventions as workloads.py: `run(steps)`
builds its models and data on DEV and runs `steps` steps; random weights; seeded. On the
CPU (RECORD_DEVICE=cpu) the models and data are smaller.

Each holds memory in a way the first twenty-two corpora do not: PPO for RLHF (four GPTs, two
trained, two frozen); DETR (a matching on the host per decoder layer); VITS (a frames-by-
tokens likelihood to the host for alignment search, the path back); Instant-NGP (sixteen hash
tables, samples compacted to a count that sets the next ray count); wav2vec 2.0 (a codebook
product, 100 negatives a masked frame); Swin (maps rolled, windowed and put back at a new size
each step); DPM-Solver++ (three predictions kept, a new batch and aspect a request); IMPALA
(trajectories of new lengths from pinned buffers, an LSTM unrolled, V-trace backwards).
"""
import copy
import math
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Gpt
# Earlier corpora's helpers: autocast, generators, fp16, layers, a VAE decoder, a DiT block.
from workloads_thirteenth import CUDA, _amp, _generator
from workloads_fourteenth import Attn, _half, _mlp, _randint
from workloads_fifteenth import WideBlock, _conv_bn
from workloads_nineteenth import _VaeDecoder
from workloads_twentieth import _DiTBlock
from workloads_twentyfirst import _update


# ------------------------------------------------------------------ RLHF, four models

def _token_logprobs(model, ids, n):
    """The log-probabilities under `model` of the last `n` tokens of `ids` (fp32)."""
    logits = model(ids)[:, -n - 1:-1].float()
    return logits.log_softmax(-1).gather(-1, ids[:, -n:, None])[..., 0]


def ppo_rlhf_four_models_train(steps):
    """PPO for RLHF as OpenRLHF on one GPU: an actor and a critic (GPTs of 12 layers, d 1,024,
    vocab 32,000; an AdamW each), a frozen fp16 reference and reward model. 16 prompts of
    64-128 tokens a step get 32-96 sampled tokens (bf16, a cache grown by concatenation), each
    ended at random; KL-penalised rewards, GAE; 2 epochs of minibatches of 4, two backwards."""
    torch.manual_seed(231)
    vocab, d, layers, heads, batch, plens, news = ((32000, 1024, 12, 16, 16, (64, 128), (32, 96))
                                                   if CUDA else (100, 32, 2, 4, 4, (3, 6), (3, 6)))
    with torch.device(DEV):
        actor, critic, reward = (Gpt(vocab, d, layers, heads, plens[1] + news[1]) for _ in "abc")
        critic.head, reward.head = nn.Linear(d, 1), nn.Linear(d, 1)
    ref, reward = (_half(m).requires_grad_(False) for m in (copy.deepcopy(actor), reward))
    opts = [torch.optim.AdamW(m.parameters(), lr=lr) for m, lr in ((actor, 1e-6), (critic, 9e-6))]
    amp, gen = _amp(torch.bfloat16), _generator(231)
    for _ in range(steps):
        p, new = _randint(gen, *plens), _randint(gen, *news)
        ids = torch.randint(0, vocab, (batch, p), device=DEV)
        with torch.no_grad():
            with torch.autocast(**amp):
                caches = [{} for _ in range(layers)]
                logits = actor(ids, caches)[:, -1]
                for i in range(new):
                    ids = torch.cat([ids, torch.multinomial(logits.float().softmax(-1), 1)], 1)
                    if i < new - 1:
                        logits = actor(ids[:, -1:], caches, start=p + i)[:, -1]
                del caches, logits
                old_lp = _token_logprobs(actor, ids, new)
                values = critic(ids)[:, -new - 1:-1, 0].float()
            ref_lp = _token_logprobs(ref, ids, new)
            ends = torch.randint(max(1, new // 4), new + 1, (batch, 1), device=DEV)
            score = reward(ids)[:, :, 0].float().gather(1, p + ends - 1)
            mask = (torch.arange(new, device=DEV) < ends).float()
            rewards = (-0.05 * (old_lp - ref_lp)).scatter_add(1, ends - 1, score) * mask
            delta, adv, last = rewards + F.pad(values[:, 1:], (0, 1)) - values, mask * 0, 0
            for t in reversed(range(new)):
                adv[:, t] = last = (delta[:, t] + 0.95 * last) * mask[:, t]
            returns = adv + values
            adv = (adv - adv[mask > 0].mean()) / (adv[mask > 0].std() + 1e-8) * mask
        for _ in range(2):
            for idx in torch.randperm(batch, device=DEV).split(4 if CUDA else 2):
                m, a = mask[idx], adv[idx]
                with torch.autocast(**amp):
                    r = (_token_logprobs(actor, ids[idx], new) - old_lp[idx]).exp()
                _update(opts[0], (torch.max(-a * r, -a * r.clamp(0.8, 1.2)) * m).sum() / m.sum())
                with torch.autocast(**amp):
                    v = critic(ids[idx])[:, -new - 1:-1, 0].float()
                clipped = values[idx] + (v - values[idx]).clamp(-0.2, 0.2)
                loss = torch.max((v - returns[idx]) ** 2, (clipped - returns[idx]) ** 2)
                _update(opts[1], 0.5 * (loss * m).sum() / m.sum())


# --------------------------------------------------------------- DETR, matched on the host

def _match(cost):
    """Each row's column in a one-to-one matching of the rows of `cost` (NumPy, rows <=
    columns) to columns, greedily by least cost (SciPy's Hungarian is not on the GPU host)."""
    import numpy as np
    cost, col = cost.copy(), np.empty(len(cost), dtype=np.int64)
    for _ in range(len(cost)):
        i, j = np.unravel_index(cost.argmin(), cost.shape)
        col[i], cost[i], cost[:, j] = j, np.inf, np.inf
    return col


def detr_set_match_train(steps):
    """DETR: a ResNet-34 backbone, a 6 + 6-layer transformer (d 256, 100 queries); 4 images a
    batch, each a shorter side of 480-800 (the longer up to 1,333) padded to the largest with
    a pixel mask, 1-40 boxes each; for each decoder layer (auxiliary losses) the costs go to
    the host, queries are matched to targets per image, the matches come back. AdamW."""
    torch.manual_seed(232)
    widths, depths, d, heads, layers, nq, batch, scales, longest, most = (
        ((64, 128, 256, 512), (3, 4, 6, 3), 256, 8, 6, 100, 4, (15, 25), 1333, 40) if CUDA
        else ((8, 8, 16, 16), (1, 1, 1, 1), 16, 2, 2, 10, 2, (2, 3), 128, 4))
    blocks = [_conv_bn(3, widths[0], 2), nn.MaxPool2d(3, 2, 1)]  # a 3x3 stem, then ResNet-34's
    blocks += [WideBlock(widths[max(k - 1, 0)] if j == 0 else w, w, 2 if j == 0 < k else 1)
               for k, (w, n) in enumerate(zip(widths, depths)) for j in range(n)]
    model = nn.ModuleDict(dict(
        backbone=nn.Sequential(*blocks), proj=nn.Conv2d(widths[-1], d, 1),
        query=nn.Embedding(nq, d), row=nn.Embedding(64, d // 2), col=nn.Embedding(64, d // 2),
        tr=nn.Transformer(d, heads, layers, layers, 8 * d, batch_first=True),
        cls=nn.Linear(d, 92), box=_mlp(d, 4, d))).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4)
    weight, gen = torch.tensor([1.0] * 91 + [0.1], device=DEV), _generator(232)
    for _ in range(steps):
        counts, short = ([_randint(gen, *r) for _ in range(batch)] for r in ((1, most), scales))
        long = [min(int(32 * s * (1 + torch.rand(1, generator=gen))), longest) for s in short]
        sizes = [(32 * s, n) if _randint(gen, 0, 1) else (n, 32 * s) for s, n in zip(short, long)]
        images = torch.zeros(batch, 3, *(max(s) for s in zip(*sizes)), device=DEV)
        pad = torch.ones(images[:, 0].shape, dtype=torch.bool, device=DEV)
        for i, (h, w) in enumerate(sizes):
            images[i, :, :h, :w], pad[i, :h, :w] = torch.rand(3, h, w, device=DEV), False
        labels = torch.randint(0, 91, (sum(counts),), device=DEV)
        targets = torch.rand(sum(counts), 4, device=DEV) * 0.4 + 0.1
        f = model["proj"](model["backbone"](images))
        fh, fw = f.shape[2:]
        pad = F.interpolate(pad[None].float(), size=(fh, fw))[0].bool().flatten(1)
        pos = torch.cat([model["col"].weight[:fw].expand(fh, -1, -1),
                         model["row"].weight[:fh, None].expand(-1, fw, -1)], -1).flatten(0, 1)
        memory = model["tr"].encoder(f.flatten(2).transpose(1, 2) + pos, src_key_padding_mask=pad)
        q = model["query"].weight.expand(batch, -1, -1)
        h, loss = torch.zeros_like(q), 0
        image = torch.arange(batch, device=DEV).repeat_interleave(torch.tensor(counts, device=DEV))
        for dec in model["tr"].decoder.layers:  # each layer's output matched and scored
            h = dec(h + q, memory, memory_key_padding_mask=pad)
            out = model["tr"].decoder.norm(h)
            logits, boxes = model["cls"](out), model["box"](out).sigmoid()
            with torch.no_grad():  # every query's class and L1 costs for every target, to the host
                cost = (5 * torch.cdist(boxes.flatten(0, 1), targets, p=1)
                        - logits.flatten(0, 1).softmax(-1)[:, labels]).view(batch, nq, -1).cpu()
            query = torch.cat([torch.as_tensor(_match(c[i].T.numpy()))
                               for i, c in enumerate(cost.split(counts, -1))]).to(DEV)
            classes = torch.full((batch, nq), 91, device=DEV).index_put_((image, query), labels)
            loss = loss + F.cross_entropy(logits.transpose(1, 2), classes, weight) + 5 * F.l1_loss(
                boxes[image, query], targets, reduction="sum") / len(labels)
        _update(opt, loss)


# ------------------------------------------------- VITS, monotonic alignment on the host

def _mas(value, tx, ty):
    """VITS's monotonic alignment search on the host, the batch at once: the path (0 or 1)
    of most total `value` (batch, frames, tokens) through each utterance's ty x tx."""
    import numpy as np
    b, frames, tokens = value.shape
    x, rows = np.arange(tokens), np.arange(b)
    v = np.full((b, tokens), -np.inf, dtype=value.dtype)
    for y in range(frames):
        stay = v if y else np.full_like(v, -np.inf)
        move = np.concatenate([np.full((b, 1), -np.inf if y else 0.0, v.dtype), v[:, :-1]], 1)
        ok = (x <= y) & (x >= (tx + y - ty)[:, None]) & (x < tx[:, None]) & (y < ty)[:, None]
        v = value[:, y] = np.where(ok, value[:, y] + np.maximum(stay, move), -np.inf)
    path, idx = np.zeros_like(value), tx - 1
    for y in range(frames - 1, -1, -1):
        live = y < ty
        path[rows[live], y, idx[live]] = 1
        if y:
            back = (idx == y) | (value[rows, y - 1, idx] < value[rows, y - 1, idx - 1])
            idx = np.where(live & (idx > 0) & back, idx - 1, idx)
    return path


class _WaveNet(nn.Module):
    """VITS's WN: gated 1-D convolutions (dilated rate^i) with residual and skip paths."""

    def __init__(self, c, layers, k=5, rate=1):
        super().__init__()
        self.ins = nn.ModuleList(nn.Conv1d(c, 2 * c, k, 1, rate ** i * (k // 2), rate ** i)
                                 for i in range(layers))
        self.outs = nn.ModuleList(nn.Conv1d(c, 2 * c, 1) for _ in range(layers))

    def forward(self, x, mask=1.0):
        skip = 0
        for a, b in zip(self.ins, self.outs):
            t, s = a(x).chunk(2, 1)
            r, k = b(torch.tanh(t) * torch.sigmoid(s)).chunk(2, 1)
            x, skip = (x + r) * mask, skip + k
        return skip * mask


def vits_monotonic_align_train(steps):
    """VITS without discriminators: 16 utterances of 40-200 tokens, 2-4 frames a token (new
    lengths, padded); a text encoder (6 layers, d 192), a posterior WaveNet (16 layers), a flow
    of 4 couplings; the frames-by-tokens likelihood to the host for monotonic alignment search,
    the path back to expand the prior; a duration predictor; a HiFi-GAN-like decoder on random
    32-frame slices, a mel L1 loss. fp32, AdamW."""
    torch.manual_seed(233)
    c, spec, wn, enc, batch, tokens, dc, rates, seg = (
        (192, 513, 16, 6, 16, (40, 200), 512, (8, 8, 2, 2), 32) if CUDA
        else (16, 9, 2, 1, 2, (3, 6), 16, (4, 4), 4))
    hop, ups = math.prod(rates), [nn.Conv1d(c, dc, 7, 1, 3)]
    for i, r in enumerate(rates):  # up-sampling, then a WaveNet dilated 1, 3, 9
        ups += [nn.ConvTranspose1d(dc >> i, dc >> i + 1, 2 * r, r, r // 2),
                _WaveNet(dc >> i + 1, 3, 7, 3)]
    model = nn.ModuleDict(dict(
        emb=nn.Embedding(178, c), text_proj=nn.Conv1d(c, 2 * c, 1),
        text=nn.TransformerEncoder(nn.TransformerEncoderLayer(c, 2, 4 * c, 0.1, batch_first=True),
                                   enc, enable_nested_tensor=False),
        pre=nn.Conv1d(spec, c, 1), wn=_WaveNet(c, wn), post_proj=nn.Conv1d(c, 2 * c, 1),
        flow=nn.ModuleList(nn.ModuleList([nn.Conv1d(c // 2, c, 1), _WaveNet(c, 4),
                                          nn.Conv1d(c, c // 2, 1)]) for _ in range(4)),
        dur=nn.Sequential(nn.Conv1d(c, 256, 3, 1, 1), nn.ReLU(), nn.Conv1d(256, 1, 1)),
        dec=nn.Sequential(*ups, nn.Conv1d(dc >> len(rates), 1, 7, 1, 3), nn.Tanh()))).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.8, 0.99))
    fbank, gen = torch.rand(80 if CUDA else 8, 2 * hop + 1, device=DEV) / (4 * hop), _generator(233)
    window = torch.hann_window(4 * hop, device=DEV)
    for _ in range(steps):
        tx = torch.randint(tokens[0], tokens[1] + 1, (batch,), generator=gen)
        ty = (tx * (2 + 2 * torch.rand(batch, generator=gen))).long().clamp(min=seg)
        xm, ym = ((torch.arange(int(n.max())) < n[:, None]).to(DEV) for n in (tx, ty))
        xmf, ymf = xm[:, None].float(), ym[:, None].float()
        spectrum = torch.rand(batch, spec, ym.shape[1], device=DEV) * ymf
        h = model["emb"](torch.randint(0, 178, xm.shape, device=DEV)) * math.sqrt(c)
        h = model["text"](h, src_key_padding_mask=~xm).transpose(1, 2) * xmf
        m_p, logs_p = (model["text_proj"](h) * xmf).chunk(2, 1)
        h_q = model["post_proj"](model["wn"](model["pre"](spectrum) * ymf, ymf))
        m_q, logs_q = (h_q * ymf).chunk(2, 1)
        z_p = z = (m_q + torch.randn_like(m_q) * logs_q.exp()) * ymf
        for pre, net, post in model["flow"]:
            a, b = z_p.chunk(2, 1)
            z_p = torch.cat([b + post(net(pre(a) * ymf, ymf)) * ymf, a], 1)
        with torch.no_grad():
            s = torch.exp(-2 * logs_p)
            ll = (torch.sum(-0.5 * math.log(2 * math.pi) - logs_p, 1, keepdim=True)
                  + torch.bmm(-0.5 * (z_p ** 2).transpose(1, 2), s)
                  + torch.bmm(z_p.transpose(1, 2), m_p * s)
                  + torch.sum(-0.5 * m_p ** 2 * s, 1, keepdim=True))
            path = torch.from_numpy(_mas(ll.cpu().numpy(), tx.numpy(), ty.numpy())).to(DEV)
        m_e, logs_e = (torch.bmm(path, t.transpose(1, 2)).transpose(1, 2) for t in (m_p, logs_p))
        kl = (logs_e - logs_q - 0.5 + 0.5 * (z_p - m_e) ** 2 * torch.exp(-2 * logs_e)) * ymf
        logw = torch.log(path.sum(1)[:, None] + 1e-6) * xmf  # the durations the path gives
        duration = ((model["dur"](h.detach()) - logw) ** 2 * xmf).sum() / xmf.sum()
        starts = [int(torch.randint(0, int(n) - seg + 1, (1,), generator=gen)) for n in ty]
        wave = model["dec"](torch.stack([z[i, :, s:s + seg] for i, s in enumerate(starts)]))
        both = torch.cat([wave[:, 0], torch.rand(batch, seg * hop, device=DEV) * 2 - 1])
        mel = (fbank @ torch.stft(both, 4 * hop, hop, window=window, return_complex=True).abs())
        mel = mel.clamp(min=1e-5).log().chunk(2)
        _update(opt, 45 * F.l1_loss(*mel) + kl.sum() / ymf.sum() + duration)


# --------------------------------------------------- Instant-NGP, hash grid and occupancy

def _hash_encode(tables, x, res):
    """Instant-NGP's hash encoding of `x` in [0, 1]^3: per level the cell's 8 corners index
    its table (directly where the grid fits, else hashed), interpolated; levels concatenated."""
    corners, feats = torch.tensor([[i >> 2 & 1, i >> 1 & 1, i & 1] for i in range(8)]), []
    corners = corners.to(DEV, torch.int32)
    for table, r in zip(tables, res):
        cell = (x * r).floor().clamp(max=r - 1)  # x may round up to 1
        frac, c = (x * r - cell)[:, None], cell.int()[:, None] + corners
        if (r + 1) ** 3 <= table.num_embeddings:
            idx = (c[..., 0] * (r + 1) + c[..., 1]) * (r + 1) + c[..., 2]
        else:  # -1,640,531,535 is 2,654,435,761 as an int32 (products wrap as in uint32)
            idx = (c[..., 0] ^ c[..., 1] * -1640531535 ^ c[..., 2] * 805459861) & (
                table.num_embeddings - 1)
        w = torch.where(corners.bool(), frac, 1 - frac).prod(-1)
        feats.append((table(idx) * w[..., None]).sum(1))
    return torch.cat(feats, -1)


def instant_ngp_hashgrid_train(steps):
    """Instant-NGP: a 16-level hash encoding (tables of up to 2^21 x 2, dense gradients), two
    small MLPs (bf16), Adam. Rays marched through the unit cube are kept where a 128^3
    occupancy grid is set, compacted and rendered; the next ray count aims at 2^18 samples.
    Every 8 steps the density grid is refreshed at every cell (in chunks, no_grad)."""
    torch.manual_seed(234)
    levels, size, top, grid, march, target, rays = (
        (16, 2 ** 21, 2048, 128, 1024, 2 ** 18, 1024) if CUDA else (4, 2 ** 10, 32, 8, 16, 256, 32))
    res = [int(16 * (top / 16) ** (i / (levels - 1))) for i in range(levels)]
    tables = nn.ModuleList(nn.Embedding.from_pretrained(
        (torch.rand(min(size, (r + 1) ** 3), 2) - 0.5) * 2e-4, freeze=False) for r in res)
    sigma_net, color_net = _mlp(2 * levels, 16, 64), _mlp(15 + 27, 3, 64)
    model = nn.ModuleList([tables, sigma_net, color_net]).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.99), eps=1e-15)
    cells = torch.stack(torch.meshgrid(*[torch.arange(grid, device=DEV)] * 3, indexing="ij"), -1)
    cells, density = cells.view(-1, 3), torch.rand(grid ** 3, device=DEV)
    amp, dt, bounds = _amp(torch.bfloat16), 3 ** 0.5 / march, (rays // 4, rays * 16)

    def sigma_of(x):
        h = sigma_net(_hash_encode(tables, x, res)).float()
        return h[:, 0].clamp(max=15).exp(), h

    for step in range(steps):
        if step % 8 == 0:
            with torch.no_grad(), torch.autocast(**amp):
                fresh = torch.cat([sigma_of((c + torch.rand(c.shape, device=DEV)) / grid)[0]
                                   for c in cells.split(target)])
                density = torch.maximum(density * 0.95, fresh)
                occupied = density > density.mean()
            del fresh
        o = 0.5 + 1.5 * F.normalize(torch.randn(rays, 3, device=DEV), dim=-1)
        d = F.normalize(0.5 + 0.2 * torch.randn(rays, 3, device=DEV) - o, dim=-1)
        t0, t1 = -o / d, (1 - o) / d
        t = torch.minimum(t0, t1).amax(-1, keepdim=True).clamp(min=0) + dt * (
            torch.arange(march, device=DEV) + torch.rand(rays, 1, device=DEV))
        x = (o[:, None] + t[..., None] * d[:, None]).clamp(0, 1 - 1e-6)
        cell = (x * grid).long()
        keep = (t < torch.maximum(t0, t1).amin(-1)[:, None]) & occupied[
            (cell[..., 0] * grid + cell[..., 1]) * grid + cell[..., 2]]
        ray, k = keep.nonzero(as_tuple=True)
        with torch.autocast(**amp):
            sigma, h = sigma_of(x[ray, k])
            view = d[ray, :, None] * 2.0 ** torch.arange(4, device=DEV)
            view = torch.cat([d[ray], view.sin().flatten(1), view.cos().flatten(1)], -1)
            rgb = color_net(torch.cat([h[:, 1:], view], -1)).float().sigmoid()
        alpha = 1 - torch.exp(-torch.zeros(rays, march, device=DEV).index_put((ray, k), sigma) * dt)
        trans = torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1] + 1e-10], 1).cumprod(1)
        weight = (alpha * trans)[ray, k, None]
        color = torch.zeros(rays, 3, device=DEV).index_add(0, ray, weight * rgb)
        _update(opt, F.mse_loss(color, torch.rand(rays, 3, device=DEV)))
        rays = min(max(target * rays // max(len(ray), 1), bounds[0]), bounds[1])


# ------------------------------------------------------ wav2vec 2.0, quantiser, negatives

def wav2vec2_quantizer_pretrain(steps):
    """wav2vec 2.0 BASE pre-training: 1.4M samples a batch in 5-43 clips of 2-15 s; a conv
    feature encoder (7 layers, 512 channels), spans of 10 frames masked (on the host, the same
    count per clip), a 12-layer transformer (d 768), a Gumbel quantiser (2 x 320 codewords, a
    one-hot-times-codebook product), 100 negatives a masked frame. bf16 autocast, Adam."""
    torch.manual_seed(235)
    c, d, layers, heads, budget, lengths, groups, entries, negs, span, kernels = (
        (512, 768, 12, 12, 1_400_000, (32_000, 240_000), 2, 320, 100, 10,
         ((10, 5),) + ((3, 2),) * 4 + ((2, 2),) * 2) if CUDA
        else (16, 32, 1, 4, 8_000, (1_600, 4_000), 2, 8, 5, 3, ((10, 5), (3, 2), (2, 2))))
    convs = [nn.Conv1d(1, c, *kernels[0], bias=False), nn.GroupNorm(c, c), nn.GELU()] + [
        m for k, s in kernels[1:] for m in (nn.Conv1d(c, c, k, s, bias=False), nn.GELU())]
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, 0.1, "gelu", batch_first=True)
    model = nn.ModuleDict(dict(
        feat=nn.Sequential(*convs), ln=nn.LayerNorm(c), proj=nn.Linear(c, d),
        pos=nn.Conv1d(d, d, 128, padding=64, groups=16), ln2=nn.LayerNorm(d),
        enc=nn.TransformerEncoder(layer, layers, enable_nested_tensor=False),
        final=nn.Linear(d, 256), wq=nn.Linear(c, groups * entries), project_q=nn.Linear(256, 256),
        codebook=nn.Embedding(groups * entries, 256 // groups), mask=nn.Embedding(1, d))).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-6)
    amp, gen = _amp(torch.bfloat16), _generator(235)
    for step in range(steps):
        length = _randint(gen, *lengths)
        b = budget // length
        with torch.autocast(**amp):
            f = model["feat"](torch.randn(b, 1, length, device=DEV))
            f = model["ln"]((f.detach() + 0.1 * (f - f.detach())).transpose(1, 2).float())
        t = f.shape[1]
        starts = torch.rand(b, t - span, generator=gen).argsort(1)[:, :int(0.065 * t) + 1]
        m = torch.zeros(b, t).scatter_(1, (starts[..., None] + torch.arange(span)).flatten(1), 1)
        k = int(m.sum(1).min())
        keep = (torch.rand(b, t, generator=gen) + 2 * m).topk(k, 1).indices
        m = torch.zeros(b, t, dtype=torch.bool).scatter_(1, keep, True).to(DEV)
        with torch.autocast(**amp):
            x = torch.where(m[..., None], model["mask"].weight[0], model["proj"](f))
            x = x + F.gelu(model["pos"](x.transpose(1, 2))[..., :-1]).transpose(1, 2)
            x = model["final"](model["enc"](model["ln2"](x))[m]).float().view(b, k, 256)
            logits = model["wq"](f[m]).float().view(-1, groups, entries)
        hard = F.gumbel_softmax(logits, tau=max(2 * 0.999995 ** step, 0.5), hard=True)
        q = (hard.view(-1, groups * entries, 1) * model["codebook"].weight).view(
            -1, groups, entries, 256 // groups).sum(-2)
        y = model["project_q"](q.flatten(1)).view(b, k, 256)
        probs = logits.softmax(-1).mean(0)
        perplexity = (-(probs * probs.clamp_min(1e-7).log()).sum(-1)).exp().sum()
        idx = torch.randint(0, k - 1, (b, negs * k), device=DEV)
        idx = (idx + (idx >= torch.arange(k, device=DEV).repeat_interleave(negs))
               + torch.arange(b, device=DEV)[:, None] * k)
        neg = y.reshape(-1, 256)[idx.view(-1)].view(b, k, negs, 256).permute(2, 0, 1, 3)
        sim = F.cosine_similarity(x, torch.cat([y[None], neg]), dim=-1) / 0.1
        sim[1:][(neg == y).all(-1)] = float("-inf")
        _update(opt, F.cross_entropy(sim.flatten(1).t(), sim.new_zeros(b * k, dtype=torch.long))
                + 10 * f.pow(2).mean() + 0.1 * (1 - perplexity / (groups * entries)))


# ------------------------------------------------------- Swin, windows at every scale

class _SwinBlock(nn.Module):
    """A Swin block as the original code: (shifted) window attention with a relative position
    bias and the shift mask of the padded size (made once, kept in `masks`), an MLP."""

    def __init__(self, d, heads, window, shift):
        super().__init__()
        self.heads, self.window, self.shift = heads, window, shift
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.table = nn.Parameter(0.02 * torch.randn((2 * window - 1) ** 2, heads))

    def forward(self, x, index, masks):
        (b, h, w, d), ws, n = x.shape, self.window, self.window ** 2
        s = self.shift if min(h, w) > ws else 0
        y = F.pad(self.ln1(x), (0, 0, 0, -w % ws, 0, -h % ws))
        hp, wp = y.shape[1:3]
        y = torch.roll(y, (-s, -s), (1, 2)) if s else y
        y = y.view(b, hp // ws, ws, wp // ws, ws, d).transpose(2, 3).reshape(-1, n, d)
        q, k, v = self.qkv(y).view(len(y), n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
        attn = attn + self.table[index].view(n, n, -1).permute(2, 0, 1)
        if s and (hp, wp) not in masks:  # regions of the rolled map; -100 between two
            r = torch.zeros(hp, wp, device=DEV)
            for i, part in enumerate((slice(0, -ws), slice(-ws, -s), slice(-s, None))):
                r[part] += 3 * i
                r[:, part] += i
            r = r.view(hp // ws, ws, wp // ws, ws).transpose(1, 2).reshape(-1, n)
            masks[hp, wp] = (r[:, None] != r[:, :, None]).float() * -100.0
        if s:
            attn = (attn.view(b, -1, self.heads, n, n) + masks[hp, wp][:, None]).flatten(0, 1)
        y = self.proj((attn.softmax(-1) @ v).transpose(1, 2).reshape(-1, n, d))
        y = y.view(b, hp // ws, wp // ws, ws, ws, d).transpose(2, 3).reshape(b, hp, wp, d)
        x = x + (torch.roll(y, (s, s), (1, 2)) if s else y)[:, :h, :w]
        return x + self.mlp(self.ln2(x))


def swin_shifted_window_varres_train(steps):
    """Swin-T (d 96, depths 2, 2, 6, 2, windows of 7, 1,000 classes) at a side drawn each step
    from 224-384 pixels in steps of 32, batch 32: every block pads its map to whole windows,
    rolls it (every other block), cuts it into windows and puts them back. fp16 autocast with
    a gradient scaler, AdamW."""
    torch.manual_seed(236)
    d, depths, heads, ws, batch, sides = ((96, (2, 2, 6, 2), (3, 6, 12, 24), 7, 32, (7, 12)) if CUDA
                                          else (8, (2, 2, 2, 2), (1, 2, 4, 8), 3, 2, (2, 3)))
    stages = nn.ModuleList(nn.ModuleList(_SwinBlock(d << i, hd, ws, ws // 2 * (j % 2)) for j in
                                         range(n)) for i, (n, hd) in enumerate(zip(depths, heads)))
    merges = nn.ModuleList(nn.Sequential(nn.LayerNorm(4 * d << i), nn.Linear(
        4 * d << i, 2 * d << i, bias=False)) for i in range(len(depths) - 1))
    model = nn.ModuleDict(dict(embed=nn.Conv2d(3, d, 4, 4), ln0=nn.LayerNorm(d), stages=stages,
                               merges=merges, ln=nn.LayerNorm(8 * d), head=nn.Linear(8 * d, 1000)))
    model.to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    scaler = torch.amp.GradScaler("cuda", enabled=CUDA)
    rel = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
    rel = rel[:, :, None] - rel[:, None] + ws - 1
    index, masks, gen = (rel[0] * (2 * ws - 1) + rel[1]).flatten().to(DEV), {}, _generator(236)
    for _ in range(steps):
        side = 32 * _randint(gen, *sides)
        x = torch.randn(batch, 3, side, side, device=DEV)
        with torch.autocast(**_amp(torch.float16)):
            h = model["ln0"](model["embed"](x).permute(0, 2, 3, 1))
            for i, blocks in enumerate(stages):
                for blk in blocks:
                    h = blk(h, index, masks)
                if i < len(merges):
                    h = F.pad(h, (0, 0, 0, h.shape[2] % 2, 0, h.shape[1] % 2))
                    h = merges[i](torch.cat([h[:, a::2, b::2] for b in (0, 1) for a in (0, 1)], -1))
            logits = model["head"](model["ln"](h.mean((1, 2))))
        loss = F.cross_entropy(logits.float(), torch.randint(0, 1000, (batch,), device=DEV))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


# ----------------------------------------------------- DPM-Solver++, a history of three

def dpm_solver_history_sample(steps):
    """Text-to-image serving as PixArt-alpha at 512 pixels: per request 1-8 prompts (120 tokens,
    a 12-layer text encoder), a DiT (28 blocks, d 1,152, cross-attention after each) on one of
    five aspect ratios, classifier-free guidance in one batch, 20 steps of DPM-Solver++ (3M)
    keeping its last three predictions, the VAE decoder on the batch. fp16, no_grad."""
    torch.manual_seed(237)
    d, depth, heads, td, tl, vocab, tlen, batches, solver, widths, buckets = (
        (1152, 28, 16, 1024, 12, 32128, 120, (1, 8), 20, (512, 512, 256, 128),
         ((64, 64), (56, 72), (72, 56), (48, 80), (80, 48))) if CUDA
        else (32, 2, 4, 32, 1, 100, 6, (1, 2), 4, (32, 32), ((4, 4), (4, 6))))
    side = max(max(b) for b in buckets) // 2
    with torch.device(DEV):
        layer = nn.TransformerEncoderLayer(td, heads, 4 * td, 0.0, "gelu", batch_first=True,
                                           norm_first=True)
        model = _half(nn.ModuleDict(dict(
            tok=nn.Embedding(vocab, td), null=nn.Embedding(tlen, td),
            text=nn.TransformerEncoder(layer, tl, enable_nested_tensor=False),
            caption=nn.Sequential(nn.Linear(td, d), nn.GELU(), nn.Linear(d, d)),
            embed=nn.Conv2d(4, d, 2, 2), pos=nn.Embedding(side * side, d),
            time=nn.Sequential(nn.Linear(1, d), nn.SiLU(), nn.Linear(d, d)),
            blocks=nn.ModuleList(_DiTBlock(d, heads) for _ in range(depth)),
            lns=nn.ModuleList(nn.LayerNorm(d) for _ in range(depth)),
            cross=nn.ModuleList(Attn(d, heads) for _ in range(depth)), out=nn.Linear(d, 16),
            vae=_VaeDecoder(widths)))).eval()
    dt, gen = model["out"].weight.dtype, _generator(237)
    abar = torch.cumprod(1 - torch.linspace(1e-4, 0.02, 1000, dtype=torch.float64), 0)
    alpha, sigma = abar.sqrt().tolist(), (1 - abar).sqrt().tolist()
    lam = [math.log(a / s) for a, s in zip(alpha, sigma)]
    ts = torch.linspace(999, 0, solver + 1).round().long().tolist()
    with torch.no_grad():
        for _ in range(steps):
            n, (h, w) = _randint(gen, *batches), buckets[_randint(gen, 0, len(buckets) - 1)]
            ids = torch.randint(0, vocab, (n, tlen), device=DEV)
            ctx = model["caption"](torch.cat([model["text"](model["tok"](ids)),
                                              model["null"].weight.expand(n, -1, -1)]))
            pos = model["pos"].weight.view(side, side, d)[:h // 2, :w // 2].flatten(0, 1)
            x, hist = torch.randn(n, 4, h, w, device=DEV), deque(maxlen=3)
            for s, t in zip(ts[:-1], ts[1:]):
                z = model["embed"](torch.cat([x, x]).to(dt)).flatten(2).transpose(1, 2) + pos
                cond = model["time"](torch.full((2 * n, 1), s / 1000, device=DEV, dtype=dt))
                for blk, ln, cross in zip(model["blocks"], model["lns"], model["cross"]):
                    z = blk(z, cond)
                    z = z + cross(ln(z), ctx, ctx)
                eps = model["out"](z).view(2 * n, h // 2, w // 2, 2, 2, 4).permute(0, 5, 1, 3, 2, 4)
                e_c, e_u = eps.reshape(2 * n, 4, h, w).float().chunk(2)
                hist.appendleft(((x - sigma[s] * (e_u + 4.5 * (e_c - e_u))) / alpha[s], lam[s]))
                gap, e = lam[t] - lam[s], math.expm1(lam[s] - lam[t])
                x = sigma[t] / sigma[s] * x - alpha[t] * e * hist[0][0]
                if len(hist) > 1:  # second- and third-order terms (diffusers' "heun" form)
                    r0 = (lam[s] - hist[1][1]) / gap
                    d1 = d0 = (hist[0][0] - hist[1][0]) / r0
                    if len(hist) > 2:
                        r1 = (hist[1][1] - hist[2][1]) / gap
                        dd = (d0 - (hist[1][0] - hist[2][0]) / r1) / (r0 + r1)
                        d1 = d0 + r0 * dd
                        x = x - alpha[t] * ((e + gap) / gap ** 2 - 0.5) * dd
                    x = x + alpha[t] * (e / gap + 1) * d1
            image = model["vae"]((x / 0.18215).to(dt)).float().clamp(-1, 1)
            ((image + 1) * 127.5).to(torch.uint8).cpu()
            del ids, ctx, pos, x, hist, image


# ----------------------------------------------------------- IMPALA, V-trace learner

def impala_vtrace_varlen_train(steps):
    """An IMPALA learner (as torchbeast's): 32 trajectories of 20-80 steps (a new length each,
    padded, masked) of 4 x 84 x 84 frames copied from pinned host buffers; the deep residual
    torso (16, 32, 32 channels), an LSTM (256) unrolled step by step with resets where episodes
    ended; V-trace targets backwards in time (no_grad); RMSprop. fp32."""
    torch.manual_seed(238)
    batch, lens, side, actions, hidden, chans = ((32, (20, 80), 84, 18, 256, (16, 32, 32)) if CUDA
                                                 else (2, (3, 5), 20, 4, 16, (4, 4, 4)))
    convs = nn.ModuleList(nn.ModuleList(nn.Conv2d(i if j == 0 else o, o, 3, 1, 1) for j in range(5))
                          for i, o in zip((4,) + chans, chans))
    model = nn.ModuleDict(dict(
        convs=convs, fc=nn.Linear(chans[-1] * (-(-side // 2 ** len(chans))) ** 2, hidden),
        core=nn.LSTMCell(hidden + actions + 1, hidden), policy=nn.Linear(hidden, actions),
        baseline=nn.Linear(hidden, 1))).to(DEV)
    opt = torch.optim.RMSprop(model.parameters(), lr=6e-4, alpha=0.99, eps=0.01)
    gen = _generator(238)
    host = [torch.randint(0, 256, (lens[1] + 1, batch, 4, side, side), dtype=torch.uint8,
                          generator=gen) for _ in range(2)]
    host = [b.pin_memory() if CUDA else b for b in host]
    for step in range(steps):
        n = torch.randint(lens[0], lens[1] + 1, (batch,), generator=gen)
        t = int(n.max())
        obs = host[step % 2][:t + 1].to(DEV, non_blocking=True)
        valid = (torch.arange(t) < n[:, None]).t().float().to(DEV)
        act = torch.randint(0, actions, (t + 1, batch), device=DEV)
        rew = torch.randn(t + 1, batch, device=DEV).clamp(-1, 1)
        done = torch.rand(t + 1, batch, device=DEV) < 0.01
        behaviour = torch.randn(t, batch, actions, device=DEV)
        h, cs = (torch.randn(batch, hidden, device=DEV) * 0.1 for _ in range(2))
        y = obs.flatten(0, 1).float() / 255
        for conv, *res in convs:  # a convolution, a max-pool, two residual blocks
            y = F.max_pool2d(conv(y), 3, 2, 1)
            for a, b in (res[:2], res[2:]):
                y = y + b(F.relu(a(F.relu(y))))
        feat = F.relu(model["fc"](F.relu(y).flatten(1))).view(t + 1, batch, -1)
        inp = torch.cat([feat, F.one_hot(act, actions).float(), rew[..., None]], -1)
        outs = []
        for i in range(t + 1):
            alive = (~done[i]).float()[:, None]
            h, cs = model["core"](inp[i], (h * alive, cs * alive))
            outs.append(h)
        out = torch.stack(outs)
        logp, base = model["policy"](out[:-1]).log_softmax(-1), model["baseline"](out)[..., 0]
        taken = logp.gather(-1, act[1:, :, None])[..., 0]
        with torch.no_grad():
            rho = (taken - behaviour.log_softmax(-1).gather(-1, act[1:, :, None])[..., 0]).exp()
            rho, disc = rho.clamp(max=1), 0.99 * (~done[1:]).float() * valid
            deltas = rho * (rew[1:] + disc * base[1:] - base[:-1]) * valid
            acc, vs = torch.zeros_like(deltas[0]), []
            for i in reversed(range(t)):
                acc = deltas[i] + disc[i] * rho[i] * acc
                vs.append(acc)
            vs = torch.stack(vs[::-1]) + base[:-1]
            adv = rho * (rew[1:] + disc * torch.cat([vs[1:], base[-1:]]) - base[:-1])
        _update(opt, -(taken * adv * valid).sum() + 0.25 * ((vs - base[:-1]) ** 2 * valid).sum()
                + 0.01 * ((logp.exp() * logp).sum(-1) * valid).sum())


WORKLOADS = {
    "ppo_rlhf_four_models_train": (ppo_rlhf_four_models_train, 6),
    "detr_set_match_train": (detr_set_match_train, 20),
    "vits_monotonic_align_train": (vits_monotonic_align_train, 24),
    "instant_ngp_hashgrid_train": (instant_ngp_hashgrid_train, 160),
    "wav2vec2_quantizer_pretrain": (wav2vec2_quantizer_pretrain, 24),
    "swin_shifted_window_varres_train": (swin_shifted_window_varres_train, 40),
    "dpm_solver_history_sample": (dpm_solver_history_sample, 6),
    "impala_vtrace_varlen_train": (impala_vtrace_varlen_train, 24),
}
