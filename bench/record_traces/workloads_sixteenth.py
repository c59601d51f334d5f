"""The sixteenth corpus: eight workloads written on 2026-11-26 (eleventh session on the
allocator), held out from every change to the allocator until recorded. Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and
data are smaller.

Each holds memory in a way the first fifteen corpora do not: a Llama-style model
(grouped-query attention, rotary embeddings, SwiGLU's 2,816-wide hidden layer, RMSNorm)
with the fused AdamW; torchvision's Faster R-CNN trained at several scales (anchors,
proposals and RoI features of data-dependent counts); GRPO (a group of sampled
completions per prompt, then the policy's and a frozen reference's log-probabilities
over them, in one process); an Evoformer-style pair stack (N x N x c pair features and
N^3 triangle attention for crops of 64-256 residues); attention computed block by block
with a running softmax in eager PyTorch; a four-stage pipeline on one GPU run in the
one-forward-one-backward order over eight micro-batches (activations freed out of
creation order); a greedy model soup (fine-tuned copies brought to the GPU one at a
time, averaged and evaluated); and speech recognition from raw audio (an STFT and a mel
filterbank on the GPU, clips of 5-30 s).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from workloads import DEV, Block, Gpt
# The thirteenth corpus's helpers: autocast settings, seeded generators.
from workloads_thirteenth import CUDA, _amp, _generator
# The fourteenth corpus's helper: an integer in a closed range.
from workloads_fourteenth import _randint


# ------------------------------------------------------------------------ a Llama block

class RmsNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rope(x, cos, sin):
    """Rotary position embedding of `x` (batch, heads, length, head_dim)."""
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.norm1, self.norm2 = RmsNorm(d), RmsNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, 2 * kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def llama_gqa_swiglu_train(steps):
    """A 12-layer Llama-style model (d 1,024, 16 query heads sharing 4 key/value heads,
    rotary embeddings, SwiGLU with a 2,816-wide hidden layer, RMSNorm, vocab 32,000,
    untied head) trained on 8 x 1,024 tokens, bf16 autocast, AdamW with `fused=True`
    (one kernel over all parameters) and gradient clipping."""
    torch.manual_seed(161)
    if CUDA:
        vocab, d, layers, heads, kv, hidden, batch, ctx = 32000, 1024, 12, 16, 4, 2816, 8, 1024
    else:
        vocab, d, layers, heads, kv, hidden, batch, ctx = 300, 64, 2, 4, 2, 176, 2, 32
    emb = nn.Embedding(vocab, d).to(DEV)
    blocks = nn.ModuleList(LlamaBlock(d, heads, kv, hidden) for _ in range(layers)).to(DEV)
    norm, head = RmsNorm(d).to(DEV), nn.Linear(d, vocab, bias=False).to(DEV)
    params = [*emb.parameters(), *blocks.parameters(), *norm.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, **({"fused": True} if CUDA else {}))
    hd = d // heads
    freqs = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=DEV).float() / hd))
    angles = torch.outer(torch.arange(ctx, device=DEV).float(), freqs)
    cos, sin = angles.cos(), angles.sin()
    for _ in range(steps):
        idx = torch.randint(0, vocab, (batch, ctx + 1), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            x = emb(idx[:, :-1])
            for blk in blocks:
                x = blk(x, cos, sin)
            logits = head(norm(x))
        loss = F.cross_entropy(logits.float().view(-1, vocab), idx[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del idx, x, logits, loss


# ------------------------------------------------------------------------- Faster R-CNN

def fasterrcnn_multiscale_train(steps):
    """torchvision's Faster R-CNN (ResNet-50 FPN, random weights, 91 classes) trained as
    detection recipes do: batches of 4 images of 480-800 x 480-1,000 pixels, each with
    1-20 boxes, resized by the model's transform to a shorter side drawn from (480, 544,
    608, 672, 736, 800) each step; SGD with momentum. The region proposal network keeps
    2,000 proposals an image, the RoI heads sample 512; every count after the backbone
    depends on the data."""
    torch.manual_seed(162)
    from torchvision.models.detection import fasterrcnn_resnet50_fpn
    if CUDA:
        scales, max_size, batch, sizes = (480, 544, 608, 672, 736, 800), 1333, 4, ((480, 800),
                                                                                (480, 1000))
    else:
        scales, max_size, batch, sizes = (96, 128), 160, 2, ((96, 128), (96, 160))
    model = fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91,
                                    min_size=scales, max_size=max_size).to(DEV).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    gen = _generator(162)
    for _ in range(steps):
        images, targets = [], []
        for _ in range(batch):
            h, w = _randint(gen, *sizes[0]), _randint(gen, *sizes[1])
            images.append(torch.rand(3, h, w, generator=gen).to(DEV))
            n = _randint(gen, 1, 20)
            xy = torch.rand(n, 2, generator=gen) * torch.tensor([w * 0.8, h * 0.8])
            wh = torch.rand(n, 2, generator=gen) * torch.tensor([w * 0.2, h * 0.2]) + 8
            targets.append({"boxes": torch.cat([xy, xy + wh], 1).to(DEV),
                            "labels": torch.randint(1, 91, (n,), generator=gen).to(DEV)})
        losses = model(images, targets)
        loss = sum(losses.values())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del images, targets, losses, loss


# --------------------------------------------------------------------------------- GRPO

def grpo_generate_train(steps):
    """GRPO (group relative policy optimisation) on a 12-layer GPT (d 768, vocab 32,000):
    each step samples 8 completions for each of 4 prompts of 32-96 tokens (32 sequences,
    fp16 generation with caches grown by concatenation, 48-128 new tokens, sequences
    ending at random), scores them at random, normalises the rewards within each group,
    then computes the policy's log-probabilities over every completion (with grad, bf16
    autocast) and a frozen reference's (no grad), and trains on the clipped
    advantage-weighted ratio plus a KL penalty; AdamW."""
    torch.manual_seed(163)
    if CUDA:
        vocab, d, layers, heads, prompts, group, plen, new = 32000, 768, 12, 12, 4, 8, (32, 96), (48, 128)
    else:
        vocab, d, layers, heads, prompts, group, plen, new = 300, 32, 2, 4, 2, 2, (4, 8), (3, 6)
    ctx = plen[1] + new[1]
    policy = Gpt(vocab, d, layers, heads, ctx).to(DEV)
    reference = Gpt(vocab, d, layers, heads, ctx).to(DEV).eval().requires_grad_(False)
    reference.load_state_dict(policy.state_dict())
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-6)
    gen = _generator(163)
    dev_gen = torch.Generator(device=DEV).manual_seed(163)

    def logprobs(model, seq, t0):
        logits = model(seq[:, :-1])[:, t0 - 1:].float()
        return torch.gather(logits.log_softmax(-1), 2, seq[:, t0:, None]).squeeze(-1)

    for _ in range(steps):
        t0, n_new = _randint(gen, *plen), _randint(gen, *new)
        prompt = torch.randint(0, vocab, (prompts, t0), device=DEV).repeat_interleave(group, 0)
        policy.eval()
        with torch.no_grad(), torch.autocast(**_amp(torch.float16)):
            caches = [dict() for _ in policy.blocks]
            logits = policy(prompt, caches, 0)[:, -1].float()
            out = [prompt]
            for i in range(n_new):
                tok = torch.multinomial(logits.softmax(-1), 1, generator=dev_gen)
                out.append(tok)
                logits = policy(tok, caches, t0 + i)[:, -1].float()
            del caches, logits
        seq = torch.cat(out, 1)
        lengths = torch.randint(1, n_new + 1, (seq.shape[0],), device=DEV)
        mask = (torch.arange(n_new, device=DEV)[None] < lengths[:, None]).float()
        rewards = torch.randn(prompts, group, device=DEV)
        adv = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4))
        adv = adv.reshape(-1, 1)
        policy.train()
        with torch.no_grad(), torch.autocast(**_amp(torch.bfloat16)):
            ref_lp = logprobs(reference, seq, t0)
        with torch.autocast(**_amp(torch.bfloat16)):
            lp = logprobs(policy, seq, t0)
        ratio = torch.exp(lp - lp.detach())
        surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1
        loss = -((surrogate - 0.04 * kl) * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del prompt, out, seq, lengths, mask, rewards, adv, ref_lp, lp, ratio, surrogate, kl, loss


# ------------------------------------------------------------------- an Evoformer pair stack

class PairBlock(nn.Module):
    """The pair half of an Evoformer block: triangle multiplicative updates (outgoing and
    incoming), triangle attention around the starting node, a transition."""

    def __init__(self, c, heads, hidden=128):
        super().__init__()
        self.heads = heads
        self.mul = nn.ModuleList(nn.ModuleDict({
            "norm": nn.LayerNorm(c), "ab": nn.Linear(c, 4 * hidden), "g": nn.Linear(c, c),
            "out_norm": nn.LayerNorm(hidden), "out": nn.Linear(hidden, c)}) for _ in range(2))
        self.att_norm = nn.LayerNorm(c)
        self.qkvg = nn.Linear(c, 4 * c, bias=False)
        self.bias = nn.Linear(c, heads, bias=False)
        self.att_out = nn.Linear(c, c)
        self.trans = nn.Sequential(nn.LayerNorm(c), nn.Linear(c, 4 * c), nn.ReLU(),
                                   nn.Linear(4 * c, c))

    def triangle_mul(self, z, m, outgoing):
        h = m["norm"](z)
        a, ga, b, gb = m["ab"](h).chunk(4, -1)
        a, b = a * torch.sigmoid(ga), b * torch.sigmoid(gb)
        eq = "ikc,jkc->ijc" if outgoing else "kic,kjc->ijc"
        return z + torch.sigmoid(m["g"](h)) * m["out"](m["out_norm"](torch.einsum(eq, a, b)))

    def forward(self, z):
        n, _, c = z.shape
        z = self.triangle_mul(z, self.mul[0], True)
        z = self.triangle_mul(z, self.mul[1], False)
        h = self.att_norm(z)
        q, k, v, g = self.qkvg(h).view(n, n, 4, self.heads, c // self.heads).unbind(2)
        bias = self.bias(h).permute(2, 0, 1)  # heads, j, k
        q, k, v = (t.permute(0, 2, 1, 3) for t in (q, k, v))  # i, heads, j, hd
        att = (q @ k.transpose(-1, -2) / math.sqrt(c // self.heads) + bias[None]).softmax(-1)
        y = (att @ v).permute(0, 2, 1, 3) * torch.sigmoid(g)
        z = z + self.att_out(y.reshape(n, n, c))
        return z + self.trans(z)


def evoformer_pair_train(steps):
    """An Evoformer-style pair stack (AlphaFold's trunk without the MSA): 4 blocks over
    pair features of N x N x 128 for crops of 64-256 residues (a new N each step), each
    block two triangle multiplicative updates (einsums over N^3), triangle attention
    around the starting node with 4 heads (N attention maps of N x N each) and a
    transition; blocks checkpointed, bf16 autocast, Adam, a distogram loss."""
    torch.manual_seed(164)
    if CUDA:
        c, heads, blocks_n, crops = 128, 4, 4, (64, 256)
    else:
        c, heads, blocks_n, crops = 16, 2, 1, (8, 12)
    embed = nn.Linear(2 * 64, c).to(DEV)
    blocks = nn.ModuleList(PairBlock(c, heads) for _ in range(blocks_n)).to(DEV)
    dist = nn.Linear(c, 64).to(DEV)
    opt = torch.optim.Adam([*embed.parameters(), *blocks.parameters(), *dist.parameters()],
                           lr=1e-3)
    gen = _generator(164)
    for _ in range(steps):
        n = _randint(gen, *crops)
        single = torch.randn(n, 64, device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            z = embed(torch.cat([single[:, None].expand(n, n, 64),
                                 single[None].expand(n, n, 64)], -1))
            for blk in blocks:
                z = checkpoint(blk, z, use_reentrant=False)
            logits = dist(0.5 * (z + z.transpose(0, 1)))
        target = torch.randint(0, 64, (n, n), device=DEV)
        loss = F.cross_entropy(logits.float().view(-1, 64), target.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del single, z, logits, target, loss


# ------------------------------------------------------------ block-by-block attention

class BlockwiseBlock(Block):
    """`Block` with causal attention computed by blocks of 512 queries and keys with a
    running maximum and sum (flash attention's algorithm in eager PyTorch)."""

    def __init__(self, d, heads, chunk):
        super().__init__(d, heads)
        self.chunk = chunk

    def attend(self, x, cache=None):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        outs = []
        for qs in range(0, t, self.chunk):
            qb = q[:, :, qs:qs + self.chunk] / math.sqrt(hd)
            m = torch.full(qb.shape[:-1] + (1,), float("-inf"), device=x.device)
            s = torch.zeros_like(m)
            acc = torch.zeros(qb.shape[:-1] + (hd,), device=x.device)
            for ks in range(0, qs + self.chunk, self.chunk):
                scores = (qb @ k[:, :, ks:ks + self.chunk].transpose(-1, -2)).float()
                if ks == qs:
                    mask = torch.ones(scores.shape[-2:], dtype=torch.bool,
                                      device=x.device).triu(1)
                    scores = scores.masked_fill(mask, float("-inf"))
                m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
                p = torch.exp(scores - m_new)
                scale = torch.exp(m - m_new)
                s = s * scale + p.sum(-1, keepdim=True)
                acc = acc * scale + p @ v[:, :, ks:ks + self.chunk].float()
                m = m_new
            outs.append((acc / s).to(x.dtype))
        y = torch.cat(outs, dim=2)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


def blockwise_attention_train(steps):
    """A 6-layer GPT (d 1,024, 16 heads, vocab 32,000) over 2 x 4,096 tokens whose
    attention is computed block by block (512 x 512 blocks of causal scores with a
    running maximum and sum, in fp32, as flash attention does in a kernel), each layer
    checkpointed; fp16 autocast with a gradient scaler, AdamW."""
    torch.manual_seed(165)
    if CUDA:
        vocab, d, layers, heads, batch, ctx, chunk = 32000, 1024, 6, 16, 2, 4096, 512
    else:
        vocab, d, layers, heads, batch, ctx, chunk = 300, 32, 2, 4, 2, 32, 8
    model = Gpt(vocab, d, layers, heads, ctx, ckpt=True)
    model.blocks = nn.ModuleList(BlockwiseBlock(d, heads, chunk) for _ in range(layers))
    model = model.to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler(enabled=CUDA)
    for _ in range(steps):
        idx = torch.randint(0, vocab, (batch, ctx + 1), device=DEV)
        with torch.autocast(**_amp(torch.float16)):
            logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.view(-1, vocab).float(), idx[:, 1:].reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        del idx, logits, loss


# ------------------------------------------------------------------- a 1F1B pipeline

def _one_f_one_b(stages, micro):
    """The order in which a one-forward-one-backward pipeline of `stages` stages runs
    `micro` micro-batches: a list of (time, stage, 'F' or 'B', micro-batch), each stage
    doing one operation per time step once its input is ready."""
    ops = []
    for s in range(stages):
        warm = min(stages - s - 1, micro)
        order = [("F", m) for m in range(warm)]
        f, b = warm, 0
        while b < micro:
            if f < micro:
                order.append(("F", f))
                f += 1
            order.append(("B", b))
            b += 1
        ops.append(order)
    done, timeline, t = set(), [], 0
    pos = [0] * stages
    while any(pos[s] < len(ops[s]) for s in range(stages)):
        ready = []
        for s in range(stages):
            if pos[s] == len(ops[s]):
                continue
            kind, m = ops[s][pos[s]]
            need = ((s - 1, "F", m) if kind == "F" and s > 0 else
                    (s + 1, "B", m) if kind == "B" and s < stages - 1 else
                    (s, "F", m) if kind == "B" else None)
            if need is None or need in done:
                ready.append((s, kind, m))
        for s, kind, m in ready:
            timeline.append((t, s, kind, m))
            pos[s] += 1
        done.update(ready)
        t += 1
    return timeline


def pipeline_1f1b_train(steps):
    """A 12-block GPT (d 1,024, vocab 32,000) split into 4 stages of 3 blocks, run on one
    GPU in the order a one-forward-one-backward pipeline runs them (`_one_f_one_b`): 8
    micro-batches of 4 x 512 tokens, each stage's input detached from the previous
    stage's output and its gradient handed back by `torch.autograd.backward`; a
    micro-batch's activations live from its forward to its backward, so they are freed
    in another order than made; bf16 autocast, AdamW after the eighth micro-batch."""
    torch.manual_seed(166)
    if CUDA:
        vocab, d, heads, per, n_stages, micro, mb, t = 32000, 1024, 16, 3, 4, 8, 4, 512
    else:
        vocab, d, heads, per, n_stages, micro, mb, t = 300, 32, 4, 1, 3, 4, 2, 16
    emb, pos = nn.Embedding(vocab, d).to(DEV), nn.Embedding(t, d).to(DEV)
    stages = [nn.Sequential(*(Block(d, heads) for _ in range(per))).to(DEV)
              for _ in range(n_stages)]
    head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)).to(DEV)
    params = [*emb.parameters(), *pos.parameters(), *head.parameters(),
              *(p for s in stages for p in s.parameters())]
    opt = torch.optim.AdamW(params, lr=3e-4)
    schedule = _one_f_one_b(n_stages, micro)
    for _ in range(steps):
        data = [torch.randint(0, vocab, (mb, t + 1), device=DEV) for _ in range(micro)]
        inputs, outputs, grads = {}, {}, {}
        for _, s, kind, m in schedule:
            if kind == "F":
                with torch.autocast(**_amp(torch.bfloat16)):
                    if s == 0:
                        x = emb(data[m][:, :-1]) + pos(torch.arange(t, device=DEV))
                    else:
                        x = outputs[(s - 1, m)].detach().requires_grad_(True)
                    inputs[(s, m)] = x
                    y = stages[s](x)
                    if s == n_stages - 1:
                        logits = head(y)
                        y = F.cross_entropy(logits.float().view(-1, vocab),
                                            data[m][:, 1:].reshape(-1)) / micro
                        del logits
                    outputs[(s, m)] = y
            else:
                y = outputs.pop((s, m))
                if s == n_stages - 1:
                    y.backward()
                else:
                    torch.autograd.backward(y, grads.pop((s + 1, m)))
                x = inputs.pop((s, m))
                if s > 0:
                    grads[(s, m)] = x.grad
                del x, y
        opt.step()
        opt.zero_grad(set_to_none=True)
        del data, inputs, outputs, grads


