"""The twelfth corpus: nine workloads written on 2026-11-26 (seventh session), held out from
every change to the allocator (BENCHMARKS.md, "A twelfth corpus, held out"). Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded.

Each moves memory in a way the first eleven corpora do not: cuDNN's autotuner on
(`torch.backends.cudnn.benchmark`), which tries every convolution algorithm with a
workspace of its own whenever a new input shape arrives; a brute-force nearest-neighbour
search over a datastore of two million embeddings in chunks, merging top-k lists; the
joint network of an RNN-T speech model (a batch x frames x tokens x vocabulary tensor)
with the transducer loss computed by its lattice's anti-diagonals; a point cloud fitted
by splatting whose points are cloned and pruned every few steps, as Gaussian splatting
does, so that parameters and optimizer state are reallocated larger and smaller; L-BFGS
with a strong-Wolfe line search (several forward and backward passes a step, a history
of flat vectors); PCGrad, whose per-task gradients are flattened and projected against
each other; a transformer over variable-length sequences held as nested (jagged)
tensors; attention over a 128 x 128 latent computed in slices of queries, as diffusion
pipelines do to save memory; and DINO's multi-crop self-distillation (two global and six
local crops of different sizes through a student and an EMA teacher).
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block


def _amp(dtype):
    return dict(device_type=DEV.type, dtype=dtype, enabled=DEV.type == "cuda")


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def _pick(gen, choices):
    return choices[int(torch.randint(0, len(choices), (1,), generator=gen))]


# ------------------------------------------------------------------ cuDNN autotuning

def cudnn_autotune_varres_train(steps):
    """ResNet-50 (torchvision, channels-last, bf16 autocast, SGD with momentum) with
    `torch.backends.cudnn.benchmark = True` on batches whose resolution (160-288) and size
    (24-48) change every step: each new shape makes cuDNN time every algorithm of every
    convolution, each with a workspace of its own, before the step runs."""
    import torchvision
    torch.manual_seed(121)
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50(weights=None, num_classes=1000)
    model = model.to(DEV, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    gen = _generator(121)
    for _ in range(steps):
        res = _pick(gen, (160, 192, 224, 256, 288))
        batch = _pick(gen, (24, 32, 48))
        x = torch.randn(batch, 3, res, res, device=DEV).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# ------------------------------------------------------------- nearest neighbours

def knn_retrieval_infer(steps):
    """Retrieval for a batch of queries (64-1,024, a new size each step): an MLP encodes
    them (d 256, fp16), then a brute-force inner-product search over a datastore of
    2,097,152 embeddings (1 GiB) in chunks of 262,144 rows (a score matrix of up to 512 MiB
    a chunk), keeping the best 128 by merging each chunk's top-k with the running one;
    the neighbours' embeddings are gathered and averaged by softmax weights."""
    torch.manual_seed(122)
    n, d, chunk, k = 2_097_152 if DEV.type == "cuda" else 65_536, 256, 262_144, 128
    chunk = min(chunk, n)
    store = F.normalize(torch.randn(n, d, device=DEV), dim=1).half()
    enc = nn.Sequential(nn.Linear(768, 1024), nn.GELU(), nn.Linear(1024, d)).to(DEV).half()
    gen = _generator(122)
    with torch.inference_mode():
        for _ in range(steps):
            q = _pick(gen, (64, 128, 256, 512, 1024))
            feats = torch.randn(q, 768, device=DEV, dtype=torch.half)
            query = F.normalize(enc(feats).float(), dim=1).half()
            best_s = torch.full((q, k), -math.inf, device=DEV, dtype=torch.half)
            best_i = torch.zeros(q, k, device=DEV, dtype=torch.long)
            for start in range(0, n, chunk):
                scores = query @ store[start:start + chunk].t()
                s, i = scores.topk(k, dim=1)
                s = torch.cat([best_s, s], dim=1)
                i = torch.cat([best_i, i + start], dim=1)
                best_s, pos = s.topk(k, dim=1)
                best_i = i.gather(1, pos)
            w = best_s.float().softmax(dim=1)
            out = (store[best_i].float() * w[:, :, None]).sum(dim=1)
            out.sum().item()


# ------------------------------------------------------------------------ RNN-T

