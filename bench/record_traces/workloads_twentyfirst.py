"""The twenty-first corpus: eight workloads written on 2026-11-27, held out from every
change to the allocator until recorded. Same conventions as workloads.py: `run(steps)`
builds its models and data on DEV and runs `steps` steps; random weights; seeded. On the
CPU (RECORD_DEVICE=cpu) the models and data are smaller.

Each holds memory in a way the first twenty corpora do not: a deep-equilibrium model
(Anderson acceleration's history of iterates kept without a graph, then the adjoint fixed
point solved inside a backward hook through one retained graph; new iteration counts
every step); a reversible network whose autograd function keeps only its last output and
rebuilds each block's input during backward; a Dreamer world model (a recurrent state
rolled through a sequence, then imagination from every state through frozen dynamics,
three optimizers); ControlNet (a frozen bf16 U-Net differentiated for its inputs only, a
trainable copy of its encoder, a new resolution every step); LoRA serving (adapters in
pinned host memory, a bounded GPU cache evicted least recently used, per-request adapter
weights gathered each round); MEGABYTE (a global transformer over patches, a local one
over every patch's bytes); Mask R-CNN with full-image masks for a random number of
instances per image; and Medusa decoding (a tree of candidates verified under a tree
mask, the key/value cache gathered down to the accepted path after every pass).
"""
import copy
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block, Gpt, UNet
# Earlier corpora's helpers: autocast settings, seeded generators (thirteenth); an integer
# in a closed range, fp16 on the GPU, an MLP (fourteenth); a pre-norm block (eleventh).
from workloads_thirteenth import CUDA, _amp, _generator
from workloads_fourteenth import _half, _mlp, _randint
from workloads_eleventh import PackedBlock


def _update(opt, loss):
    """Backward from `loss`, an optimizer step, the gradients dropped."""
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


# ------------------------------------------------------- deep equilibrium, implicit

def _anderson(f, x0, iters, m=5, lam=1e-4, tol=1e-3):
    """A fixed point of `f` from `x0` by Anderson acceleration, the last `m` iterates and
    their images kept in two (batch, m, numel) buffers; stops once the relative residual
    is under `tol` or after `iters` iterations."""
    b, n = x0.shape[0], x0[0].numel()
    xs, fs = x0.new_zeros(b, m, n), x0.new_zeros(b, m, n)
    xs[:, 0], fs[:, 0] = x0.reshape(b, n), f(x0).reshape(b, n)
    xs[:, 1], fs[:, 1] = fs[:, 0], f(fs[:, 0].view_as(x0)).reshape(b, n)
    h = x0.new_ones(b, m + 1, m + 1)
    h[:, 0, 0] = 0
    for k in range(2, iters):
        j, i = min(k, m), k % m
        g = fs[:, :j] - xs[:, :j]
        h[:, 1:j + 1, 1:j + 1] = g @ g.transpose(1, 2) + lam * torch.eye(j, device=x0.device)
        alpha = torch.linalg.inv(h[:, :j + 1, :j + 1])[:, 1:, 0]
        xs[:, i] = (alpha[:, None] @ fs[:, :j])[:, 0]
        fs[:, i] = f(xs[:, i].view_as(x0)).reshape(b, n)
        if (fs[:, i] - xs[:, i]).norm() < tol * (1e-5 + fs[:, i].norm()):
            break
    return xs[:, i].view_as(x0).clone()