# ---------------------------------------------------------------------------- a model soup

def model_soup_eval(steps):
    """A greedy model soup: 6 copies of a ViT-B/16-sized encoder (12 layers, d 768, 86
    million parameters; its random weights perturbed, standing for fine-tuned models)
    held in pinned host memory are brought to the GPU one at a time; each is evaluated
    alone on 4 batches of 64 images (224 pixels, fp16 autocast, inference mode), then
    averaged with the soup into new tensors, and that average is kept as the soup only
    if it evaluates better; one soup per step."""
    torch.manual_seed(167)
    import torchvision
    if CUDA:
        ingredients, batches, batch, size = 6, 4, 64, 224
        model = torchvision.models.vit_b_16(weights=None)
    else:
        ingredients, batches, batch, size = 2, 1, 2, 32
        model = torchvision.models.VisionTransformer(size, 16, 2, 2, 32, 64, num_classes=10)
    model = model.to(DEV).eval()
    base = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    copies = []
    for i in range(ingredients):
        sd = {k: (v + 0.01 * torch.randn_like(v) if v.is_floating_point() else v)
              for k, v in base.items()}
        copies.append({k: (v.pin_memory() if CUDA else v) for k, v in sd.items()})
    gen = _generator(167)
    images = [torch.randn(batch, 3, size, size, generator=gen) for _ in range(batches)]

    def evaluate():
        score = 0.0
        with torch.inference_mode(), torch.autocast(**_amp(torch.float16)):
            for img in images:
                logits = model(img.to(DEV, non_blocking=True))
                score += float(logits.float().softmax(-1).amax(-1).mean())
        return score

    for _ in range(steps):
        soup, count, best = None, 0, -1.0
        for sd in copies:
            gpu = {k: v.to(DEV, non_blocking=True) for k, v in sd.items()}
            model.load_state_dict(gpu)
            evaluate()
            if soup is None:
                soup, count = gpu, 1
                model.load_state_dict(soup)
                best = evaluate()
                continue
            trial = {k: (s * count + g) / (count + 1) if s.is_floating_point() else s
                     for (k, s), g in zip(soup.items(), gpu.values())}
            del gpu
            model.load_state_dict(trial)
            score = evaluate()
            if score >= best:
                soup, count, best = trial, count + 1, score
            del trial
        del soup