def _rnnt_loss(lp, targets):
    """The transducer loss from log-probabilities `lp` (B, T, U + 1, V), blank 0, by the
    forward variables of the lattice, one anti-diagonal (a (B, T) tensor over t; u is
    n - t) at a time."""
    b, t_len, u1, _ = lp.shape
    u_len = u1 - 1
    neg = -1e30
    blank = lp[..., 0].reshape(b, t_len * u1)
    emit = lp[:, :, :u_len].gather(3, targets[:, None, :, None].expand(b, t_len, u_len, 1))
    emit = F.pad(emit.squeeze(3), (0, 1), value=neg).reshape(b, t_len * u1)
    t = torch.arange(t_len, device=lp.device)
    alpha = torch.where(t == 0, 0.0, neg).to(lp.dtype).expand(b, t_len)
    for n in range(1, t_len + u_len):
        u = n - t
        on = (u >= 0) & (u <= u_len)
        # From (t - 1, u) by a blank, and from (t, u - 1) by the token u - 1.
        by_blank = F.pad(alpha[:, :-1], (1, 0), value=neg) + blank.gather(
            1, ((t - 1).clamp(min=0) * u1 + u.clamp(0, u_len)).expand(b, t_len))
        by_token = alpha + emit.gather(1, (t * u1 + (u - 1).clamp(0, u_len)).expand(b, t_len))
        alpha = torch.logaddexp(torch.where(on & (t >= 1), by_blank, neg),
                                torch.where(on & (u >= 1), by_token, neg))
        alpha = torch.where(on, alpha, neg)
    return -(alpha[:, t_len - 1] + blank[:, (t_len - 1) * u1 + u_len]).mean()