def deq_implicit_train(steps):
    """A deep-equilibrium language model (vocab 8,192): one transformer cell (d 768, 12
    heads, z -> LayerNorm(block(z + x))) driven to its fixed point under no_grad by
    Anderson acceleration (history 5), one step taken again with a graph, and the adjoint
    fixed point solved in a backward hook by Anderson over vector-Jacobian products
    through a retained graph of the cell; each solver stops at a relative residual of
    1e-3 or a cap drawn each step from 12-30. Batch 32 x 512 tokens, fp32, Adam."""
    torch.manual_seed(211)
    if CUDA:
        vocab, d, heads, batch, t, caps = 8192, 768, 12, 32, 512, (12, 30)
    else:
        vocab, d, heads, batch, t, caps = 100, 32, 4, 2, 8, (3, 6)
    model = nn.ModuleDict(dict(emb=nn.Embedding(vocab, d), block=PackedBlock(d, heads),
                               norm=nn.LayerNorm(d), head=nn.Linear(d, vocab))).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    gen = _generator(211)

    def f(z, x):
        return model["norm"](model["block"](z + x, None))

    for _ in range(steps):
        ids = torch.randint(0, vocab, (batch, t + 1), device=DEV)
        x = model["emb"](ids[:, :-1])
        iters = _randint(gen, *caps)
        with torch.no_grad():
            z = _anderson(lambda z: f(z, x), torch.zeros_like(x), iters)
        z = f(z, x)
        z0 = z.detach().requires_grad_()
        f0 = f(z0, x)

        def adjoint(grad):
            return _anderson(lambda g: torch.autograd.grad(f0, z0, g, retain_graph=True)[0]
                             + grad, grad, iters)

        z.register_hook(adjoint)
        loss = F.cross_entropy(model["head"](z).view(-1, vocab), ids[:, 1:].reshape(-1))
        _update(opt, loss)
        del ids, x, z, z0, f0, loss


# ------------------------------------------------------------- reversible network

class _RevBlock(Block):
    """Reformer's reversible coupling around a pre-norm block's two branches, on the two
    halves of the width: y1 = x1 + attention(x2), y2 = x2 + MLP(y1)."""

    def mlp(self, x):
        return self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def forward(self, x):
        x1, x2 = x.chunk(2, -1)
        y1 = x1 + self.attend(x2)
        return torch.cat([y1, x2 + self.mlp(y1)], -1)

    def reverse(self, y, dy):
        """The input and its gradient from the output `y` and its gradient `dy`, each branch
        recomputed with a graph and backpropagated (bf16 autocast)."""
        y1, y2 = (z.contiguous() for z in y.chunk(2, -1))
        dy1, dy2 = dy.chunk(2, -1)
        y1.requires_grad_()
        with torch.enable_grad(), torch.autocast(**_amp(torch.bfloat16)):
            g = self.mlp(y1).float()
        g.backward(dy2)
        x2 = (y2 - g.detach()).requires_grad_()
        dx1 = dy1 + y1.grad
        with torch.enable_grad(), torch.autocast(**_amp(torch.bfloat16)):
            f = self.attend(x2).float()
        f.backward(dx1)
        x1 = y1.detach() - f.detach()
        return torch.cat([x1, x2.detach()], -1), torch.cat([dx1, dy2 + x2.grad], -1)


