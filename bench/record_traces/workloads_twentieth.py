"""The twentieth corpus: eight workloads written on 2026-11-27 (fourteenth session on
the allocator), held out from every change to the allocator until recorded. Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and
data are smaller.

Each holds memory in a way the first nineteen corpora do not: Sophia's Hutchinson
estimate of the Hessian's diagonal (a double backward through a whole GPT every other
step: the graph of the gradients kept, then differentiated again); GradCache's
contrastive training (every embedding of a large batch computed without a graph, the
loss's gradient taken at the embeddings, then each chunk run again and backpropagated
with its slice); a spiking network trained through 16-40 time steps (membrane
potentials and spikes of every layer and step kept for backward, surrogate gradients);
a Glow normalizing flow (invertible 1 x 1 convolutions with `slogdet`, affine
couplings, squeezes and splits, and every few steps sampling through the inverses);
Mistral-style serving with a rolling key/value buffer (a window written in place,
prompts prefilled in chunks, batches of a new size each round); segmentation trained on
the hardest quarter of its pixels (`topk` over per-pixel losses, crops of a new size
every step); a Perceiver whose latents cross-attend to 2k-16k inputs (a new length
every step); and rectified-flow training of a small DiT with an EMA copy, sampled every
third step with classifier-free guidance over batches of a new size.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV
# The thirteenth corpus's helpers: autocast settings, seeded generators.
from workloads_thirteenth import CUDA, _amp, _generator
# The fourteenth corpus's helpers: an integer in a closed range; fp16 on the GPU.
from workloads_fourteenth import _half, _randint
# The eleventh corpus's pre-norm block (its layers, in the same order).
from workloads_eleventh import PackedBlock


# ------------------------------------------------------------- Sophia, Hessian diag

class _MathBlock(PackedBlock):
    """A pre-norm causal transformer block (the eleventh corpus's layers) whose attention
    is written out (softmax of q k^T), which, unlike the fused kernels, can be
    differentiated twice."""

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in (q, k, v))
        att = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def sophia_hessian_gpt_train(steps):
    """A 6-layer GPT (d 512, 8 heads, vocab 16,000) trained with Sophia-H: every other
    step the loss's gradients are taken with `create_graph=True` and differentiated
    again against a Rademacher vector (Hutchinson's estimate of the Hessian's diagonal,
    kept as an EMA); the update is the clipped ratio of the gradient's EMA to it. Batch
    8 of 256-512 tokens (a new length every step), fp32."""
    torch.manual_seed(201)
    if CUDA:
        vocab, d, layers, heads, batch, lens = 16000, 512, 6, 8, 8, (256, 512)
    else:
        vocab, d, layers, heads, batch, lens = 200, 32, 2, 4, 2, (6, 12)
    emb = nn.Embedding(vocab, d).to(DEV)
    pos = nn.Embedding(lens[1], d).to(DEV)
    blocks = nn.ModuleList(_MathBlock(d, heads) for _ in range(layers)).to(DEV)
    ln = nn.LayerNorm(d).to(DEV)
    params = [*emb.parameters(), *pos.parameters(), *blocks.parameters(),
              *ln.parameters()]
    m = [torch.zeros_like(p) for p in params]
    h = [torch.zeros_like(p) for p in params]
    gen = _generator(201)

    def loss_of(ids):
        x = emb(ids[:, :-1]) + pos(torch.arange(ids.shape[1] - 1, device=DEV))
        for blk in blocks:
            x = blk(x)
        logits = ln(x) @ emb.weight.t()
        return F.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))

    for step in range(steps):
        t = _randint(gen, *lens)
        ids = torch.randint(0, vocab, (batch, t + 1), device=DEV)
        loss = loss_of(ids)
        if step % 2 == 0:
            grads = torch.autograd.grad(loss, params, create_graph=True)
            u = [torch.randint_like(p, 0, 2) * 2 - 1 for p in params]
            hvp = torch.autograd.grad(grads, params, grad_outputs=u)
            with torch.no_grad():
                for hi, ui, hv in zip(h, u, hvp):
                    hi.mul_(0.99).add_(ui * hv, alpha=0.01)
            grads = [g.detach() for g in grads]
            del u, hvp
        else:
            grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g, mi, hi in zip(params, grads, m, h):
                mi.mul_(0.96).add_(g, alpha=0.04)
                ratio = (mi / (0.05 * hi * batch * t).clamp(min=1e-12)).clamp(-1, 1)
                p.add_(ratio, alpha=-1e-4)
        del grads, loss, ids


# ------------------------------------------------------------------- GradCache

def _text_tower(vocab, d, layers, heads):
    return nn.ModuleDict({
        "emb": nn.Embedding(vocab, d),
        "enc": nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True),
            layers, enable_nested_tensor=False),
        "out": nn.Linear(d, d)}).to(DEV)


def _embed(tower, ids):
    x = tower["enc"](tower["emb"](ids))
    return F.normalize(tower["out"](x.mean(1)), dim=-1)


def gradcache_contrastive_train(steps):
    """Dense-retrieval training with GradCache: a query tower and a document tower
    (6-layer transformers, d 512) over a batch of 1,024 pairs, far more than one pass
    can hold: every embedding is computed in chunks of 128 without a graph, the
    in-batch InfoNCE loss's gradient is taken at the 2 x 1,024 cached embeddings, then
    each chunk is run again with a graph and backpropagated with its slice of that
    gradient. Queries of 24-48 tokens, documents of 128-256 (new lengths every step),
    bf16 autocast, AdamW."""
    torch.manual_seed(202)
    if CUDA:
        vocab, d, layers, heads, batch, chunk = 30000, 512, 6, 8, 1024, 128
        qlens, dlens = (24, 48), (128, 256)
    else:
        vocab, d, layers, heads, batch, chunk = 200, 32, 1, 4, 8, 4
        qlens, dlens = (3, 5), (6, 9)
    qt = _text_tower(vocab, d, layers, heads)
    dt = _text_tower(vocab, d, layers, heads)
    opt = torch.optim.AdamW([*qt.parameters(), *dt.parameters()], lr=1e-4)
    gen = _generator(202)
    for _ in range(steps):
        q = torch.randint(0, vocab, (batch, _randint(gen, *qlens)), device=DEV)
        doc = torch.randint(0, vocab, (batch, _randint(gen, *dlens)), device=DEV)
        with torch.no_grad(), torch.autocast(**_amp(torch.bfloat16)):
            qe = torch.cat([_embed(qt, c) for c in q.split(chunk)]).float()
            de = torch.cat([_embed(dt, c) for c in doc.split(chunk)]).float()
        qe.requires_grad_(True)
        de.requires_grad_(True)
        logits = qe @ de.t() / 0.05
        loss = F.cross_entropy(logits, torch.arange(batch, device=DEV))
        loss.backward()
        for tower, ids, cached in ((qt, q, qe), (dt, doc, de)):
            for c, g in zip(ids.split(chunk), cached.grad.split(chunk)):
                with torch.autocast(**_amp(torch.bfloat16)):
                    e = _embed(tower, c).float()
                e.backward(g)
                del e
        opt.step()
        opt.zero_grad(set_to_none=True)
        del q, doc, qe, de, logits, loss


# ------------------------------------------------------------- spiking network, BPTT

class _Spike(torch.autograd.Function):
    """A Heaviside step forward, a fast-sigmoid surrogate gradient backward."""

    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return (v > 0).to(v.dtype)

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad / (1 + 10 * v.abs()) ** 2


def snn_surrogate_bptt_train(steps):
    """A convolutional spiking network (leaky integrate-and-fire neurons, three
    convolutions of 64-256 channels and a readout) classifying 32 x 32 images presented
    for 16-40 time steps (a new count every step), trained through time: every layer's
    membrane potential and spikes at every step are kept for backward; rate-coded
    cross-entropy on the summed readout; batch 128, Adam."""
    torch.manual_seed(203)
    if CUDA:
        w, batch, res, times = 64, 128, 32, (16, 40)
    else:
        w, batch, res, times = 4, 2, 8, (2, 4)
    convs = nn.ModuleList([
        nn.Conv2d(3, w, 3, padding=1), nn.Conv2d(w, 2 * w, 3, stride=2, padding=1),
        nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1)]).to(DEV)
    norms = nn.ModuleList(nn.BatchNorm2d(c) for c in (w, 2 * w, 4 * w)).to(DEV)
    readout = nn.Linear(4 * w * (res // 4) ** 2, 10).to(DEV)
    opt = torch.optim.Adam([*convs.parameters(), *norms.parameters(),
                            *readout.parameters()], lr=1e-3)
    gen = _generator(203)
    for _ in range(steps):
        t_steps = _randint(gen, *times)
        x = torch.rand(batch, 3, res, res, device=DEV)
        y = torch.randint(0, 10, (batch,), device=DEV)
        mems = [None] * len(convs)
        total = 0
        for _ in range(t_steps):
            s = (torch.rand_like(x) < x).float()
            for i, (conv, norm) in enumerate(zip(convs, norms)):
                current = norm(conv(s))
                mems[i] = current if mems[i] is None else 0.9 * mems[i] + current
                s = _Spike.apply(mems[i] - 1.0)
                mems[i] = mems[i] - s
            total = total + readout(s.flatten(1))
        loss = F.cross_entropy(total / t_steps, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, mems, s, total, loss


# --------------------------------------------------------------- Glow, a flow

class _FlowStep(nn.Module):
    """Glow's step: activation normalisation, an invertible 1 x 1 convolution (its
    log-determinant by `slogdet`), an affine coupling."""

    def __init__(self, c, hidden):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(1, c, 1, 1))
        self.log_scale = nn.Parameter(torch.zeros(1, c, 1, 1))
        self.weight = nn.Parameter(torch.linalg.qr(torch.randn(c, c))[0])
        self.net = nn.Sequential(
            nn.Conv2d(c // 2, hidden, 3, padding=1), nn.ReLU(),
            nn.Conv2d(hidden, hidden, 1), nn.ReLU(),
            nn.Conv2d(hidden, c, 3, padding=1))

    def forward(self, x):
        hw = x.shape[2] * x.shape[3]
        x = (x + self.loc) * self.log_scale.exp()
        logdet = hw * self.log_scale.sum()
        c = x.shape[1]
        x = F.conv2d(x, self.weight.view(c, c, 1, 1))
        logdet = logdet + hw * torch.linalg.slogdet(self.weight)[1]
        a, b = x.chunk(2, 1)
        log_s, t = self.net(a).chunk(2, 1)
        s = torch.sigmoid(log_s + 2)
        b = (b + t) * s
        return torch.cat([a, b], 1), logdet + s.log().flatten(1).sum(1)

    def reverse(self, y):
        a, b = y.chunk(2, 1)
        log_s, t = self.net(a).chunk(2, 1)
        b = b / torch.sigmoid(log_s + 2) - t
        x = torch.cat([a, b], 1)
        c = x.shape[1]
        x = F.conv2d(x, torch.inverse(self.weight).view(c, c, 1, 1))
        return x * (-self.log_scale).exp() - self.loc


def _squeeze(x):
    b, c, h, w = x.shape
    x = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(b, 4 * c, h // 2, w // 2)


def _unsqueeze(x):
    b, c, h, w = x.shape
    x = x.view(b, c // 4, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(b, c // 4, 2 * h, 2 * w)


def glow_flow_train(steps):
    """Glow on 64 x 64 images (three levels of eight flow steps, coupling networks of
    512 channels): squeeze, the steps, then half the channels split off to a Gaussian
    at each level; loss in bits per dimension, batch 32, Adam; every third step 32
    samples drawn back through every inverse (`torch.inverse` of each 1 x 1
    convolution) without a graph."""
    torch.manual_seed(204)
    if CUDA:
        res, levels, depth, hidden, batch = 64, 3, 8, 512, 32
    else:
        res, levels, depth, hidden, batch = 8, 2, 2, 8, 2
    flows = nn.ModuleList()
    c = 3
    for _ in range(levels):
        c *= 4
        flows.append(nn.ModuleList(_FlowStep(c, hidden) for _ in range(depth)))
        c //= 2
    flows = flows.to(DEV)
    opt = torch.optim.Adam(flows.parameters(), lr=1e-4)
    dims = 3 * res * res
    normal = -0.5 * torch.log(torch.tensor(2 * torch.pi, device=DEV))
    for step in range(steps):
        x = torch.rand(batch, 3, res, res, device=DEV) - 0.5
        logdet = torch.zeros(batch, device=DEV)
        logp = torch.zeros(batch, device=DEV)
        for level in flows:
            x = _squeeze(x)
            for f in level:
                x, ld = f(x)
                logdet = logdet + ld
            x, z = x.chunk(2, 1)
            logp = logp + (normal - 0.5 * z ** 2).flatten(1).sum(1)
        logp = logp + (normal - 0.5 * x ** 2).flatten(1).sum(1)
        loss = -(logp + logdet).mean() / (dims * 0.6931)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, z, logdet, logp, loss
        if step % 3 == 2:
            with torch.no_grad():
                side = res // 2 ** levels
                y = torch.randn(batch, c, side, side, device=DEV)
                for level in reversed(flows):
                    y = torch.cat([y, torch.randn_like(y)], 1)
                    for f in reversed(level):
                        y = f.reverse(y)
                    y = _unsqueeze(y)
                del y


# ------------------------------------------------- rolling key/value buffer serving

class _WindowBlock(nn.Module):
    """A decoder block with grouped-query attention over a rolling key/value buffer of
    `window` positions per sequence, written in place."""

    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.ln1, self.ln2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, 2 * kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, 6 * d, bias=False)
        self.down = nn.Linear(3 * d, d, bias=False)

    def forward(self, x, cache, start):
        b, t, d = x.shape
        h = self.ln1(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.hd).permute(2, 0, 3, 1, 4)
        window = cache["k"].shape[2]
        filled = min(start, window)
        if filled:
            keys = torch.cat([cache["k"][:, :, :filled], k], 2)
            vals = torch.cat([cache["v"][:, :, :filled], v], 2)
        else:
            keys, vals = k, v
        rep = self.heads // self.kv_heads
        keys = keys.repeat_interleave(rep, 1)
        vals = vals.repeat_interleave(rep, 1)
        mask = None
        if t > 1:
            mask = torch.ones(t, filled + t, dtype=torch.bool, device=x.device).tril(filled)
        y = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask)
        del keys, vals
        slots = torch.arange(start, start + t, device=x.device)[-window:] % window
        cache["k"].index_copy_(2, slots, k[:, :, -window:])
        cache["v"].index_copy_(2, slots, v[:, :, -window:])
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        gate, up = self.up(self.ln2(x)).chunk(2, -1)
        return x + self.down(F.silu(gate) * up)


def sliding_window_rolling_decode(steps):
    """Mistral-style serving (fp16, d 1,024, 8 layers, 16 heads, 4 key/value heads,
    vocab 32,000) with a rolling key/value buffer of 1,024 positions: each round a batch
    of 2-12 prompts of 600-3,000 tokens (new sizes every round) is prefilled in chunks
    of 512, each chunk attending to the buffer and itself and written into it in place,
    then 32 tokens are decoded greedily one at a time (one slot of the buffer
    overwritten per token); the buffers are freed at the end of the round."""
    torch.manual_seed(205)
    if CUDA:
        vocab, d, layers, heads, kvh, window, chunk = 32000, 1024, 8, 16, 4, 1024, 512
        batches, prompts, new = (2, 12), (600, 3000), 32
    else:
        vocab, d, layers, heads, kvh, window, chunk = 200, 32, 2, 4, 2, 8, 4
        batches, prompts, new = (1, 3), (5, 14), 3
    emb = _half(nn.Embedding(vocab, d).to(DEV))
    blocks = _half(nn.ModuleList(_WindowBlock(d, heads, kvh) for _ in range(layers))
                   .to(DEV))
    norm = _half(nn.RMSNorm(d).to(DEV))
    dtype = emb.weight.dtype
    gen = _generator(205)
    with torch.no_grad():
        for _ in range(steps):
            b, p = _randint(gen, *batches), _randint(gen, *prompts)
            caches = [{"k": torch.zeros(b, kvh, window, d // heads, device=DEV, dtype=dtype),
                       "v": torch.zeros(b, kvh, window, d // heads, device=DEV, dtype=dtype)}
                      for _ in range(layers)]
            ids = torch.randint(0, vocab, (b, p), device=DEV)
            pos = 0
            for piece in ids.split(chunk, 1):
                x = emb(piece)
                for blk, cache in zip(blocks, caches):
                    x = blk(x, cache, pos)
                pos += piece.shape[1]
            tok = (norm(x[:, -1:]) @ emb.weight.t()).argmax(-1)
            for _ in range(new):
                x = emb(tok)
                for blk, cache in zip(blocks, caches):
                    x = blk(x, cache, pos)
                pos += 1
                tok = (norm(x) @ emb.weight.t()).argmax(-1)
            del caches, ids, x, tok


# ------------------------------------------------- segmentation, hardest pixels only

def ohem_segmentation_train(steps):
    """DeepLabv3 (ResNet-50 trunk, random weights, 21 classes) trained on the hardest
    quarter of its pixels: per-pixel cross-entropy without reduction, `topk` of the
    largest losses, their mean backpropagated; batch 8 of square crops of 384-640
    pixels (a new size every step, multiples of 32), channels-last, bf16 autocast,
    SGD with momentum."""
    from torchvision.models.segmentation import deeplabv3_resnet50
    torch.manual_seed(206)
    if CUDA:
        batch, crops = 8, (12, 20)
    else:
        batch, crops = 2, (2, 3)
    model = deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21,
                               aux_loss=False).to(DEV).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    gen = _generator(206)
    for _ in range(steps):
        side = 32 * _randint(gen, *crops)
        x = torch.randn(batch, 3, side, side, device=DEV).to(
            memory_format=torch.channels_last)
        y = torch.randint(0, 21, (batch, side, side), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            out = model(x)["out"]
        per_pixel = F.cross_entropy(out.float(), y, reduction="none").flatten()
        hard, _ = per_pixel.topk(per_pixel.numel() // 4)
        loss = hard.mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, out, per_pixel, hard, loss


# --------------------------------------------------------- Perceiver, long inputs

class _CrossAttend(nn.Module):
    """Latents attending to the inputs (queries from the latents, keys and values from
    the inputs), then an MLP."""

    def __init__(self, d, d_in, heads):
        super().__init__()
        self.heads = heads
        self.lnq, self.lnkv, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d_in), nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d_in, 2 * d)
        self.o = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, lat, inp):
        b, n, d = lat.shape
        hd = d // self.heads
        q = self.q(self.lnq(lat)).view(b, n, self.heads, hd).transpose(1, 2)
        k, v = self.kv(self.lnkv(inp)).view(b, -1, 2, self.heads, hd).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        lat = lat + self.o(y.transpose(1, 2).reshape(b, n, d))
        return lat + self.mlp(self.ln2(lat))


def perceiver_varlen_train(steps):
    """A Perceiver (256 latents of d 512) classifying inputs of 2,048-16,384 elements of
    192 features each (a new length every step, batch 16): two cross-attentions from
    the latents to the inputs, each followed by three latent self-attention layers;
    bf16 autocast, AdamW."""
    torch.manual_seed(207)
    if CUDA:
        d, d_in, n_lat, heads, batch, lens = 512, 192, 256, 8, 16, (2048, 16384)
    else:
        d, d_in, n_lat, heads, batch, lens = 32, 8, 4, 4, 2, (6, 20)
    latents = nn.Parameter(torch.randn(n_lat, d, device=DEV) * 0.02)
    cross = nn.ModuleList(_CrossAttend(d, d_in, heads) for _ in range(2)).to(DEV)
    selfs = nn.ModuleList(nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                   norm_first=True), 3, enable_nested_tensor=False)
        for _ in range(2)).to(DEV)
    head = nn.Linear(d, 100).to(DEV)
    opt = torch.optim.AdamW([latents, *cross.parameters(), *selfs.parameters(),
                             *head.parameters()], lr=1e-4)
    gen = _generator(207)
    for _ in range(steps):
        inp = torch.randn(batch, _randint(gen, *lens), d_in, device=DEV)
        y = torch.randint(0, 100, (batch,), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            lat = latents.expand(batch, -1, -1)
            for ca, sa in zip(cross, selfs):
                lat = sa(ca(lat, inp))
            logits = head(lat.mean(1))
        loss = F.cross_entropy(logits.float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del inp, y, lat, logits, loss


# ------------------------------------------------------ rectified flow, a small DiT

class _DiTBlock(nn.Module):
    """A DiT block: adaptive layer norm (shift, scale, gate from the conditioning),
    self-attention and an MLP."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, elementwise_affine=False)
        self.ln2 = nn.LayerNorm(d, elementwise_affine=False)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ada = nn.Linear(d, 6 * d)

    def forward(self, x, cond):
        b, t, d = x.shape
        s1, c1, g1, s2, c2, g2 = self.ada(F.silu(cond))[:, None].chunk(6, -1)
        h = self.ln1(x) * (1 + c1) + s1
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + g1 * self.o(y)
        return x + g2 * self.mlp(self.ln2(x) * (1 + c2) + s2)


