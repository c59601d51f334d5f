"""The fourteenth corpus: eight workloads written on 2026-11-26 (tenth session on the
allocator), held out from every change to the allocator until recorded. Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and
data are smaller, half precision and pinned memory are left out.

Each holds memory in a way the first thirteen corpora do not: Transformer-XL's
segment-level recurrence (every layer attends over a detached memory of the previous
segment, concatenated and sliced each segment); continuous batching over key/value
caches grown by concatenation, a cache per group of requests, shrunk by indexing when
one of its requests finishes; a 128k-vocabulary loss computed in checkpointed chunks of
tokens; segment-anything inference (a windowed ViT over a 1,024-pixel image, then a
mask decoder for 1-64 prompts at a time, the image embedding repeated per prompt);
evolution strategies (a population of flat parameter vectors made from seeds in chunks
and made again for the update); a 120-layer narrow residual MLP whose thousands of
small parameters, gradients and momentum buffers live in the small-block pool; streaming
speech recognition with per-layer attention and convolution caches indexed by the
surviving streams every chunk; and a replay buffer on the GPU grown by concatenation
and trimmed by a slice and a clone.
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call
from torch.utils.checkpoint import checkpoint

from workloads import DEV, Block, Gpt
# The thirteenth corpus's helpers: autocast settings, seeded generators, random choices.
from workloads_thirteenth import CUDA, _amp, _generator, _pick


def _randint(gen, lo, hi):
    """An integer in [lo, hi] (both included)."""
    return int(torch.randint(lo, hi + 1, (1,), generator=gen))


def _half(module):
    """`module` in fp16 on the GPU (fp32 on the CPU, which lacks some fp16 kernels)."""
    return module.half() if CUDA else module


# ------------------------------------------------------------ segment-level recurrence

class XlBlock(nn.Module):
    """A pre-norm decoder block whose attention reads [memory; segment]: keys and values
    over both, queries over the segment, causal within it."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x, mem):
        b, t, d = x.shape
        ctx = x if mem is None else torch.cat([mem, x], dim=1)
        m = ctx.shape[1] - t
        h = self.ln1(ctx)
        hd = d // self.heads
        q = self.q(h[:, m:]).view(b, t, self.heads, hd).transpose(1, 2)
        k, v = (z.view(b, m + t, self.heads, hd).transpose(1, 2)
                for z in self.kv(h).split(d, dim=2))
        mask = torch.ones(t, m + t, dtype=torch.bool, device=x.device).tril(m)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TransformerXl(nn.Module):
    def __init__(self, vocab, d, layers, heads, mem_len):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(XlBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.mem_len = mem_len

    def forward(self, idx, mems):
        x = self.tok(idx)
        new_mems = []
        for blk, mem in zip(self.blocks, mems):
            # Each layer's input joins its memory (no gradient through it), and the
            # newest mem_len positions of the concatenation are kept, as Transformer-XL's
            # _update_mems does: a slice of a new tensor every segment.
            with torch.no_grad():
                cat = x.detach() if mem is None else torch.cat([mem, x.detach()], dim=1)
                new_mems.append(cat[:, -self.mem_len:].detach())
            x = blk(x, mem)
        return self.head(self.ln(x)), new_mems


def transformer_xl_memory_train(steps):
    """Transformer-XL-style training with segment-level recurrence: an 8-layer decoder
    (d 768, 12 heads, vocab 32,000) over 16 streams of text, 4 segments a step, each
    segment's layers attending over [a detached memory of the previous segments (the
    last 512 positions, kept per layer by concatenation and slicing); the segment];
    backward and an AdamW step (gradients clipped to 0.25) after every segment; the
    segment length changes every step among 128, 256, 384 and 512; new streams (empty
    memories) every 4 steps. bf16 autocast."""
    torch.manual_seed(141)
    if CUDA:
        vocab, d, layers, heads, mem_len, batch = 32000, 768, 8, 12, 512, 16
        lengths = (128, 256, 384, 512)
    else:
        vocab, d, layers, heads, mem_len, batch = 1000, 64, 2, 4, 32, 2
        lengths = (8, 16, 24, 32)
    model = TransformerXl(vocab, d, layers, heads, mem_len).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=2.5e-4)
    gen = _generator(141)
    mems = None
    for s in range(steps):
        if s % 4 == 0:
            mems = [None] * layers
        t = _pick(gen, lengths)
        for _ in range(4):
            idx = torch.randint(0, vocab, (batch, t + 1), device=DEV)
            with torch.autocast(**_amp(torch.bfloat16)):
                logits, mems = model(idx[:, :-1], mems)
            loss = F.cross_entropy(logits.float().view(-1, vocab), idx[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
            del logits, loss, idx


# -------------------------------------------- continuous batching, caches grown by cat

def continuous_batching_cat_kv_serve(steps):
    """LLM serving with continuous batching over non-paged key/value caches grown by
    torch.cat every token, as Hugging Face's legacy cache grows: a 12-layer GPT (d 1,024,
    16 heads, vocab 32,000, fp16, inference mode). Requests arrive at random in groups of
    1-4 (at most 16 active); a group's prompts (32-512 tokens, left-padded to the
    longest) are prefilled together and it decodes as one batch with its own caches;
    each request wants 16-256 new tokens (log-uniform), and when one finishes its row is
    dropped by indexing every cache of its group (the old caches freed); every decode
    iteration runs every active group. 8 decode iterations a step."""
    torch.manual_seed(142)
    if CUDA:
        vocab, d, layers, heads = 32000, 1024, 12, 16
        prompt_range, new_range, most = (32, 512), (16, 256), 16
    else:
        vocab, d, layers, heads = 1000, 64, 2, 4
        prompt_range, new_range, most = (4, 32), (2, 16), 8
    model = _half(Gpt(vocab, d, layers, heads, prompt_range[1] + new_range[1])).to(DEV).eval()
    gen = _generator(142)
    groups = []  # {"caches": [...], "last": (b, 1) tokens, "pos": int, "left": [int]}
    active = 0
    with torch.inference_mode():
        for _ in range(steps):
            for _ in range(8):
                # Arrivals: a group of 1-4 with probability one half, admitted while slots
                # are open.
                if float(torch.rand(1, generator=gen)) < 0.5:
                    n = _randint(gen, 1, 4)
                    if active + n <= most:
                        plen = max(_randint(gen, *prompt_range) for _ in range(n))
                        lo, hi = math.log(new_range[0]), math.log(new_range[1])
                        left = [int(math.exp(lo + (hi - lo) * float(torch.rand(1, generator=gen))))
                                for _ in range(n)]
                        prompt = torch.randint(0, vocab, (n, plen), device=DEV)
                        caches = [dict() for _ in model.blocks]
                        logits = model(prompt, caches, 0)
                        groups.append({"caches": caches, "last": logits[:, -1:].argmax(-1),
                                       "pos": plen, "left": left})
                        active += n
                        del logits, prompt
                # One token for every active request, a forward per group.
                survivors = []
                for g in groups:
                    logits = model(g["last"], g["caches"], g["pos"])
                    g["last"] = logits[:, -1:].argmax(-1)
                    g["pos"] += 1
                    del logits
                    g["left"] = [n - 1 for n in g["left"]]
                    keep = [i for i, n in enumerate(g["left"]) if n > 0]
                    active -= len(g["left"]) - len(keep)
                    if not keep:
                        continue  # the whole group finished: its caches go
                    if len(keep) < len(g["left"]):
                        rows = torch.tensor(keep, device=DEV)
                        for c in g["caches"]:
                            c["k"], c["v"] = c["k"][rows], c["v"][rows]
                        g["last"] = g["last"][rows]
                        g["left"] = [g["left"][i] for i in keep]
                    survivors.append(g)
                groups = survivors


# ------------------------------------------------------ a chunked, checkpointed loss

def _chunk_loss(h, weight, targets):
    """The summed cross-entropy of one chunk of hidden states against its targets (the
    logits live only inside this function; checkpoint recomputes them in backward)."""
    logits = F.linear(h, weight)
    return F.cross_entropy(logits.float(), targets, reduction="sum")


def chunked_vocab_loss_train(steps):
    """A GPT (d 1,024, 8 layers, 16 heads) over a 131,072-token vocabulary trained on 4
    sequences of 2,048 with bf16 autocast and AdamW, its LM head and cross-entropy
    computed over chunks of 1,024 tokens, each under torch.utils.checkpoint, as
    memory-saving fused-loss implementations do: one chunk's logits (1,024 x 131,072,
    in bf16 and again in fp32) at a time, in the forward and again in the backward."""
    torch.manual_seed(143)
    if CUDA:
        vocab, d, layers, heads, batch, t, chunk = 131072, 1024, 8, 16, 4, 2048, 1024
    else:
        vocab, d, layers, heads, batch, t, chunk = 2000, 64, 2, 4, 2, 64, 32
    model = Gpt(vocab, d, layers, heads, t).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(steps):
        idx = torch.randint(0, vocab, (batch, t + 1), device=DEV)
        targets = idx[:, 1:].reshape(-1)
        with torch.autocast(**_amp(torch.bfloat16)):
            pos = torch.arange(t, device=DEV)
            x = model.tok(idx[:, :-1]) + model.pos(pos)
            for blk in model.blocks:
                x = blk(x)
            h = model.ln(x).view(-1, d)
            loss = 0
            for i in range(0, h.shape[0], chunk):
                loss = loss + checkpoint(_chunk_loss, h[i:i + chunk], model.head.weight,
                                         targets[i:i + chunk], use_reentrant=False)
            loss = loss / h.shape[0]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del x, h, loss, idx, targets


# ------------------------------------------------------------- segment-anything inference

class EncBlock(Block):
    """A ViT block (bidirectional attention) over a (B, H, W, C) grid, attending within
    windows of `window` x `window` (the grid padded to a multiple) or globally: the
    layers of `workloads.Block`, its attention and forward pass replaced."""

    def __init__(self, d, heads, window):
        super().__init__(d, heads)
        self.window = window

    def attend(self, x):
        b, n, d = x.shape
        q, k, v = (z.view(b, n, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))

    def forward(self, x):
        b, hh, ww, d = x.shape
        h = self.ln1(x)
        w = self.window
        if w:
            ph, pw = -hh % w, -ww % w
            h = F.pad(h, (0, 0, 0, pw, 0, ph))
            gh, gw = (hh + ph) // w, (ww + pw) // w
            h = h.view(b, gh, w, gw, w, d).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, d)
            h = self.attend(h)
            h = h.view(b, gh, gw, w, w, d).permute(0, 1, 3, 2, 4, 5).reshape(
                b, gh * w, gw * w, d)[:, :hh, :ww].contiguous()
        else:
            h = self.attend(h.reshape(b, hh * ww, d)).view(b, hh, ww, d)
        x = x + h
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class SamEncoder(nn.Module):
    def __init__(self, d, blocks, heads, grid, window, out=256):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.pos = nn.Parameter(torch.zeros(1, grid, grid, d))
        self.blocks = nn.ModuleList(
            EncBlock(d, heads, 0 if i % 3 == 2 else window) for i in range(blocks))
        self.neck = nn.Sequential(nn.Conv2d(d, out, 1, bias=False), nn.GroupNorm(1, out),
                                  nn.Conv2d(out, out, 3, padding=1, bias=False),
                                  nn.GroupNorm(1, out))

    def forward(self, img):
        x = self.patch(img).permute(0, 2, 3, 1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.neck(x.permute(0, 3, 1, 2))


class Attn(nn.Module):
    """Multi-head attention with an internal width of d / downsample (as SAM's)."""

    def __init__(self, d, heads, downsample=1):
        super().__init__()
        inner = d // downsample
        self.heads = heads
        self.q, self.k, self.v = nn.Linear(d, inner), nn.Linear(d, inner), nn.Linear(d, inner)
        self.out = nn.Linear(inner, d)

    def forward(self, q, k, v):
        def split(z):
            b, n, c = z.shape
            return z.view(b, n, self.heads, c // self.heads).transpose(1, 2)

        q, k, v = split(self.q(q)), split(self.k(k)), split(self.v(v))
        y = F.scaled_dot_product_attention(q, k, v)
        b, _, n, _ = y.shape
        return self.out(y.transpose(1, 2).reshape(b, n, -1))


class TwoWayBlock(nn.Module):
    """SAM's two-way block: token self-attention, tokens to image, an MLP on the tokens,
    image to tokens."""

    def __init__(self, d, heads):
        super().__init__()
        self.self_attn = Attn(d, heads)
        self.t2i, self.i2t = Attn(d, heads, 2), Attn(d, heads, 2)
        self.mlp = nn.Sequential(nn.Linear(d, 2048), nn.ReLU(), nn.Linear(2048, d))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(4))

    def forward(self, tokens, image, tok_pe, img_pe):
        q = tokens + tok_pe
        tokens = self.norms[0](tokens + self.self_attn(q, q, tokens))
        q, k = tokens + tok_pe, image + img_pe
        tokens = self.norms[1](tokens + self.t2i(q, k, image))
        tokens = self.norms[2](tokens + self.mlp(tokens))
        q, k = tokens + tok_pe, image + img_pe
        image = self.norms[3](image + self.i2t(k, q, tokens))
        return tokens, image


class MaskDecoder(nn.Module):
    """Point prompts to 4 masks and IoU scores per prompt, SAM-style: random Fourier
    positional encodings, a two-way transformer of 2 blocks (d 256) over the image
    embedding repeated per prompt, two transposed convolutions up to 4x the embedding's
    grid, hypernetwork MLPs making each mask from the upscaled features."""

    def __init__(self, d=256, masks=4):
        super().__init__()
        self.register_buffer("gauss", torch.randn(2, d // 2))
        self.point_emb = nn.Embedding(2, d)
        self.out_tokens = nn.Embedding(1 + masks, d)
        self.no_mask = nn.Parameter(torch.zeros(d))
        self.blocks = nn.ModuleList(TwoWayBlock(d, 8) for _ in range(2))
        self.final = Attn(d, 8, 2)
        self.ln = nn.LayerNorm(d)
        self.up = nn.Sequential(nn.ConvTranspose2d(d, d // 4, 2, 2), nn.GroupNorm(1, d // 4),
                                nn.GELU(), nn.ConvTranspose2d(d // 4, d // 8, 2, 2), nn.GELU())
        self.hyper = nn.ModuleList(
            nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(),
                          nn.Linear(d, d // 8)) for _ in range(masks))
        self.iou = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, masks))

    def pe(self, coords):
        """Fourier features of coordinates in [0, 1]."""
        z = (2 * coords - 1) @ self.gauss.to(coords.dtype) * (2 * math.pi)
        return torch.cat([z.sin(), z.cos()], dim=-1)

    def forward(self, emb, points, labels):
        n = points.shape[0]
        _, c, gh, gw = emb.shape
        sparse = self.pe(points) + self.point_emb(labels)
        tokens = torch.cat([self.out_tokens.weight[None].expand(n, -1, -1), sparse], dim=1)
        ys, xs = torch.meshgrid(torch.linspace(0, 1, gh, device=emb.device, dtype=emb.dtype),
                                torch.linspace(0, 1, gw, device=emb.device, dtype=emb.dtype),
                                indexing="ij")
        img_pe = self.pe(torch.stack([xs, ys], dim=-1)).view(1, gh * gw, c)
        # The image embedding once per prompt, as SAM's decoder repeats it.
        src = torch.repeat_interleave(emb + self.no_mask.view(1, c, 1, 1), n, dim=0)
        image = src.flatten(2).transpose(1, 2)
        out = tokens
        for blk in self.blocks:
            out, image = blk(out, image, tokens, img_pe)
        out = self.ln(out + self.final(out + tokens, image + img_pe, image))
        feat = self.up(image.transpose(1, 2).reshape(n, c, gh, gw))
        hyper = torch.stack([mlp(out[:, 1 + i]) for i, mlp in enumerate(self.hyper)], dim=1)
        b, c8, h, w = feat.shape
        masks = (hyper @ feat.view(b, c8, h * w)).view(b, -1, h, w)
        return masks, self.iou(out[:, 0])


def sam_prompt_decode_infer(steps):
    """Segment-anything-style inference, fp16: a ViT image encoder (12 blocks, d 768,
    12 heads; a 1,024 x 1,024 image as 64 x 64 patches of 16; windows of 14 with every
    third block global; a 256-channel neck) run once per image, then a two-way-attention
    mask decoder called 3-6 times per image for 1-64 point prompts each (a new count per
    call), each call making 4 masks of 256 x 256 and IoU scores per prompt, keeping the
    best mask thresholded, all freed before the next. 4 images a step."""
    torch.manual_seed(144)
    if CUDA:
        side, d, blocks, heads, window, most = 1024, 768, 12, 12, 14, 64
    else:
        side, d, blocks, heads, window, most = 128, 64, 3, 4, 3, 4
    grid = side // 16
    encoder = _half(SamEncoder(d, blocks, heads, grid, window)).to(DEV).eval()
    decoder = _half(MaskDecoder()).to(DEV).eval()
    dtype = torch.half if CUDA else torch.float
    gen = _generator(144)
    with torch.inference_mode():
        for _ in range(steps):
            for _ in range(4):
                img = torch.randn(1, 3, side, side, device=DEV, dtype=dtype)
                emb = encoder(img)
                del img
                for _ in range(_randint(gen, 3, 6)):
                    n = _randint(gen, 1, most)
                    points = torch.rand(n, 2, 2, generator=gen).to(DEV, dtype)
                    labels = torch.randint(0, 2, (n, 2), generator=gen).to(DEV)
                    masks, iou = decoder(emb, points, labels)
                    best = masks[torch.arange(n, device=DEV), iou.argmax(-1)] > 0
                    best.sum().item()
                    del masks, iou, best, points, labels
                del emb


# ------------------------------------------------------------------ evolution strategies

def evolution_strategies_train(steps):
    """OpenAI-style evolution strategies on an MLP policy (1,024-2,560-2,560-256, about
    9.8M parameters) held as one flat vector: each step samples 32 noise vectors, used
    antithetically (64 evaluations), made from a seed per chunk of 8 (8 x 9.8M floats);
    each perturbed vector (theta +- sigma * noise, a new flat vector) is evaluated with
    torch.func.functional_call for a 4-step rollout of 4,096 simulated environments (no
    backward), and the noise is freed after its chunk; then the fitnesses are ranked and
    the noise is made again from the same seeds, chunk by chunk, to sum it weighted by
    the centred ranks into the update (Adam on the flat vector)."""
    torch.manual_seed(145)
    if CUDA:
        dims, envs, horizon, noises, chunk = (1024, 2560, 2560, 256), 4096, 4, 32, 8
    else:
        dims, envs, horizon, noises, chunk = (32, 64, 64, 8), 16, 3, 8, 4
    layers = []
    for i in range(3):
        layers += [nn.Linear(dims[i], dims[i + 1])] + ([nn.Tanh()] if i < 2 else [])
    policy = nn.Sequential(*layers).to(DEV).requires_grad_(False)
    names = [n for n, _ in policy.named_parameters()]
    shapes = [p.shape for _, p in policy.named_parameters()]
    theta = torch.cat([p.detach().flatten() for p in policy.parameters()]).requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=0.01)
    sigma = 0.02
    a_obs = torch.randn(dims[0], dims[0], device=DEV) / math.sqrt(dims[0])
    a_act = torch.randn(dims[3], dims[0], device=DEV) / math.sqrt(dims[3])
    pop = 2 * noises

    def unflatten(flat):
        return dict(zip(names, (t.view(s) for t, s in zip(
            flat.split([math.prod(s) for s in shapes]), shapes))))

    def rollout(flat, start):
        params = unflatten(flat)
        obs, ret = start, 0
        for _ in range(horizon):
            act = functional_call(policy, params, (obs,))
            obs = torch.tanh(obs @ a_obs + act @ a_act)
            ret = ret - obs[:, :16].pow(2).mean() - 0.01 * act.pow(2).mean()
        return ret

    def noise(step, c):
        g = torch.Generator(device=DEV).manual_seed(1000 * step + c)
        return torch.randn(chunk, theta.numel(), device=DEV, generator=g)

    with torch.no_grad():
        for s in range(steps):
            start = torch.randn(envs, dims[0], device=DEV)
            fitness = torch.empty(pop, device=DEV)
            # Members i and i + noises share a noise vector, with opposite signs.
            for c in range(0, noises, chunk):
                eps = noise(s, c)
                for j in range(chunk):
                    for sign, at in ((1, c + j), (-1, c + j + noises)):
                        fitness[at] = rollout(theta + sign * sigma * eps[j], start)
                del eps
            ranks = torch.empty(pop, device=DEV)
            ranks[fitness.argsort()] = torch.arange(pop, device=DEV, dtype=ranks.dtype)
            weights = ranks / (pop - 1) - 0.5
            step_dir = torch.zeros_like(theta)
            for c in range(0, noises, chunk):
                eps = noise(s, c)
                w = weights[c:c + chunk] - weights[c + noises:c + noises + chunk]
                step_dir += w @ eps
                del eps
            theta.grad = -step_dir / (pop * sigma)
            opt.step()
            theta.grad = None
            del start, fitness, ranks, weights, step_dir


# -------------------------------------------------------- deep, narrow, many parameters

class NarrowBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, d)
        self.fc2 = nn.Linear(d, d)
        self.scale = nn.Parameter(torch.full((d,), 0.1))

    def forward(self, x):
        return x + self.scale * self.fc2(F.gelu(self.fc1(self.ln(x))))


def deep_narrow_many_params_train(steps):
    """A 120-layer residual MLP of width 128 (each layer a LayerNorm, two linear layers
    with biases and a per-channel scale: 840 parameter tensors of 512 bytes to 64 KiB)
    trained with SGD with momentum (foreach=True, weight decay) and clip_grad_norm_,
    gradients set to None every step; the batch size changes every step among 64, 96,
    128 and 256: thousands of small blocks (parameters, gradients, momentum buffers,
    activations, per-tensor norms)."""
    torch.manual_seed(146)
    width, depth = 128, (120 if CUDA else 12)
    model = nn.Sequential(*(NarrowBlock(width) for _ in range(depth)),
                          nn.LayerNorm(width), nn.Linear(width, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4,
                          foreach=True)
    gen = _generator(146)
    for _ in range(steps):
        b = _pick(gen, (64, 96, 128, 256))
        x = torch.randn(b, width, device=DEV)
        y = torch.randint(0, 10, (b,), device=DEV)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        del x, y, loss


# ------------------------------------------------------------ streaming speech recognition

class StreamingConformerLayer(nn.Module):
    """A conformer layer for chunked streaming: half-step feed-forward, attention over a
    left context of cached keys and values and the chunk, a causal depthwise
    convolution continuing from a cached state, half-step feed-forward."""

    def __init__(self, d, heads, kernel, left):
        super().__init__()
        self.heads, self.left, self.kernel = heads, left, kernel

        def ffn():
            return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(),
                                 nn.Linear(4 * d, d))

        self.ff1, self.ff2 = ffn(), ffn()
        self.ln_att = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln_conv = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, kernel, groups=d)
        self.norm = nn.GroupNorm(1, d)
        self.pw2 = nn.Conv1d(d, d, 1)
        self.ln_out = nn.LayerNorm(d)

    def forward(self, x, k_cache, v_cache, conv_cache):
        b, t, d = x.shape
        hd = d // self.heads
        x = x + 0.5 * self.ff1(x)
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2)
                   for z in self.qkv(self.ln_att(x)).split(d, dim=2))
        k = torch.cat([k_cache, k], dim=2)
        v = torch.cat([v_cache, v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        c = F.glu(self.pw1(self.ln_conv(x).transpose(1, 2)), dim=1)
        c = torch.cat([conv_cache, c], dim=2)
        new_conv = c[:, :, -(self.kernel - 1):]
        c = self.pw2(F.silu(self.norm(self.dw(c))))
        x = x + c.transpose(1, 2)
        x = self.ln_out(x + 0.5 * self.ff2(x))
        return x, k[:, :, -self.left:], v[:, :, -self.left:], new_conv


def streaming_conformer_infer(steps):
    """Streaming speech recognition, fp16 inference mode: a 12-layer conformer-like
    encoder (d 512, 8 heads, depthwise convolution of kernel 31) over chunks of 16-64
    frames after a 4x subsampling of 80-dim features (a new length per chunk), each layer
    attending over a cache of 64 frames of keys and values to its left and continuing its
    convolution from a cache of 30 frames; a CTC head (vocab 1,024) decoded greedily.
    Up to 48 streams in the batch; each lasts 4-40 chunks, and new ones start at random:
    every chunk the batch is rebuilt by indexing each layer's caches with the surviving
    streams and concatenating zero caches for the new ones. 12 chunks a step."""
    torch.manual_seed(147)
    if CUDA:
        d, layers, heads, kernel, left, most, frames = 512, 12, 8, 31, 64, 48, (16, 64)
    else:
        d, layers, heads, kernel, left, most, frames = 64, 2, 4, 31, 8, 6, (4, 8)
    feat, vocab = 80, 1024
    dtype = torch.half if CUDA else torch.float
    sub = _half(nn.Linear(4 * feat, d)).to(DEV).eval()
    encoder = _half(nn.ModuleList(StreamingConformerLayer(d, heads, kernel, left)
                                  for _ in range(layers))).to(DEV).eval()
    head = _half(nn.Linear(d, vocab)).to(DEV).eval()
    gen = _generator(147)
    hd = d // heads
    remaining = []  # chunks left per stream, in batch order
    caches = None  # per layer: [k, v, conv]
    with torch.inference_mode():
        for _ in range(steps):
            for _ in range(12):
                remaining = [r - 1 for r in remaining]
                keep = [i for i, r in enumerate(remaining) if r > 0]
                new = 0
                while len(keep) + new < most and float(torch.rand(1, generator=gen)) < 0.4:
                    new += 1
                if not keep and not new:
                    new = 1
                starts = [_randint(gen, 4, 40) for _ in range(new)]
                if caches is None or len(keep) < len(remaining) or new:
                    rows = torch.tensor(keep, dtype=torch.long, device=DEV)
                    fresh = [(new, heads, left, hd), (new, heads, left, hd), (new, d, kernel - 1)]
                    rebuilt = []
                    for layer in range(layers):
                        old = caches[layer] if caches is not None else None
                        rebuilt.append([
                            torch.cat([old[j][rows] if old is not None else
                                       torch.zeros(0, *shape[1:], device=DEV, dtype=dtype),
                                       torch.zeros(shape, device=DEV, dtype=dtype)])
                            for j, shape in enumerate(fresh)])
                    caches = rebuilt
                    del rows, rebuilt
                remaining = [remaining[i] for i in keep] + starts
                b, t = len(remaining), _randint(gen, *frames)
                x = torch.randn(b, 4 * t, feat, device=DEV, dtype=dtype)
                h = sub(x.view(b, t, 4 * feat))
                for layer, mod in enumerate(encoder):
                    h, k, v, conv = mod(h, *caches[layer])
                    caches[layer] = [k, v, conv]
                    del k, v, conv
                tokens = head(h).log_softmax(-1).argmax(-1)
                tokens.cpu()
                del x, h, tokens


# ----------------------------------------------------------------- a replay buffer on the GPU

def _mlp(i, o, hidden):
    return nn.Sequential(nn.Linear(i, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, o))


def gpu_replay_buffer_rl_train(steps):
    """Off-policy RL (SAC-like) with its replay buffer on the GPU: episodes of 50-1,000
    transitions (observations of 256, actions of 16, rewards, done flags, next
    observations) made on the host and copied over, appended to the five buffer tensors
    with torch.cat, the buffer trimmed to its newest 200,000 transitions by slicing and
    .clone() when over capacity; the buffer is first filled with random-action episodes
    to 190,000 transitions (SAC's start steps, longer here so that trimming comes within
    the recording), then each step is an episode (actions from the actor, no grad)
    followed by one update per 100 transitions (at least one): minibatches of 1,024
    indexed at random train a tanh-Gaussian actor and two critics (MLPs of 2 x 512) with
    target critics (Polyak averaging), three Adam optimizers (actor, critics,
    temperature)."""
    torch.manual_seed(148)
    obs_dim, act_dim, hidden, batch = 256, 16, 512, 1024
    capacity, prefill = (200_000, 190_000) if CUDA else (4000, 3000)
    ep_range = (50, 1000)
    actor = _mlp(obs_dim, 2 * act_dim, hidden).to(DEV)
    q1, q2 = _mlp(obs_dim + act_dim, 1, hidden).to(DEV), _mlp(obs_dim + act_dim, 1, hidden).to(DEV)
    t1, t2 = copy.deepcopy(q1).requires_grad_(False), copy.deepcopy(q2).requires_grad_(False)
    log_alpha = torch.zeros(1, device=DEV, requires_grad=True)
    opt_actor = torch.optim.Adam(actor.parameters(), lr=3e-4)
    opt_q = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=3e-4)
    opt_alpha = torch.optim.Adam([log_alpha], lr=3e-4)
    target_params = [*t1.parameters(), *t2.parameters()]
    q_params = [*q1.parameters(), *q2.parameters()]
    gen = _generator(148)
    buf = None  # [obs, act, rew, done, next_obs]

    def sample(obs):
        mean, log_std = actor(obs).chunk(2, dim=-1)
        std = log_std.clamp(-5, 2).exp()
        u = mean + std * torch.randn_like(mean)
        a = torch.tanh(u)
        logp = (-0.5 * ((u - mean) / std).pow(2) - std.log() - 0.5 * math.log(2 * math.pi)
                - torch.log(1 - a.pow(2) + 1e-6)).sum(-1)
        return a, logp

    def add_episode(random_actions):
        nonlocal buf
        n = _randint(gen, *ep_range)
        obs = torch.randn(n + 1, obs_dim, generator=gen)
        rew = torch.randn(n, generator=gen)
        done = torch.zeros(n)
        done[-1] = 1
        if CUDA:
            obs, rew, done = obs.pin_memory(), rew.pin_memory(), done.pin_memory()
        obs = obs.to(DEV, non_blocking=True)
        if random_actions:
            act = torch.rand(n, act_dim, device=DEV) * 2 - 1
        else:
            with torch.no_grad():
                act = sample(obs[:-1])[0]
        ep = [obs[:-1], act, rew.to(DEV, non_blocking=True), done.to(DEV, non_blocking=True),
              obs[1:]]
        buf = ep if buf is None else [torch.cat([b, e]) for b, e in zip(buf, ep)]
        if buf[0].shape[0] > capacity:
            buf = [b[-capacity:].clone() for b in buf]
        return n

    def update():
        idx = torch.randint(0, buf[0].shape[0], (batch,), device=DEV)
        o, a, r, dn, o2 = (b[idx] for b in buf)
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            a2, logp2 = sample(o2)
            x2 = torch.cat([o2, a2], dim=-1)
            q_next = torch.min(t1(x2), t2(x2)).squeeze(-1) - alpha * logp2
            target = r + 0.99 * (1 - dn) * q_next
        x = torch.cat([o, a], dim=-1)
        q_loss = F.mse_loss(q1(x).squeeze(-1), target) + F.mse_loss(q2(x).squeeze(-1), target)
        opt_q.zero_grad(set_to_none=True)
        q_loss.backward()
        opt_q.step()
        a_new, logp = sample(o)
        x_new = torch.cat([o, a_new], dim=-1)
        actor_loss = (alpha * logp - torch.min(q1(x_new), q2(x_new)).squeeze(-1)).mean()
        opt_actor.zero_grad(set_to_none=True)
        actor_loss.backward()
        opt_actor.step()
        alpha_loss = -(log_alpha * (logp.detach() - act_dim)).mean()
        opt_alpha.zero_grad(set_to_none=True)
        alpha_loss.backward()
        opt_alpha.step()
        with torch.no_grad():
            torch._foreach_lerp_(target_params, q_params, 0.005)

    while buf is None or buf[0].shape[0] < prefill:
        add_episode(random_actions=True)
    for _ in range(steps):
        n = add_episode(random_actions=False)
        for _ in range(max(1, n // 100)):
            update()


WORKLOADS = {
    "transformer_xl_memory_train": (transformer_xl_memory_train, 12),
    "continuous_batching_cat_kv_serve": (continuous_batching_cat_kv_serve, 7),
    "chunked_vocab_loss_train": (chunked_vocab_loss_train, 40),
    "sam_prompt_decode_infer": (sam_prompt_decode_infer, 12),
    "evolution_strategies_train": (evolution_strategies_train, 16),
    "deep_narrow_many_params_train": (deep_narrow_many_params_train, 16),
    "streaming_conformer_infer": (streaming_conformer_infer, 10),
    "gpu_replay_buffer_rl_train": (gpu_replay_buffer_rl_train, 60),
}