class _RevStack(torch.autograd.Function):
    """Reversible blocks run without a graph, keeping only the last output; backward
    rebuilds each block's input from its output, from the last block to the first."""

    @staticmethod
    def forward(ctx, x, blocks):
        ctx.blocks = blocks
        for blk in blocks:
            x = blk(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        for blk in reversed(ctx.blocks):
            y, dy = blk.reverse(y, dy)
        return dy, None


def revnet_recompute_train(steps):
    """A reversible language model (16 of Reformer's coupled blocks over two streams of d
    768, vocab 32,000) run inside one autograd function that keeps only the last output;
    backward rebuilds each block's input from its output and recomputes its branches with
    a graph, a block at a time. Batch 8 of 512-2,048 tokens (a new length every step),
    bf16 autocast, AdamW."""
    torch.manual_seed(212)
    if CUDA:
        vocab, d, layers, heads, batch, lens = 32000, 768, 16, 12, 8, (512, 2048)
    else:
        vocab, d, layers, heads, batch, lens = 100, 16, 2, 2, 2, (4, 8)
    model = nn.ModuleDict(dict(
        emb=nn.Embedding(vocab, 2 * d), ln=nn.LayerNorm(2 * d),
        blocks=nn.ModuleList(_RevBlock(d, heads) for _ in range(layers)),
        head=nn.Linear(2 * d, vocab, bias=False))).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = _generator(212)
    for _ in range(steps):
        ids = torch.randint(0, vocab, (batch, _randint(gen, *lens) + 1), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            h = _RevStack.apply(model["emb"](ids[:, :-1]), model["blocks"])
            logits = model["head"](model["ln"](h))
        loss = F.cross_entropy(logits.float().view(-1, vocab), ids[:, 1:].reshape(-1))
        _update(opt, loss)
        del ids, h, logits, loss


# ------------------------------------------------------------- Dreamer world model

def _kl(post, prior):
    """KL(post || prior) of the 32 categoricals, summed over them, meaned over the rest."""
    lp, lq = (x.unflatten(-1, (-1, 32)).log_softmax(-1) for x in (post, prior))
    return (lp.exp() * (lp - lq)).sum((-2, -1)).mean()


def dreamer_world_model_train(steps):
    """Dreamer (V2-style) on 32 sequences of 32-64 frames of 64x64 images (a new length
    every step): the world model (conv encoder, an RSSM of a 1,024-d GRU state and 32 x
    32 categoricals, transposed-conv decoder, reward and continuation heads) rolled
    through every frame, trained on reconstruction, reward, continuation and a balanced
    KL; then 15 steps imagined from each of the 32 x T posterior states by a
    tanh-Gaussian actor through the frozen (but differentiated) dynamics, lambda-returns
    taken backwards in time, the actor trained on them, the critic regressed on them.
    Three Adams, fp32."""
    torch.manual_seed(213)
    if CUDA:
        w, deter, hidden, batch, lens, horizon = 48, 1024, 512, 32, (32, 64), 15
    else:
        w, deter, hidden, batch, lens, horizon = 4, 16, 16, 2, (2, 4), 3
    stoch, acts, feat = 32 * 32, 6, deter + 32 * 32
    enc = nn.Sequential(nn.Conv2d(3, w, 4, 2), nn.SiLU(), nn.Conv2d(w, 2 * w, 4, 2), nn.SiLU(),
                        nn.Conv2d(2 * w, 4 * w, 4, 2), nn.SiLU(),
                        nn.Conv2d(4 * w, 8 * w, 4, 2), nn.SiLU(), nn.Flatten())
    dec = nn.Sequential(nn.Linear(feat, 32 * w), nn.Unflatten(1, (32 * w, 1, 1)),
                        nn.ConvTranspose2d(32 * w, 4 * w, 5, 2), nn.SiLU(),
                        nn.ConvTranspose2d(4 * w, 2 * w, 5, 2), nn.SiLU(),
                        nn.ConvTranspose2d(2 * w, w, 6, 2), nn.SiLU(),
                        nn.ConvTranspose2d(w, 3, 6, 2))
    rssm = nn.ModuleDict(dict(  # a GRU's state, 32 categoricals of 32, a prior, a posterior
        inp=nn.Sequential(nn.Linear(stoch + acts, hidden), nn.SiLU()),
        gru=nn.GRUCell(hidden, deter), prior=_mlp(deter, stoch, hidden),
        post=_mlp(deter + 32 * w, stoch, hidden)))
    reward, cont = _mlp(feat, 1, hidden), _mlp(feat, 1, hidden)
    world = nn.ModuleList([enc, dec, rssm, reward, cont]).to(DEV)
    actor, critic = _mlp(feat, 2 * acts, hidden).to(DEV), _mlp(feat, 1, hidden).to(DEV)
    frozen = nn.ModuleList([world, critic])
    opts = [torch.optim.Adam(m.parameters(), lr=lr)
            for m, lr in ((world, 3e-4), (actor, 8e-5), (critic, 8e-5))]
    gen = _generator(213)

    def step(h, z, a):
        """The next deterministic state and the prior's logits."""
        h = rssm["gru"](rssm["inp"](torch.cat([z, a], -1)), h)
        return h, rssm["prior"](h)

    for _ in range(steps):
        t_len = _randint(gen, *lens)
        obs = torch.rand(batch, t_len, 3, 64, 64, device=DEV)
        act = torch.rand(batch, t_len, acts, device=DEV) * 2 - 1
        rew = torch.randn(batch, t_len, device=DEV)
        alive = (torch.rand(batch, t_len, device=DEV) > 0.01).float()
        embed = enc(obs.flatten(0, 1)).unflatten(0, (batch, t_len))
        h, z = torch.zeros(batch, deter, device=DEV), torch.zeros(batch, stoch, device=DEV)
        seq = []
        for t in range(t_len):
            h, prior = step(h, z, act[:, t])
            post = rssm["post"](torch.cat([h, embed[:, t]], -1))
            z = F.gumbel_softmax(post.unflatten(-1, (-1, 32)), hard=True).flatten(-2)
            seq.append((torch.cat([h, z], -1), prior, post))
        feats, prior, post = (torch.stack(s, 1) for s in zip(*seq))
        loss = (F.mse_loss(dec(feats.flatten(0, 1)), obs.flatten(0, 1), reduction="sum")
                / (batch * t_len)
                + F.mse_loss(reward(feats).squeeze(-1), rew)
                + F.binary_cross_entropy_with_logits(cont(feats).squeeze(-1), alive)
                + 0.8 * _kl(post.detach(), prior) + 0.2 * _kl(post, prior.detach()))
        _update(opts[0], loss)
        del obs, act, rew, alive, embed, seq, prior, post, loss
        # Imagination from every posterior state, the world model and critic frozen.
        frozen.requires_grad_(False)
        h, z = feats.detach().flatten(0, 1).split([deter, stoch], -1)
        states = [torch.cat([h, z], -1)]
        for _ in range(horizon):
            mu, std = actor(states[-1]).chunk(2, -1)
            a = torch.tanh(mu + F.softplus(std) * torch.randn_like(mu))
            h, prior = step(h, z, a)
            z = F.gumbel_softmax(prior.unflatten(-1, (-1, 32)), hard=True).flatten(-2)
            states.append(torch.cat([h, z], -1))
        states = torch.stack(states)
        r, c, v = (m(states[1:]).squeeze(-1) for m in (reward, cont, critic))
        c = 0.99 * torch.sigmoid(c)
        ret, rets = v[-1], []
        for t in reversed(range(horizon)):
            ret = r[t] + c[t] * (0.05 * v[t] + 0.95 * ret)
            rets.append(ret)
        returns = torch.stack(rets[::-1])
        _update(opts[1], -returns.mean())
        frozen.requires_grad_(True)
        value = critic(states[:-1].detach()).squeeze(-1)
        _update(opts[2], F.mse_loss(value, returns.detach()))
        del feats, h, z, a, prior, states, r, c, v, ret, rets, returns, value


# ------------------------------------------------------- ControlNet, a frozen UNet

def _unet_encode(u, x, hint=None):
    """workloads.py's U-Net up to its middle block (`hint` added after the first
    level): the four feature maps its decoder takes."""
    a = u.d1(x) if hint is None else u.d1(x) + hint
    b = u.d2(F.avg_pool2d(a, 2))
    c = u.d3(F.avg_pool2d(b, 2))
    return [a, b, c, u.mid(F.avg_pool2d(c, 2))]


def _unet_decode(u, a, b, c, m):
    """The rest of workloads.py's U-Net, from the four feature maps."""
    c = u.u3(torch.cat([F.interpolate(m, scale_factor=2), c], 1))
    b = u.u2(torch.cat([F.interpolate(c, scale_factor=2), b], 1))
    return u.out(u.u1(torch.cat([F.interpolate(b, scale_factor=2), a], 1)))


def controlnet_frozen_unet_train(steps):
    """ControlNet on a denoising U-Net (workloads.py's, width 64, frozen, bf16 weights on
    the GPU): its encoder under no_grad, its decoder differentiated for its inputs only;
    a trainable fp32 copy of the encoder takes the noisy images plus a conditioning
    image's features and adds its four outputs to the decoder's inputs through zero-
    initialised 1x1 convolutions. Batch 8 of 256-512 pixels a side (a new size every
    step), noise-prediction loss, bf16 autocast, AdamW."""
    torch.manual_seed(214)
    if CUDA:
        c, batch, sides = 64, 8, (4, 8)
    else:
        c, batch, sides = 8, 2, (1, 2)
    unet = UNet(c).to(DEV)
    ctrl = copy.deepcopy(unet)
    del ctrl.u3, ctrl.u2, ctrl.u1, ctrl.out
    unet.requires_grad_(False)
    unet = unet.to(torch.bfloat16) if CUDA else unet
    zeros = nn.ModuleList(nn.Conv2d(w, w, 1) for w in (c, 2 * c, 4 * c, 4 * c)).to(DEV)
    hint = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.SiLU(),
                         nn.Conv2d(32, c, 3, padding=1)).to(DEV)
    for p in [*zeros.parameters(), *hint[-1].parameters()]:
        nn.init.zeros_(p)
    opt = torch.optim.AdamW([*ctrl.parameters(), *zeros.parameters(), *hint.parameters()],
                            lr=1e-5)
    gen = _generator(214)
    for _ in range(steps):
        side = 64 * _randint(gen, *sides)
        x, cond = (torch.rand(batch, 3, side, side, device=DEV) for _ in range(2))
        noise, keep = torch.randn_like(x), torch.rand(batch, 1, 1, 1, device=DEV)
        noisy = keep.sqrt() * x + (1 - keep).sqrt() * noise
        with torch.autocast(**_amp(torch.bfloat16)):
            with torch.no_grad():
                feats = _unet_encode(unet, noisy)
            control = _unet_encode(ctrl, noisy, hint(cond))
            eps = _unet_decode(unet, *(f + z(g) for f, z, g in zip(feats, zeros, control)))
        loss = F.mse_loss(eps.float(), noise)
        _update(opt, loss)
        del x, noise, keep, noisy, cond, feats, control, eps, loss


# ------------------------------------------------------------ multi-adapter serving

class _Lora(nn.Module):
    """A frozen linear layer plus each request's low-rank update: x @ A @ B, with the
    batch's adapters gathered into A (batch, in, r) and B (batch, r, out) each round."""

    def __init__(self, base):
        super().__init__()
        self.base, self.a, self.b = base, None, None

    def forward(self, x):
        return self.base(x) + torch.bmm(torch.bmm(x, self.a), self.b)


def multi_lora_serve(steps):
    """S-LoRA-style serving: a 16-layer GPT (d 2,048, 16 heads, vocab 32,000, fp16) whose
    four projections a block take a rank-16 adapter per request. 64 adapters live in
    pinned host memory; each round 4-32 requests (a new count every round) name adapters
    (skewed to a popular few), the missing ones are copied into a GPU cache of 24 and the
    least recently used beyond it evicted; the adapters are gathered per request, prompts
    of 64-512 tokens prefilled and 32 tokens decoded greedily (caches grown by
    concatenation); no_grad."""
    torch.manual_seed(215)
    if CUDA:
        vocab, d, layers, heads, rank, adapters, capacity = 32000, 2048, 16, 16, 16, 64, 24
        batches, prompts, new = (4, 32), (64, 512), 32
    else:
        vocab, d, layers, heads, rank, adapters, capacity = 100, 32, 2, 4, 4, 6, 3
        batches, prompts, new = (1, 4), (3, 6), 3
    model = _half(Gpt(vocab, d, layers, heads, prompts[1] + new).to(DEV)).eval()
    for blk in model.blocks:
        for name in ("qkv", "proj", "fc1", "fc2"):
            setattr(blk, name, _Lora(getattr(blk, name)))
    lora = [m for m in model.modules() if isinstance(m, _Lora)]
    shapes = [s for m in lora
              for s in ((m.base.in_features, rank), (rank, m.base.out_features))]
    sizes = [a * b for a, b in shapes]
    gen = _generator(215)
    host = []
    for _ in range(adapters):
        flat = (torch.randn(sum(sizes), generator=gen) * 0.01).to(model.tok.weight.dtype)
        flat = flat.pin_memory() if CUDA else flat
        host.append([t.view(s) for t, s in zip(flat.split(sizes), shapes)])
    cache = OrderedDict()
    with torch.no_grad():
        for _ in range(steps):
            b, p = _randint(gen, *batches), _randint(gen, *prompts)
            want = (torch.rand(b, generator=gen) ** 2 * adapters).long().tolist()
            uniq = sorted(set(want))
            for a in uniq:
                if a not in cache:
                    cache[a] = [t.to(DEV, non_blocking=True) for t in host[a]]
                cache.move_to_end(a)
            for a in list(cache)[:max(0, len(cache) - capacity)]:
                if a not in uniq:
                    del cache[a]
            index = torch.tensor([uniq.index(a) for a in want], device=DEV)
            for i, m in enumerate(lora):
                m.a = torch.stack([cache[a][2 * i] for a in uniq])[index]
                m.b = torch.stack([cache[a][2 * i + 1] for a in uniq])[index]
            caches = [{} for _ in range(layers)]
            tok = model(torch.randint(0, vocab, (b, p), device=DEV), caches)[:, -1:].argmax(-1)
            for i in range(new):
                tok = model(tok, caches, start=p + i)[:, -1:].argmax(-1)
            for m in lora:
                m.a = m.b = None
            del index, caches, tok


# --------------------------------------------------------- MEGABYTE, bytes in patches

def megabyte_patch_lm_train(steps):
    """MEGABYTE, a byte-level language model over patches of 8 bytes: a global 12-layer
    transformer (d 1,024) over the patches (each its bytes' 128-d embeddings concatenated,
    shifted one patch), projected to 8 x 512 and added to the bytes' embeddings (shifted
    one byte), then a local 4-layer transformer (d 512) over every patch's 8 bytes, each
    patch a sequence of its own. 8 documents of 2,048-8,192 bytes (a new length every
    step), bf16 autocast, AdamW."""
    torch.manual_seed(216)
    if CUDA:
        p, dg, dl, layers, heads, batch, patches = 8, 1024, 512, (12, 4), 16, 8, (256, 1024)
    else:
        p, dg, dl, layers, heads, batch, patches = 4, 32, 16, (1, 1), 4, 2, (2, 4)
    model = nn.ModuleDict(dict(
        gemb=nn.Embedding(257, dg // p), gpos=nn.Embedding(patches[1], dg),
        glob=nn.ModuleList(Block(dg, heads) for _ in range(layers[0])),
        to_local=nn.Linear(dg, p * dl), lemb=nn.Embedding(257, dl), lpos=nn.Embedding(p, dl),
        loc=nn.ModuleList(Block(dl, heads // 2) for _ in range(layers[1])),
        ln=nn.LayerNorm(dl), head=nn.Linear(dl, 256))).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = _generator(216)
    for _ in range(steps):
        k = _randint(gen, *patches)
        data = torch.randint(0, 256, (batch, k * p), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            shifted = F.pad(data, (p, 0), value=256)[:, :-p]
            x = (model["gemb"](shifted).view(batch, k, dg)
                 + model["gpos"](torch.arange(k, device=DEV)))
            for blk in model["glob"]:
                x = blk(x)
            local = F.pad(data.view(batch * k, p), (1, 0), value=256)[:, :-1]
            y = (model["to_local"](x).view(batch * k, p, dl) + model["lemb"](local)
                 + model["lpos"](torch.arange(p, device=DEV)))
            for blk in model["loc"]:
                y = blk(y)
            logits = model["head"](model["ln"](y))
        loss = F.cross_entropy(logits.float().view(-1, 256), data.view(-1))
        _update(opt, loss)
        del data, shifted, x, local, y, logits, loss


# ------------------------------------------------------ Mask R-CNN, instances vary

def maskrcnn_varinst_train(steps):
    """torchvision's Mask R-CNN (ResNet-50 FPN, random weights, 91 classes) trained on
    batches of 4 images of 480-800 x 480-1,000 pixels with 1-40 instances each (a new
    count per image), every instance a box and a full-image uint8 mask (the box filled);
    the model resizes images and masks to a shorter side of 800, and the mask head's
    28 x 28 targets are cut from the masks of each image's sampled proposals. SGD with
    momentum, fp32."""
    from torchvision.models.detection import maskrcnn_resnet50_fpn
    torch.manual_seed(217)
    if CUDA:
        batch, sizes, counts, min_size, max_size = 4, ((480, 800), (480, 1000)), 40, 800, 1333
    else:
        batch, sizes, counts, min_size, max_size = 2, ((64, 96), (64, 128)), 4, 96, 128
    model = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91,
                                  min_size=min_size, max_size=max_size).to(DEV).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    gen = _generator(217)
    for _ in range(steps):
        images, targets = [], []
        for _ in range(batch):
            h, w = _randint(gen, *sizes[0]), _randint(gen, *sizes[1])
            n = _randint(gen, 1, counts)
            xy = torch.rand(n, 2, generator=gen) * torch.tensor([w * 0.7, h * 0.7])
            wh = torch.rand(n, 2, generator=gen) * torch.tensor([w * 0.3, h * 0.3]) + 8
            boxes = torch.cat([xy, xy + wh], 1).floor().to(DEV)
            ys, xs = torch.arange(h, device=DEV)[:, None], torch.arange(w, device=DEV)
            x0, y0, x1, y1 = (boxes[:, i, None, None] for i in range(4))
            masks = ((ys >= y0) & (ys < y1) & (xs >= x0) & (xs < x1)).to(torch.uint8)
            images.append(torch.rand(3, h, w, generator=gen).to(DEV))
            targets.append({"boxes": boxes, "masks": masks,
                            "labels": torch.randint(1, 91, (n,), generator=gen).to(DEV)})
        _update(opt, sum(model(images, targets).values()))
        del images, targets, boxes, masks


# ------------------------------------------------------------ Medusa, tree decoding

class _TreeBlock(Block):
    """A pre-norm block whose attention takes a boolean mask (cache["mask"]) over the
    cached keys and the new ones, which are concatenated onto the cache."""

    def attend(self, x, cache):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if "k" in cache:
            k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
        cache["k"], cache["v"] = k, v
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=cache["mask"])
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


def _tree(widths):
    """Medusa's tree, every path whose i-th token is one of head i's top widths[i]: per
    node (the root first) its parent, depth, column among the heads' top-k, ancestor at
    each depth (itself past its own), and the ancestor-or-self mask."""
    paths = [()]
    for depth, w in enumerate(widths):
        paths += [q + (c,) for q in paths if len(q) == depth for c in range(w)]
    parent = [paths.index(q[:-1]) if q else 0 for q in paths]
    column = [sum(widths[:len(q) - 1]) + q[-1] if q else 0 for q in paths]
    mask = torch.eye(len(paths), dtype=torch.bool)
    chains = [[0]]
    for i in range(1, len(paths)):
        mask[i] |= mask[parent[i]]
        chains.append(chains[parent[i]] + [i])
    table = [ch + [ch[-1]] * (len(widths) + 1 - len(ch)) for ch in chains]
    return [torch.tensor(x, device=DEV) for x in (parent, [len(q) for q in paths], column,
                                                  table)] + [mask.to(DEV)]


def medusa_tree_decode(steps):
    """Medusa decoding: a 16-layer GPT (d 1,536, vocab 32,000, fp16) with four heads (a
    residual SiLU layer and an output layer each) guessing the 2nd-5th next tokens. Each
    pass runs a tree of 89 candidates (the base model's token, then the heads' top 4, 3,
    2, 2) in one forward under a tree mask, its keys and values concatenated onto the
    cache; typical acceptance (probability above min(0.09, exp(-entropy))), the longest
    accepted path common to the batch kept, every layer's cache gathered down to the
    prefix and that path. 1-4 prompts of 128-512 tokens, 64-128 new tokens; no_grad."""
    torch.manual_seed(218)
    if CUDA:
        vocab, d, layers, heads, widths = 32000, 1536, 16, 12, (4, 3, 2, 2)
        batches, prompts, news = (1, 4), (128, 512), (64, 128)
    else:
        vocab, d, layers, heads, widths = 100, 32, 2, 4, (2, 2)
        batches, prompts, news = (1, 3), (4, 8), (4, 8)
    model = _half(nn.ModuleDict(dict(
        tok=nn.Embedding(vocab, d), pos=nn.Embedding(prompts[1] + news[1] + 8, d),
        blocks=nn.ModuleList(_TreeBlock(d, heads) for _ in range(layers)),
        ln=nn.LayerNorm(d), head=nn.Linear(d, vocab, bias=False),
        res=nn.ModuleList(nn.Linear(d, d) for _ in widths),
        out=nn.ModuleList(nn.Linear(d, vocab, bias=False) for _ in widths))).to(DEV))
    parent, depth, column, table, tree_mask = _tree(widths)
    gen = _generator(218)

    def run(ids, positions, caches, mask):
        x = model["tok"](ids) + model["pos"](positions)
        for blk, cache in zip(model["blocks"], caches):
            cache["mask"] = mask
            x = blk(x, cache)
        return model["ln"](x)

    with torch.no_grad():
        for _ in range(steps):
            b, p, new = (_randint(gen, *r) for r in (batches, prompts, news))
            caches = [{} for _ in range(layers)]
            causal = torch.ones(p, p, dtype=torch.bool, device=DEV).tril()
            ids = torch.randint(0, vocab, (b, p), device=DEV)
            h = run(ids, torch.arange(p, device=DEV), caches, causal)[:, -1]
            length = p
            while length < p + new:
                tok = model["head"](h).argmax(-1, keepdim=True)
                top = torch.cat([out(h + F.silu(res(h))).topk(w, -1).indices
                                 for res, out, w in zip(model["res"], model["out"], widths)], 1)
                cand = torch.cat([tok, top[:, column[1:]]], 1)
                mask = torch.cat([tree_mask.new_ones(len(depth), length), tree_mask], 1)
                hid = run(cand, length + depth, caches, mask)
                probs = model["head"](hid).float().softmax(-1)[:, parent]
                typical = (probs * probs.clamp_min(1e-9).log()).sum(-1).exp().clamp(max=0.09)
                ok = probs.gather(-1, cand[..., None])[..., 0] > typical  # exp(-entropy)
                ok[:, 0] = True
                accepted = ok
                for _ in widths:
                    accepted = ok & accepted[:, parent]
                best = (accepted * (depth + 1)).argmax(1)
                keep = int(depth[best].min()) + 1
                path = table[best][:, :keep]
                idx = torch.cat([torch.arange(length, device=DEV).expand(b, -1),
                                 length + path], 1)[:, None, :, None]
                idx = idx.expand(-1, heads, -1, d // heads)
                for cache in caches:
                    cache["k"], cache["v"] = (cache[key].gather(2, idx) for key in "kv")
                h = hid.gather(1, path[:, -1:, None].expand(-1, -1, d))[:, 0]
                length += keep
            del caches, causal, ids, h


WORKLOADS = {
    "deq_implicit_train": (deq_implicit_train, 20),
    "revnet_recompute_train": (revnet_recompute_train, 20),
    "dreamer_world_model_train": (dreamer_world_model_train, 24),
    "controlnet_frozen_unet_train": (controlnet_frozen_unet_train, 24),
    "multi_lora_serve": (multi_lora_serve, 12),
    "megabyte_patch_lm_train": (megabyte_patch_lm_train, 24),
    "maskrcnn_varinst_train": (maskrcnn_varinst_train, 24),
    "medusa_tree_decode": (medusa_tree_decode, 8),
}