class _DiT(nn.Module):
    def __init__(self, d, depth, heads, channels, side, patch, classes):
        super().__init__()
        self.patch, self.side, self.channels = patch, side, channels
        self.embed = nn.Conv2d(channels, d, patch, stride=patch)
        self.pos = nn.Parameter(torch.zeros(1, (side // patch) ** 2, d))
        self.time = nn.Sequential(nn.Linear(1, d), nn.SiLU(), nn.Linear(d, d))
        self.label = nn.Embedding(classes + 1, d)
        self.blocks = nn.ModuleList(_DiTBlock(d, heads) for _ in range(depth))
        self.out = nn.Linear(d, patch * patch * channels)

    def forward(self, x, t, label):
        b = x.shape[0]
        h = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        cond = self.time(t[:, None]) + self.label(label)
        for blk in self.blocks:
            h = blk(h, cond)
        n, p = self.side // self.patch, self.patch
        h = self.out(h).view(b, n, n, p, p, self.channels).permute(0, 5, 1, 3, 2, 4)
        return h.reshape(b, self.channels, self.side, self.side)


def rectified_flow_sample_train(steps):
    """Rectified-flow training of a DiT (d 768, 12 blocks, 12 heads) on 32 x 32 x 4
    latents in patches of 2, 1,000 classes with a null class dropped in 10% of the
    time: straight paths from noise to data, the velocity regressed, batch 64, bf16
    autocast, AdamW and an EMA copy (`torch._foreach_lerp_`); every third step the EMA
    model samples 16-64 images (a new count each time) in 12 Euler steps with
    classifier-free guidance (conditional and unconditional halves in one batch)."""
    import copy
    torch.manual_seed(208)
    if CUDA:
        d, depth, heads, side, batch, samples, euler = 768, 12, 12, 32, 64, (16, 64), 12
    else:
        d, depth, heads, side, batch, samples, euler = 32, 2, 4, 8, 2, (1, 3), 2
    model = _DiT(d, depth, heads, 4, side, 2, 1000).to(DEV)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    params, ema_params = list(model.parameters()), list(ema.parameters())
    gen = _generator(208)
    for step in range(steps):
        x1 = torch.randn(batch, 4, side, side, device=DEV)
        x0 = torch.randn_like(x1)
        t = torch.rand(batch, device=DEV)
        label = torch.randint(0, 1000, (batch,), device=DEV)
        label = torch.where(torch.rand(batch, device=DEV) < 0.1, 1000, label)
        xt = (1 - t)[:, None, None, None] * x0 + t[:, None, None, None] * x1
        with torch.autocast(**_amp(torch.bfloat16)):
            v = model(xt, t, label)
        loss = F.mse_loss(v.float(), x1 - x0)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            torch._foreach_lerp_(ema_params, params, 0.001)
        del x1, x0, t, label, xt, v, loss
        if step % 3 == 2:
            n = _randint(gen, *samples)
            with torch.no_grad(), torch.autocast(**_amp(torch.bfloat16)):
                x = torch.randn(n, 4, side, side, device=DEV)
                cls = torch.randint(0, 1000, (n,), device=DEV)
                both = torch.cat([cls, torch.full_like(cls, 1000)])
                for i in range(euler):
                    tt = torch.full((2 * n,), i / euler, device=DEV)
                    vc, vu = ema(torch.cat([x, x]), tt, both).float().chunk(2)
                    x = x + (vu + 4.0 * (vc - vu)) / euler
                del x, cls, both, tt, vc, vu


WORKLOADS = {
    "sophia_hessian_gpt_train": (sophia_hessian_gpt_train, 8),
    "gradcache_contrastive_train": (gradcache_contrastive_train, 6),
    "snn_surrogate_bptt_train": (snn_surrogate_bptt_train, 8),
    "glow_flow_train": (glow_flow_train, 9),
    "sliding_window_rolling_decode": (sliding_window_rolling_decode, 6),
    "ohem_segmentation_train": (ohem_segmentation_train, 8),
    "perceiver_varlen_train": (perceiver_varlen_train, 10),
    "rectified_flow_sample_train": (rectified_flow_sample_train, 9),
}