def rnnt_joint_train(steps):
    """A speech transducer: a convolutional front end (4x subsampling) and a 4-layer
    LSTM encoder over 8 utterances of 400-1,000 frames of 80 mel bins, a 1-layer LSTM
    predictor over transcripts of 12-40 tokens, and the joint network (512 -> 1,024
    tokens) over every frame and token pair: a (8, T, U + 1, 1,024) tensor of logits (bf16)
    and its fp32 log-softmax (up to 320 MiB), whose loss walks the lattice by
    anti-diagonals. bf16 autocast for the convolutions and the joint network, fp32 for the
    LSTMs and the loss; AdamW."""
    torch.manual_seed(123)
    vocab, d = 1024, 512
    front = nn.Sequential(nn.Conv1d(80, d, 3, stride=2, padding=1), nn.GELU(),
                          nn.Conv1d(d, d, 3, stride=2, padding=1), nn.GELU()).to(DEV)
    encoder = nn.LSTM(d, d, num_layers=4, batch_first=True).to(DEV)
    embed = nn.Embedding(vocab, d).to(DEV)
    predictor = nn.LSTM(d, d, batch_first=True).to(DEV)
    joint = nn.Sequential(nn.Tanh(), nn.Linear(d, vocab)).to(DEV)
    params = [*front.parameters(), *encoder.parameters(), *embed.parameters(),
              *predictor.parameters(), *joint.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    gen = _generator(123)
    small = DEV.type != "cuda"
    for _ in range(steps):
        frames = 40 if small else int(torch.randint(400, 1001, (1,), generator=gen))
        tokens = 4 if small else int(torch.randint(12, 41, (1,), generator=gen))
        mel = torch.randn(8, 80, frames, device=DEV)
        targets = torch.randint(1, vocab, (8, tokens), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            feats = front(mel).transpose(1, 2)
        enc, _ = encoder(feats.float())
        start = torch.zeros(8, 1, dtype=torch.long, device=DEV)
        pred, _ = predictor(embed(torch.cat([start, targets], dim=1)))
        with torch.autocast(**_amp(torch.bfloat16)):
            logits = joint(enc[:, :, None, :] + pred[:, None, :, :])
        lp = logits.float().log_softmax(dim=3)
        loss = _rnnt_loss(lp, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# --------------------------------------------------------- points cloned and pruned

def _splat(xyz, color, opacity, scale, size):
    """A soft rasterisation of points into a size x size image: each point spreads its
    color over the 3 x 3 pixels around its projection with Gaussian weights."""
    pix = (torch.sigmoid(xyz[:, :2]) * (size - 3) + 1)
    base = pix.floor().long()
    img = torch.zeros(size * size, 3, device=xyz.device)
    alpha = torch.sigmoid(opacity)
    sig = F.softplus(scale) + 0.3
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            cell = base + torch.tensor([dx, dy], device=xyz.device)
            dist = ((cell.float() - pix) ** 2).sum(dim=1, keepdim=True)
            w = alpha * torch.exp(-dist / (2 * sig ** 2))
            idx = (cell[:, 1] * size + cell[:, 0]).clamp(0, size * size - 1)
            img = img.index_add(0, idx, w * torch.sigmoid(color))
    return img.view(size, size, 3)


def densify_points_train(steps):
    """Points fitted to a 512 x 512 target by splatting (position, color, opacity and
    scale per point, Adam), starting from 400,000 points; every third step the points
    whose position gradient is largest are cloned (with their Adam state) and the most
    transparent ones pruned, as Gaussian splatting's densification does, so every
    parameter and moment tensor is reallocated (400,000 points grow to 1.26 million by
    the last step)."""
    torch.manual_seed(124)
    n = 400_000 if DEV.type == "cuda" else 4_000
    size = 512 if DEV.type == "cuda" else 64
    target = torch.rand(size, size, 3, device=DEV)
    names = ("xyz", "color", "opacity", "scale")
    widths = (3, 3, 1, 1)
    params = {k: nn.Parameter(torch.randn(n, w, device=DEV)) for k, w in zip(names, widths)}
    opt = torch.optim.Adam(params.values(), lr=1e-2)
    for step in range(steps):
        img = _splat(params["xyz"], params["color"], params["opacity"], params["scale"], size)
        loss = F.l1_loss(img, target)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        grad_norm = params["xyz"].grad[:, :2].norm(dim=1)
        opt.step()
        if step % 3 != 2:
            continue
        with torch.no_grad():
            count = params["xyz"].shape[0]
            clone = grad_norm.topk(count // 3).indices
            keep = (torch.sigmoid(params["opacity"][:, 0]) > 0.02).nonzero().squeeze(1)
            new = {}
            for k in names:
                old = params[k]
                state = opt.state.pop(old, {})
                data = torch.cat([old[keep], old[clone]])
                p = nn.Parameter(data)
                new[k] = p
                if state:
                    state = {key: (torch.cat([v[keep], v[clone]]) if v.dim() else v)
                             for key, v in state.items()}
                    opt.state[p] = state
            params = new
            opt.param_groups[0]["params"] = list(params.values())


# ----------------------------------------------------------------------- L-BFGS

def lbfgs_closure_train(steps):
    """A 6-layer MLP (width 2,048, 17 million parameters) fitted to a smooth target on
    16,384 points with L-BFGS (history 20, strong-Wolfe line search, up to 8 iterations a
    step): each step runs the closure (forward and backward) several times and keeps
    flat direction and gradient vectors of 68 MB each."""
    torch.manual_seed(125)
    width = 2048 if DEV.type == "cuda" else 64
    layers = [nn.Linear(64, width), nn.Tanh()]
    for _ in range(4):
        layers += [nn.Linear(width, width), nn.Tanh()]
    layers += [nn.Linear(width, 8)]
    model = nn.Sequential(*layers).to(DEV)
    opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=8, history_size=20,
                            line_search_fn="strong_wolfe")
    gen = torch.Generator(device=DEV).manual_seed(125)
    for _ in range(steps):
        x = torch.rand(16384, 64, device=DEV, generator=gen) * 2 - 1
        y = torch.sin(3 * x[:, :8]) * torch.cos(2 * x[:, 8:16])

        def closure():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss

        opt.step(closure)


# ----------------------------------------------------------------------- PCGrad

def pcgrad_multitask_train(steps):
    """A shared trunk (an embedding and 6 transformer blocks, d 768: 49 million
    parameters) with four task heads (token classification, sequence regression, two
    sequence classifications), trained with PCGrad: each task's gradient of the trunk (`autograd.grad`, graph kept) is
    flattened to one vector, projected off the others it conflicts with, and the sum
    written back as the trunk's gradient; bf16 autocast, AdamW; batch 16 x 256."""
    torch.manual_seed(126)
    d = 768
    emb = nn.Embedding(8192, d).to(DEV)
    trunk = nn.ModuleList(Block(d, 12) for _ in range(6)).to(DEV)
    heads = nn.ModuleList([nn.Linear(d, 17), nn.Linear(d, 1), nn.Linear(d, 5),
                           nn.Linear(d, 3)]).to(DEV)
    shared = [*emb.parameters(), *trunk.parameters()]
    opt = torch.optim.AdamW([*shared, *heads.parameters()], lr=3e-4)
    gen = _generator(126)
    for _ in range(steps):
        idx = torch.randint(0, 8192, (16, 256), generator=gen).to(DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            h = emb(idx)
            for blk in trunk:
                h = blk(h)
            pooled = h.mean(dim=1)
            outs = [heads[0](h), heads[1](pooled), heads[2](pooled), heads[3](pooled)]
        losses = [
            F.cross_entropy(outs[0].float().reshape(-1, 17),
                            torch.randint(0, 17, (16 * 256,), device=DEV)),
            F.mse_loss(outs[1].float().squeeze(1), torch.randn(16, device=DEV)),
            F.cross_entropy(outs[2].float(), torch.randint(0, 5, (16,), device=DEV)),
            F.cross_entropy(outs[3].float(), torch.randint(0, 3, (16,), device=DEV)),
        ]
        opt.zero_grad(set_to_none=True)
        grads = []
        for i, loss in enumerate(losses):
            g = torch.autograd.grad(loss, shared, retain_graph=True, allow_unused=True)
            grads.append(torch.cat([(x if x is not None else torch.zeros_like(p)).reshape(-1)
                                    for x, p in zip(g, shared)]))
        projected = []
        for i, g in enumerate(grads):
            g = g.clone()
            for j, other in enumerate(grads):
                if i == j:
                    continue
                dot = torch.dot(g, other)
                if dot < 0:
                    g -= dot / other.dot(other) * other
            projected.append(g)
        total = torch.stack(projected).sum(dim=0)
        head_loss = sum(losses)
        head_loss.backward(inputs=list(heads.parameters()))
        offset = 0
        for p in shared:
            p.grad = total[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        opt.step()


# ------------------------------------------------------------------ jagged tensors

class JaggedBlock(Block):
    """The corpus's pre-norm transformer block over a nested (jagged) batch (B, j, d):
    the same layers, attention without a mask."""

    def forward(self, x):
        d = x.size(-1)
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (z.unflatten(-1, (self.heads, d // self.heads)).transpose(1, 2)
                   for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).flatten(-2))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def jagged_varlen_train(steps):
    """A 6-layer encoder (d 768, 12 heads) over 32 sequences of 32-1,024 tokens each,
    held as one nested tensor with the jagged layout (no padding; attention by SDPA over
    the nested batch), mean-pooled into a 10-way classifier; bf16 autocast, AdamW."""
    torch.manual_seed(127)
    d = 768
    emb = nn.Embedding(16384, d).to(DEV)
    blocks = nn.ModuleList(JaggedBlock(d, 12) for _ in range(6)).to(DEV)
    head = nn.Linear(d, 10).to(DEV)
    opt = torch.optim.AdamW([*emb.parameters(), *blocks.parameters(), *head.parameters()],
                            lr=3e-4)
    gen = _generator(127)
    for _ in range(steps):
        lengths = torch.randint(32, 1025, (32,), generator=gen).tolist()
        tokens = torch.randint(0, 16384, (sum(lengths),), generator=gen).to(DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            flat = emb(tokens)
            x = torch.nested.nested_tensor_from_jagged(
                flat, offsets=torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()],
                                           device=DEV))
            for blk in blocks:
                x = blk(x)
            pooled = torch.stack([seq.mean(dim=0) for seq in x.unbind()])
            logits = head(pooled)
        loss = F.cross_entropy(logits.float(), torch.randint(0, 10, (32,), device=DEV))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# -------------------------------------------------------- attention in query slices

class SlicedAttention(nn.Module):
    """Self-attention over the pixels of a latent, the queries taken `slice` at a time
    so that only one slice's score matrix exists at once (diffusers' attention slicing)."""

    def __init__(self, c, heads, slice_size):
        super().__init__()
        self.heads, self.slice = heads, slice_size
        self.norm = nn.GroupNorm(32, c)
        self.qkv = nn.Conv2d(c, 3 * c, 1)
        self.out = nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        hd = c // self.heads
        q, k, v = self.qkv(self.norm(x)).reshape(b * self.heads, 3 * hd, h * w).chunk(3, dim=1)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        out = torch.empty_like(q)
        for s in range(0, h * w, self.slice):
            scores = torch.baddbmm(torch.empty(b * self.heads, min(self.slice, h * w - s), h * w,
                                               device=x.device, dtype=q.dtype),
                                   q[:, s:s + self.slice], k.transpose(1, 2), beta=0,
                                   alpha=hd ** -0.5)
            out[:, s:s + self.slice] = scores.softmax(dim=-1) @ v
        return x + self.out(out.transpose(1, 2).reshape(b, c, h, w))


def sliced_attention_highres_infer(steps):
    """A diffusion decoder's middle at high resolution: latents of 64 x 64 to 128 x 128
    (4 channels, batch 1-4, a new size each step) through convolutions to 512 channels,
    two residual blocks around self-attention over every pixel computed in slices of
    4,096 queries (a score matrix of up to 512 MiB a slice, fp16), then upsampled twice to
    an image; 4 denoising iterations a step, inference mode."""
    torch.manual_seed(128)
    c = 512

    def res():
        return nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1),
                             nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1))

    inp = nn.Conv2d(4, c, 3, padding=1)
    r1, attn, r2 = res(), SlicedAttention(c, 1, 4096), res()
    up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(c, 256, 3, padding=1), nn.SiLU(),
                       nn.Upsample(scale_factor=2), nn.Conv2d(256, 128, 3, padding=1), nn.SiLU(),
                       nn.Conv2d(128, 3, 3, padding=1))
    model = nn.ModuleList([inp, r1, attn, r2, up]).to(DEV).half()
    gen = _generator(128)
    small = DEV.type != "cuda"
    with torch.inference_mode():
        for _ in range(steps):
            side = 16 if small else _pick(gen, (64, 80, 96, 112, 128))
            batch = _pick(gen, (1, 2, 4))
            z = torch.randn(batch, 4, side, side, device=DEV, dtype=torch.half)
            for _ in range(4):
                h = inp(z)
                h = h + r1(h)
                h = attn(h)
                h = h + r2(h)
                img = up(h)
                z = z - 0.1 * F.avg_pool2d(img.mean(dim=1, keepdim=True), 4).expand_as(z)
            img.float().mean().item()


# ---------------------------------------------------------------------- DINO

class ViT(nn.Module):
    """A ViT (patch 16) for any image size: positional embeddings interpolated to the grid."""

    def __init__(self, d=384, depth=6, heads=6, out=4096):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, stride=16)
        self.pos = nn.Parameter(torch.randn(1, d, 14, 14) * 0.02)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Sequential(nn.Linear(d, 2048), nn.GELU(), nn.Linear(2048, 256),
                                  nn.Linear(256, out, bias=False))

    def forward(self, x):
        p = self.patch(x)
        p = p + F.interpolate(self.pos, size=p.shape[-2:], mode="bicubic")
        tokens = torch.cat([self.cls.expand(x.size(0), -1, -1), p.flatten(2).transpose(1, 2)], 1)
        for blk in self.blocks:
            tokens = blk(tokens)
        return self.head(self.norm(tokens[:, 0]))


