"""The nineteenth corpus: eight workloads written on 2026-11-27 (thirteenth session on
the allocator), held out from every change to the allocator until recorded. Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and
data are smaller.

Each holds memory in a way the first eighteen corpora do not: DP-SGD's per-sample
gradients (one gradient per sample and parameter, from `torch.func`, over
Poisson-sampled batches of a new size every step); a ViT whose token count shrinks
layer by layer as ToMe merges similar tokens; Whisper-style decoding that decodes a
batch again with beams when the greedy pass fails (a cross-attention cache per layer,
self-attention caches that grow a token at a time); a neural cellular automaton trained
through 48-96 of its own steps (the whole rollout kept for backward); a transformer
whose every other layer processes only the tokens its router picks (mixture of depths:
gathers and scatters of a fraction of the sequence); a VAE decoding large images in
overlapping tiles blended into one canvas; point-set matching through 30 log-domain
Sinkhorn iterations kept for backward (an N x M matrix each); and BERT-style masked
language modelling with LAMB written in `torch._foreach_*` ops (lists of temporaries
the size of every parameter at once).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block
# The thirteenth corpus's helpers: autocast settings, seeded generators.
from workloads_thirteenth import CUDA, _amp, _generator
# The fourteenth corpus's helpers: an integer in a closed range; fp16 on the GPU.
from workloads_fourteenth import _half, _randint


# ----------------------------------------------------------- DP-SGD, per-sample grads

def dpsgd_per_sample_train(steps):
    """DP-SGD as Opacus computes it with `torch.func`: per-sample gradients of a CNN
    (`vmap` of `grad` over the batch: one gradient per sample and parameter), each
    clipped to norm 1, summed, noised and applied as SGD; Poisson-sampled batches of
    96-320 images of 32 x 32, a new size every step (GroupNorm, as DP needs)."""
    from torch.func import functional_call, grad, vmap
    torch.manual_seed(191)
    if CUDA:
        w, batches, res = 64, (96, 320), 32
    else:
        w, batches, res = 8, (2, 5), 8
    model = nn.Sequential(
        nn.Conv2d(3, w, 3, padding=1), nn.GroupNorm(8, w), nn.ReLU(),
        nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.GroupNorm(8, 2 * w), nn.ReLU(),
        nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1), nn.GroupNorm(8, 4 * w), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, 10)).to(DEV)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_one(p, x, y):
        return F.cross_entropy(functional_call(model, p, (x[None],)), y[None])

    per_sample = vmap(grad(loss_one), in_dims=(None, 0, 0))
    gen = _generator(191)
    for _ in range(steps):
        b = _randint(gen, *batches)
        x = torch.randn(b, 3, res, res, device=DEV)
        y = torch.randint(0, 10, (b,), device=DEV)
        g = per_sample(params, x, y)
        norms = torch.stack([v.reshape(b, -1).norm(dim=1) for v in g.values()], 1).norm(dim=1)
        scale = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        with torch.no_grad():
            for k, v in g.items():
                summed = torch.einsum("b,b...->...", scale, v)
                noisy = summed + torch.randn_like(summed) * 1.1
                params[k].sub_(0.05 * noisy / b)
        del g, norms, scale, x, y


# --------------------------------------------------------------- ViT, token merging

def _merge_tokens(x, r):
    """ToMe's bipartite soft matching: the `r` tokens of the even half most like a token
    of the odd half are averaged into it (the class token is kept)."""
    cls, t = x[:, :1], x[:, 1:]
    a, b = t[:, ::2], t[:, 1::2]
    with torch.no_grad():
        an = a / a.norm(dim=-1, keepdim=True)
        bn = b / b.norm(dim=-1, keepdim=True)
        best, best_idx = (an @ bn.transpose(1, 2)).max(dim=-1)
        order = best.argsort(dim=-1, descending=True)[..., None]
        kept_idx, merged_idx = order[:, r:], order[:, :r]
        into_idx = best_idx[..., None].gather(1, merged_idx)
    d = x.shape[-1]
    kept = a.gather(1, kept_idx.expand(-1, -1, d))
    merged = a.gather(1, merged_idx.expand(-1, -1, d))
    b = b.scatter_reduce(1, into_idx.expand(-1, -1, d), merged, reduce="mean")
    return torch.cat([cls, kept, b], 1)


def tome_vit_train(steps):
    """A ViT-B/16 (d 768, 12 layers, 12 heads) on 224 x 224 images trained with token
    merging: each layer merges 8 tokens into others (197 tokens at the first layer, 109
    at the last), bf16 autocast, AdamW; batches of 48-96, a new size every step."""
    torch.manual_seed(192)
    if CUDA:
        d, layers, heads, res, patch, r, batches = 768, 12, 12, 224, 16, 8, (48, 96)
    else:
        d, layers, heads, res, patch, r, batches = 32, 2, 4, 32, 8, 2, (2, 4)
    embed = nn.Conv2d(3, d, patch, stride=patch).to(DEV)
    n = (res // patch) ** 2
    cls = nn.Parameter(torch.zeros(1, 1, d, device=DEV))
    pos = nn.Parameter(torch.randn(1, n + 1, d, device=DEV) * 0.02)
    blocks = nn.ModuleList(
        nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                   norm_first=True) for _ in range(layers)).to(DEV)
    head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 1000)).to(DEV)
    params = [cls, pos, *embed.parameters(), *blocks.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)
    gen = _generator(192)
    for _ in range(steps):
        b = _randint(gen, *batches)
        img = torch.randn(b, 3, res, res, device=DEV)
        y = torch.randint(0, 1000, (b,), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            x = embed(img).flatten(2).transpose(1, 2)
            x = torch.cat([cls.expand(b, -1, -1), x], 1) + pos
            for blk in blocks:
                x = _merge_tokens(blk(x), r)
            loss = F.cross_entropy(head(x[:, 0]).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss, img, y


# ------------------------------------------------------ Whisper-style, beam fallback

class _DecoderLayer(nn.Module):
    """A decoder layer with a self-attention cache that grows by concatenation and
    cross-attention to keys and values computed once per utterance."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.cross_q, self.cross_kv, self.cross_out = (
            nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d))
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def heads_of(self, z):
        b, t, d = z.shape
        return z.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def memory(self, enc):
        return tuple(self.heads_of(z) for z in self.cross_kv(enc).chunk(2, dim=2))

    def forward(self, x, cache, mem):
        b, t, d = x.shape
        q, k, v = (self.heads_of(z) for z in self.qkv(self.ln1(x)).split(d, dim=2))
        if cache:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        cache[:] = [k, v]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        q = self.heads_of(self.cross_q(self.ln2(x)))
        y = F.scaled_dot_product_attention(q, *mem)
        x = x + self.cross_out(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln3(x))))