# ----------------------------------------------------------- speech from raw audio

class SpeechModel(nn.Module):
    """Log-mel features computed on the GPU (an STFT of 400 samples every 160, 80 mel
    bands), two strided convolutions, a 6-layer encoder and a 4-layer decoder with
    cross-attention (d 512)."""

    def __init__(self, d, enc, dec, heads, vocab, n_fft=400, mels=80):
        super().__init__()
        self.n_fft = n_fft
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("mel", torch.rand(mels, n_fft // 2 + 1) / n_fft)
        self.conv1 = nn.Conv1d(mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(
            d, heads, 4 * d, batch_first=True, norm_first=True), enc, enable_nested_tensor=False)
        self.tok = nn.Embedding(vocab, d)
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(
            d, heads, 4 * d, batch_first=True, norm_first=True), dec)
        self.out = nn.Linear(d, vocab)

    def forward(self, audio, tokens):
        spec = torch.stft(audio, self.n_fft, 160, window=self.window, return_complex=True)
        feats = (self.mel @ spec.abs().pow(2)).clamp(min=1e-10).log10()
        x = F.gelu(self.conv2(F.gelu(self.conv1(feats)))).transpose(1, 2)
        memory = self.encoder(x)
        t = tokens.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).triu(1)
        y = self.decoder(self.tok(tokens), memory, tgt_mask=causal)
        return self.out(y)