def dino_multicrop_train(steps):
    """DINO self-distillation: a ViT-S/16 student sees two global crops (224) and six local
    crops (96) of 64 images (the blocks are the corpus's causal `Block`), an EMA teacher
    (no gradients) the two global ones; the loss is
    the cross-entropy between the teacher's centred, sharpened outputs (4,096 prototypes)
    and the student's for every pair of different crops; bf16 autocast, AdamW, the centre
    and the teacher updated after each step."""
    torch.manual_seed(129)
    student = ViT().to(DEV)
    teacher = copy.deepcopy(student).requires_grad_(False)
    center = torch.zeros(1, 4096, device=DEV)
    opt = torch.optim.AdamW(student.parameters(), lr=5e-4)
    batch = 64 if DEV.type == "cuda" else 4
    for _ in range(steps):
        images = torch.rand(batch, 3, 256, 256, device=DEV)
        globals_ = [F.interpolate(images[:, :, o:o + 224, o:o + 224], size=224)
                    for o in (0, 32)]
        locals_ = [F.interpolate(images[:, :, 16 * i:16 * i + 128, 16 * i:16 * i + 128], size=96)
                   for i in range(6)]
        with torch.autocast(**_amp(torch.bfloat16)):
            with torch.no_grad():
                t_out = teacher(torch.cat(globals_)).float()
            s_out = torch.cat([student(torch.cat(globals_)), student(torch.cat(locals_))]).float()
        t_prob = F.softmax((t_out - center) / 0.04, dim=-1).chunk(2)
        s_logp = F.log_softmax(s_out / 0.1, dim=-1).chunk(8)
        loss, terms = 0.0, 0
        for i, t in enumerate(t_prob):
            for j, s in enumerate(s_logp):
                if i != j:
                    loss = loss + (-t * s).sum(dim=-1).mean()
                    terms += 1
        loss = loss / terms
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for ps, pt in zip(student.parameters(), teacher.parameters()):
                pt.mul_(0.996).add_(ps.detach(), alpha=0.004)
            center.mul_(0.9).add_(t_out.mean(dim=0, keepdim=True), alpha=0.1)


WORKLOADS = {
    "cudnn_autotune_varres_train": (cudnn_autotune_varres_train, 10),
    "knn_retrieval_infer": (knn_retrieval_infer, 10),
    "rnnt_joint_train": (rnnt_joint_train, 6),
    "densify_points_train": (densify_points_train, 12),
    "lbfgs_closure_train": (lbfgs_closure_train, 6),
    "pcgrad_multitask_train": (pcgrad_multitask_train, 8),
    "jagged_varlen_train": (jagged_varlen_train, 8),
    "sliced_attention_highres_infer": (sliced_attention_highres_infer, 8),
    "dino_multicrop_train": (dino_multicrop_train, 8),
}