def whisper_fallback_decode(steps):
    """Whisper-style transcription (fp16, d 768, 12 heads, 12 encoder and 12 decoder
    layers, vocab 51,865): batches of 4-16 thirty-second segments (3,000 mel frames,
    1,500 after the convolutional stem) encoded once; a greedy pass of 48-160 tokens with
    a self-attention cache per layer; then, for a third of the batches, the fallback
    Whisper takes when a pass fails its checks: the same segments decoded again with 5
    beams (the cross-attention memory repeated per beam, caches reordered each token)."""
    torch.manual_seed(193)
    if CUDA:
        d, heads, layers, vocab, frames, batches, lens = 768, 12, 12, 51865, 3000, (4, 16), (48, 160)
    else:
        d, heads, layers, vocab, frames, batches, lens = 32, 4, 2, 300, 40, (1, 3), (3, 6)
    beams = 5
    stem = _half(nn.Sequential(nn.Conv1d(80, d, 3, padding=1), nn.GELU(),
                               nn.Conv1d(d, d, 3, stride=2, padding=1), nn.GELU()).to(DEV))
    enc = _half(nn.ModuleList(
        nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                   norm_first=True) for _ in range(layers)).to(DEV)).eval()
    tok = _half(nn.Embedding(vocab, d).to(DEV))
    pos = _half(nn.Embedding(448, d).to(DEV))
    dec = _half(nn.ModuleList(_DecoderLayer(d, heads) for _ in range(layers)).to(DEV)).eval()
    ln = _half(nn.LayerNorm(d).to(DEV))
    dt = torch.float16 if CUDA else torch.float32
    gen = _generator(193)

    def decode(mems, first, n, width):
        caches = [[] for _ in dec]
        ids = first
        scores = torch.zeros(ids.shape[0], device=DEV)
        for i in range(n):
            x = tok(ids[:, -1:] if i else ids)
            x = x + pos(torch.arange(ids.shape[1] - x.shape[1], ids.shape[1], device=DEV))
            for layer, cache, mem in zip(dec, caches, mems):
                x = layer(x, cache, mem)
            logp = F.log_softmax((ln(x[:, -1]) @ tok.weight.t()).float(), dim=-1)
            if width == 1:
                nxt = logp.argmax(-1, keepdim=True)
            else:
                b = ids.shape[0] // width
                total = (scores[:, None] + logp).view(b, -1)
                scores, flat = total.topk(width, dim=-1)
                scores = scores.reshape(-1)
                src = (flat // vocab + torch.arange(b, device=DEV)[:, None] * width).reshape(-1)
                nxt = (flat % vocab).reshape(-1, 1)
                ids = ids[src]
                for cache in caches:
                    cache[:] = [c[src] for c in cache]
            ids = torch.cat([ids, nxt], 1)
            del logp, x
        return ids

    with torch.no_grad():
        for _ in range(steps):
            b = _randint(gen, *batches)
            mel = torch.randn(b, 80, frames, device=DEV, dtype=dt)
            h = stem(mel).transpose(1, 2)
            for layer in enc:
                h = layer(h)
            mems = [layer.memory(h) for layer in dec]
            first = torch.randint(0, vocab, (b, 4), device=DEV)
            out = decode(mems, first, _randint(gen, *lens), 1)
            if _randint(gen, 0, 2) == 0:
                wide = [tuple(z.repeat_interleave(beams, 0) for z in m) for m in mems]
                out = decode(wide, first.repeat_interleave(beams, 0), _randint(gen, *lens),
                             beams)
                del wide
            del mel, h, mems, out, first


# ------------------------------------------------------------ neural cellular automata

class _Nca(nn.Module):
    """A growing neural cellular automaton: fixed Sobel perception, a 1 x 1 convolution
    update applied to a random half of the cells, cells alive where a neighbour is."""

    def __init__(self, channels, hidden):
        super().__init__()
        sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8
        ident = torch.zeros(3, 3)
        ident[1, 1] = 1.0
        kernels = torch.stack([ident, sobel, sobel.t()])[:, None].repeat(channels, 1, 1, 1)
        self.register_buffer("perceive", kernels)
        self.channels = channels
        self.update = nn.Sequential(nn.Conv2d(3 * channels, hidden, 1), nn.ReLU(),
                                    nn.Conv2d(hidden, channels, 1, bias=False))

    def forward(self, s):
        alive_before = F.max_pool2d(s[:, 3:4], 3, 1, 1) > 0.1
        p = F.conv2d(s, self.perceive, padding=1, groups=self.channels)
        fire = (torch.rand_like(s[:, :1]) < 0.5).float()
        s = s + self.update(p) * fire
        alive = alive_before & (F.max_pool2d(s[:, 3:4], 3, 1, 1) > 0.1)
        return s * alive.float()


def nca_rollout_train(steps):
    """A neural cellular automaton (16 channels, hidden 128) grown from seeds on 72 x 72
    grids, batches of 8, trained through a rollout of 48-96 of its own steps (a new
    length every step) kept whole for backward; Adam, gradients normalised per
    parameter."""
    torch.manual_seed(194)
    if CUDA:
        channels, hidden, size, batch, rollout = 16, 128, 72, 8, (48, 96)
    else:
        channels, hidden, size, batch, rollout = 8, 16, 12, 2, (3, 6)
    nca = _Nca(channels, hidden).to(DEV)
    opt = torch.optim.Adam(nca.parameters(), lr=2e-3)
    target = torch.rand(1, 4, size, size, device=DEV)
    gen = _generator(194)
    for _ in range(steps):
        s = torch.zeros(batch, channels, size, size, device=DEV)
        s[:, 3:, size // 2, size // 2] = 1.0
        for _ in range(_randint(gen, *rollout)):
            s = nca(s)
        loss = F.mse_loss(s[:, :4], target.expand(batch, -1, -1, -1))
        loss.backward()
        with torch.no_grad():
            for p in nca.parameters():
                p.grad /= p.grad.norm() + 1e-8
        opt.step()
        opt.zero_grad(set_to_none=True)
        del s, loss


# -------------------------------------------------------------- mixture of depths

class _RoutedBlock(nn.Module):
    """A block that processes only the `capacity` fraction of tokens its router scores
    highest (in sequence order), weighting its change by the router's sigmoid."""

    def __init__(self, d, heads, capacity):
        super().__init__()
        self.router = nn.Linear(d, 1)
        self.block = Block(d, heads)
        self.capacity = capacity

    def forward(self, x):
        b, t, d = x.shape
        k = max(1, int(t * self.capacity))
        score = self.router(x).squeeze(-1)
        idx = score.topk(k, dim=1).indices.sort(dim=1).values
        gather = idx[..., None].expand(-1, -1, d)
        picked = x.gather(1, gather)
        weight = torch.sigmoid(score.gather(1, idx))[..., None]
        change = (self.block(picked) - picked) * weight
        return x.scatter_add(1, gather, change.to(x.dtype))


def mixture_of_depths_train(steps):
    """A 12-layer decoder (d 1,024, 16 heads, vocab 32,000) with mixture of depths: every
    other layer processes the 12.5-50% of tokens its router picks (capacity by layer),
    gathered from and scattered back into the sequence; batches of 8 sequences of
    256-2,048 tokens, a new length every step, bf16 autocast, AdamW."""
    torch.manual_seed(195)
    if CUDA:
        vocab, d, heads, layers, batch, lens = 32000, 1024, 16, 12, 8, (256, 2048)
    else:
        vocab, d, heads, layers, batch, lens = 300, 32, 4, 4, 2, (8, 16)
    caps = [0.125, 0.25, 0.5]
    emb = nn.Embedding(vocab, d).to(DEV)
    blocks = nn.ModuleList(
        Block(d, heads) if i % 2 == 0 else _RoutedBlock(d, heads, caps[(i // 2) % 3])
        for i in range(layers)).to(DEV)
    head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)).to(DEV)
    params = [*emb.parameters(), *blocks.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-4)
    gen = _generator(195)
    for _ in range(steps):
        t = _randint(gen, *lens)
        idx = torch.randint(0, vocab, (batch, t + 1), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            x = emb(idx[:, :-1])
            for blk in blocks:
                x = blk(x)
            logits = head(x)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, logits, loss, idx


# ------------------------------------------------------------------ VAE, tiled decode

class _VaeDecoder(nn.Module):
    """Stable Diffusion's VAE decoder in shape: a 4-channel latent up to RGB at 8x, with
    residual blocks of GroupNorm and SiLU (512, 512, 256, 128 channels)."""

    def __init__(self, widths):
        super().__init__()

        def res(c):
            return nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1),
                                 nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1))

        self.inp = nn.Conv2d(4, widths[0], 3, padding=1)
        self.stages = nn.ModuleList()
        for i, c in enumerate(widths):
            prev = widths[max(i - 1, 0)]
            self.stages.append(nn.ModuleDict({
                "proj": nn.Conv2d(prev, c, 1), "res1": res(c), "res2": res(c),
                "up": nn.Conv2d(c, c, 3, padding=1) if i < len(widths) - 1 else nn.Identity()}))
        self.out = nn.Sequential(nn.GroupNorm(32, widths[-1]), nn.SiLU(),
                                 nn.Conv2d(widths[-1], 3, 3, padding=1))

    def forward(self, z):
        h = self.inp(z)
        for i, s in enumerate(self.stages):
            h = s["proj"](h)
            h = h + s["res1"](h)
            h = h + s["res2"](h)
            if i < len(self.stages) - 1:
                h = s["up"](F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return self.out(h)


def vae_tiled_decode_infer(steps):
    """Decoding latents of images of 1,024-2,048 pixels a side (a new size every step) in
    overlapping 64 x 64 tiles of the latent (16 overlapping), each decoded to 512 x 512
    and blended into a canvas of the whole image with linear ramps, as diffusers' tiled
    VAE decoding does; fp16, one image at a time, the canvas read back to the host."""
    torch.manual_seed(196)
    if CUDA:
        widths, sizes, tile, overlap = (512, 512, 256, 128), (1024, 2048), 64, 16
    else:
        widths, sizes, tile, overlap = (32, 32), (64, 128), 8, 2
    up = 2 ** (len(widths) - 1)
    dec = _half(_VaeDecoder(widths).to(DEV)).eval()
    dt = torch.float16 if CUDA else torch.float32
    gen = _generator(196)
    stride = tile - overlap
    with torch.no_grad():
        for _ in range(steps):
            hgt = _randint(gen, *sizes) // 64 * 64
            wid = _randint(gen, *sizes) // 64 * 64
            z = torch.randn(1, 4, hgt // up, wid // up, device=DEV, dtype=dt)
            canvas = torch.zeros(1, 3, hgt, wid, device=DEV, dtype=torch.float32)
            weight = torch.zeros(1, 1, hgt, wid, device=DEV, dtype=torch.float32)
            lat_h, lat_w = z.shape[2], z.shape[3]
            for y0 in range(0, max(lat_h - overlap, 1), stride):
                for x0 in range(0, max(lat_w - overlap, 1), stride):
                    part = z[:, :, y0:y0 + tile, x0:x0 + tile]
                    img = dec(part).float()
                    th, tw = img.shape[2], img.shape[3]
                    ramp_y = torch.linspace(0.05, 1.0, th, device=DEV).minimum(
                        torch.linspace(1.0, 0.05, th, device=DEV)) * 2
                    ramp_x = torch.linspace(0.05, 1.0, tw, device=DEV).minimum(
                        torch.linspace(1.0, 0.05, tw, device=DEV)) * 2
                    ramp = (ramp_y[:, None] * ramp_x[None]).clamp(max=1.0)[None, None]
                    ys, xs = y0 * up, x0 * up
                    canvas[:, :, ys:ys + th, xs:xs + tw] += img * ramp
                    weight[:, :, ys:ys + th, xs:xs + tw] += ramp
                    del img, ramp, part
            out = (canvas / weight.clamp(min=1e-6)).clamp(-1, 1)
            pixels = ((out + 1) * 127.5).to(torch.uint8).cpu()
            del z, canvas, weight, out, pixels


# ------------------------------------------------------------- Sinkhorn matching

def sinkhorn_match_train(steps):
    """Point-set matching as SuperGlue trains it: two sets of 512-2,048 points each (new
    sizes every step, batches of 4) encoded by an MLP and two cross-attention layers to
    256 features, their N x M similarity turned into a soft assignment by 30 log-domain
    Sinkhorn iterations with a dustbin row and column, every iteration kept for
    backward; loss on a random ground-truth matching; Adam."""
    torch.manual_seed(197)
    if CUDA:
        d, heads, batch, points, iters = 256, 4, 4, (512, 2048), 30
    else:
        d, heads, batch, points, iters = 16, 2, 2, (5, 9), 3
    enc = nn.Sequential(nn.Linear(3, d), nn.ReLU(), nn.Linear(d, d)).to(DEV)
    cross = nn.ModuleList(nn.MultiheadAttention(d, heads, batch_first=True)
                          for _ in range(2)).to(DEV)
    bin_score = nn.Parameter(torch.tensor(1.0, device=DEV))
    params = [*enc.parameters(), *cross.parameters(), bin_score]
    opt = torch.optim.Adam(params, lr=1e-4)
    gen = _generator(197)
    for _ in range(steps):
        n, m = _randint(gen, *points), _randint(gen, *points)
        a = enc(torch.randn(batch, n, 3, device=DEV))
        b = enc(torch.randn(batch, m, 3, device=DEV))
        for att in cross:
            a, b = a + att(a, b, b)[0], b + att(b, a, a)[0]
        scores = a @ b.transpose(1, 2) / d ** 0.5
        edge_col = bin_score.expand(batch, n, 1)
        edge_row = bin_score.expand(batch, 1, m + 1)
        couplings = torch.cat([torch.cat([scores, edge_col], 2), edge_row], 1)
        norm = -torch.log(torch.tensor(float(n + m), device=DEV))
        log_mu = torch.cat([norm.expand(n), norm[None] + torch.log(torch.tensor(
            float(m), device=DEV))])[None].expand(batch, -1)
        log_nu = torch.cat([norm.expand(m), norm[None] + torch.log(torch.tensor(
            float(n), device=DEV))])[None].expand(batch, -1)
        u, v = torch.zeros_like(log_mu), torch.zeros_like(log_nu)
        for _ in range(iters):
            u = log_mu - torch.logsumexp(couplings + v[:, None, :], dim=2)
            v = log_nu - torch.logsumexp(couplings + u[:, :, None], dim=1)
        log_p = couplings + u[:, :, None] + v[:, None, :] - norm
        match = torch.randint(0, m + 1, (batch, n), device=DEV)
        loss = -log_p[:, :n].gather(2, match[..., None]).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del a, b, scores, couplings, u, v, log_p, loss


# ----------------------------------------------------------------- LAMB with foreach

def _lamb_step(params, exp_avg, exp_avg_sq, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-6,
               wd=0.01):
    """One LAMB step over every parameter at once with `torch._foreach_*` ops, as fused
    and multi-tensor optimizers do: each op makes a list of temporaries the size of
    every parameter."""
    grads = [p.grad for p in params]
    torch._foreach_mul_(exp_avg, betas[0])
    torch._foreach_add_(exp_avg, grads, alpha=1 - betas[0])
    torch._foreach_mul_(exp_avg_sq, betas[1])
    torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1 - betas[1])
    m_hat = torch._foreach_div(exp_avg, 1 - betas[0] ** step)
    v_hat = torch._foreach_div(exp_avg_sq, 1 - betas[1] ** step)
    torch._foreach_sqrt_(v_hat)
    torch._foreach_add_(v_hat, eps)
    update = torch._foreach_div(m_hat, v_hat)
    del m_hat, v_hat
    torch._foreach_add_(update, params, alpha=wd)
    w_norm = torch._foreach_norm(params)
    u_norm = torch._foreach_norm(update)
    trust = [torch.where((w > 0) & (u > 0), w / u, torch.ones_like(w))
             for w, u in zip(w_norm, u_norm)]
    torch._foreach_mul_(update, trust)
    torch._foreach_add_(params, update, alpha=-lr)


def lamb_foreach_bert_train(steps):
    """BERT-base masked language modelling (d 768, 12 layers, 12 heads, vocab 30,522,
    head tied to the embedding) trained with LAMB written in `torch._foreach_*` ops after
    `clip_grad_norm_` (foreach too): two micro-batches of 32 sequences of 128-512 tokens
    accumulated per step (new lengths each), 15% of tokens masked, bf16 autocast."""
    torch.manual_seed(198)
    if CUDA:
        vocab, d, layers, heads, batch, lens = 30522, 768, 12, 12, 32, (128, 512)
    else:
        vocab, d, layers, heads, batch, lens = 300, 32, 2, 4, 2, (6, 12)
    emb = nn.Embedding(vocab, d).to(DEV)
    pos = nn.Embedding(512, d).to(DEV)
    enc = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True,
                                   activation="gelu"), layers,
        enable_nested_tensor=False).to(DEV)
    ln = nn.LayerNorm(d).to(DEV)
    params = [*emb.parameters(), *pos.parameters(), *enc.parameters(), *ln.parameters()]
    with torch.no_grad():
        exp_avg = [torch.zeros_like(p) for p in params]
        exp_avg_sq = [torch.zeros_like(p) for p in params]
    gen = _generator(198)
    for step in range(1, steps + 1):
        for _ in range(2):
            t = _randint(gen, *lens)
            ids = torch.randint(0, vocab, (batch, t), device=DEV)
            masked = torch.rand(batch, t, device=DEV) < 0.15
            inp = ids.masked_fill(masked, 103)
            with torch.autocast(**_amp(torch.bfloat16)):
                h = enc(emb(inp) + pos(torch.arange(t, device=DEV)))
                logits = ln(h)[masked] @ emb.weight.t()
            loss = F.cross_entropy(logits.float(), ids[masked]) / 2
            loss.backward()
            del h, logits, loss, ids, masked, inp
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=CUDA)
        with torch.no_grad():
            _lamb_step(params, exp_avg, exp_avg_sq, step)
        for p in params:
            p.grad = None


WORKLOADS = {
    "dpsgd_per_sample_train": (dpsgd_per_sample_train, 12),
    "tome_vit_train": (tome_vit_train, 10),
    "whisper_fallback_decode": (whisper_fallback_decode, 8),
    "nca_rollout_train": (nca_rollout_train, 12),
    "mixture_of_depths_train": (mixture_of_depths_train, 10),
    "vae_tiled_decode_infer": (vae_tiled_decode_infer, 6),
    "sinkhorn_match_train": (sinkhorn_match_train, 10),
    "lamb_foreach_bert_train": (lamb_foreach_bert_train, 8),
}