def speech_stft_train(steps):
    """Speech recognition trained from raw 16 kHz audio: batches of 16 clips of one
    length drawn from 5-30 s each step (80,000-480,000 samples), the STFT and mel
    filterbank on the GPU (cuFFT's plans and work areas come from the caching
    allocator), an encoder-decoder (d 512, 6 + 4 layers) over 250-1,500 frames and
    transcripts of 20-200 tokens (vocab 5,000); bf16 autocast around the network (the
    STFT in fp32), AdamW."""
    torch.manual_seed(168)
    if CUDA:
        d, enc, dec, heads, vocab, batch, secs, toks = 512, 6, 4, 8, 5000, 16, (5, 30), (20, 200)
    else:
        d, enc, dec, heads, vocab, batch, secs, toks = 32, 1, 1, 4, 50, 2, (1, 2), (3, 6)
    model = SpeechModel(d, enc, dec, heads, vocab).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = _generator(168)
    for _ in range(steps):
        samples = _randint(gen, *secs) * 16000
        t = _randint(gen, *toks)
        audio = torch.randn(batch, samples, device=DEV)
        tokens = torch.randint(0, vocab, (batch, t + 1), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            logits = model(audio, tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del audio, tokens, logits, loss


WORKLOADS = {
    "llama_gqa_swiglu_train": (llama_gqa_swiglu_train, 12),
    "fasterrcnn_multiscale_train": (fasterrcnn_multiscale_train, 16),
    "grpo_generate_train": (grpo_generate_train, 6),
    "evoformer_pair_train": (evoformer_pair_train, 16),
    "blockwise_attention_train": (blockwise_attention_train, 8),
    "pipeline_1f1b_train": (pipeline_1f1b_train, 6),
    "model_soup_eval": (model_soup_eval, 2),
    "speech_stft_train": (speech_stft_train, 12),
}
