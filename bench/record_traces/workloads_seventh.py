"""The seventh corpus: five workloads recorded on 2026-11-25 (fourth session), held out
from every change to the allocator (BENCHMARKS.md, "A seventh corpus, held out"). Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded.

Each is a way of using GPU memory the first six corpora lack: a server that keeps three
models on the host and moves one at a time onto the GPU (weights of different sizes
come and go), a tree-structured recursive network whose graph changes with every
example (thousands of requests of a few hundred bytes), a masked autoencoder whose
masking ratio, and so every encoder shape, changes each step, weight-only int8
inference that dequantises each layer's weight into a scratch buffer per call, and a
neural radiance field whose number of samples per ray changes each step.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block, Gpt


def _amp(dtype):
    return dict(device_type=DEV.type, dtype=dtype, enabled=DEV.type == "cuda")


def model_swap_serve(steps):
    """Three GPT models (4 x 512, 8 x 768 and 12 x 1,024; vocab 32,000; fp16) kept on
    the host; each step moves the next one of the cycle A, B, C, B onto the GPU, serves
    four batches (8-32 sequences of 64-256 tokens, next-token argmax) and moves it back,
    freeing its weights."""
    torch.manual_seed(71)
    dtype = torch.float16 if DEV.type == "cuda" else torch.float32
    models = [Gpt(32000, d, n, d // 64, 256).to(dtype).eval()
              for d, n in ((512, 4), (768, 8), (1024, 12))]
    gen = torch.Generator().manual_seed(11)
    order = [0, 1, 2, 1]
    with torch.no_grad():
        for step in range(steps):
            model = models[order[step % len(order)]].to(DEV)
            for _ in range(4):
                b = int(torch.randint(8, 33, (1,), generator=gen))
                t = int(torch.randint(64, 257, (1,), generator=gen))
                idx = torch.randint(0, 32000, (b, t), device=DEV)
                model(idx)[:, -1].argmax(-1).cpu()
            models[order[step % len(order)]] = model.to("cpu")
            del model


class TreeGru(nn.Module):
    """A recursive network over binary trees: leaves embed tokens, each inner node is
    a GRU cell over its two children's states."""

    def __init__(self, vocab=5000, d=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.cell = nn.GRUCell(2 * d, d)
        self.h0 = nn.Parameter(torch.zeros(1, d))
        self.out = nn.Linear(d, 5)

    def node(self, tree):
        if isinstance(tree, int):
            return self.emb(torch.tensor([tree], device=self.h0.device))
        left, right = self.node(tree[0]), self.node(tree[1])
        return self.cell(torch.cat([left, right], 1), self.h0 + 0.5 * (left + right))

    def forward(self, tree):
        return self.out(self.node(tree))


def _random_tree(gen, leaves):
    if leaves == 1:
        return int(torch.randint(0, 5000, (1,), generator=gen))
    k = int(torch.randint(1, leaves, (1,), generator=gen))
    return (_random_tree(gen, k), _random_tree(gen, leaves - k))


def tree_gru_train(steps):
    """Sentiment-style training of a tree GRU (d 256) on random binary trees of 8-48
    leaves, one tree at a time, 24 trees a step with Adam: every example builds a graph
    of its own shape from requests of a few hundred bytes to a few KiB."""
    torch.manual_seed(72)
    model = TreeGru().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(12)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        for _ in range(24):
            tree = _random_tree(gen, int(torch.randint(8, 49, (1,), generator=gen)))
            label = torch.randint(0, 5, (1,), device=DEV)
            (F.cross_entropy(model(tree), label) / 24).backward()
        opt.step()


class Mae(nn.Module):
    """A masked autoencoder over 16 x 16 patches of 224 x 224 images: an 8-layer
    encoder (d 768) sees the visible patches only, a 4-layer decoder (d 384) all."""

    def __init__(self, d=768, dd=384, patches=196):
        super().__init__()
        self.patch = nn.Linear(3 * 16 * 16, d)
        self.pos = nn.Parameter(torch.zeros(1, patches, d))
        self.enc = nn.ModuleList(Block(d, 12) for _ in range(8))
        self.to_dec = nn.Linear(d, dd)
        self.mask_tok = nn.Parameter(torch.zeros(1, 1, dd))
        self.dpos = nn.Parameter(torch.zeros(1, patches, dd))
        self.dec = nn.ModuleList(Block(dd, 6) for _ in range(4))
        self.pix = nn.Linear(dd, 3 * 16 * 16)

    def forward(self, patches, keep):
        b, n, _ = patches.shape
        x = self.patch(patches) + self.pos
        idx = torch.rand(b, n, device=patches.device).argsort(1)
        vis = idx[:, :keep]
        x = torch.gather(x, 1, vis[..., None].expand(-1, -1, x.shape[-1]))
        for blk in self.enc:
            x = blk(x)
        src = self.to_dec(x)
        y = self.mask_tok.to(src.dtype).expand(b, n, -1).clone()
        y = y.scatter(1, vis[..., None].expand(-1, -1, y.shape[-1]), src)
        y = y + self.dpos
        for blk in self.dec:
            y = blk(y)
        return self.pix(y), idx[:, keep:]


def mae_varmask_train(steps):
    """Masked-autoencoder pre-training, bf16 autocast, AdamW, batch 64: the masking
    ratio is drawn from 0.40-0.90 each step, so the encoder sees 20-118 patches per
    image and every encoder activation changes size; the loss is on masked patches."""
    torch.manual_seed(73)
    model = Mae().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1.5e-4)
    gen = torch.Generator().manual_seed(13)
    for _ in range(steps):
        ratio = 0.4 + 0.5 * float(torch.rand(1, generator=gen))
        keep = max(1, int(196 * (1 - ratio)))
        img = torch.randn(64, 3, 224, 224, device=DEV)
        patches = img.unfold(2, 16, 16).unfold(3, 16, 16).permute(0, 2, 3, 1, 4, 5)
        patches = patches.reshape(64, 196, 3 * 16 * 16)
        with torch.autocast(**_amp(torch.bfloat16)):
            pred, masked = model(patches, keep)
        sel = masked[..., None].expand(-1, -1, patches.shape[-1])
        loss = F.mse_loss(torch.gather(pred.float(), 1, sel), torch.gather(patches, 1, sel))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class Int8Linear(nn.Module):
    """A weight-only int8 linear layer: int8 weights and a scale per output row,
    dequantised into a scratch weight for each call."""

    def __init__(self, d_in, d_out, dtype):
        super().__init__()
        w = torch.randn(d_out, d_in) / d_in ** 0.5
        scale = w.abs().amax(1, keepdim=True) / 127
        self.register_buffer("q", (w / scale).round().to(torch.int8))
        self.register_buffer("scale", scale.to(dtype))

    def forward(self, x):
        return x @ (self.q.to(x.dtype) * self.scale).t()


def int8_dequant_infer(steps):
    """Weight-only int8 inference of a 16-layer MLP-mixer-like stack (d 2,048, hidden
    8,192, fp16 activations): each request has its own batch (1-64) of 128 tokens, and
    every layer dequantises its 16-32 MiB weight into a scratch buffer freed after use;
    20 requests a step."""
    torch.manual_seed(74)
    dtype = torch.float16 if DEV.type == "cuda" else torch.float32
    layers = nn.ModuleList()
    for _ in range(8):
        layers.append(Int8Linear(2048, 8192, dtype))
        layers.append(Int8Linear(8192, 2048, dtype))
    layers = layers.to(DEV)
    norm = nn.LayerNorm(2048).to(DEV, dtype)
    gen = torch.Generator().manual_seed(14)
    with torch.no_grad():
        for _ in range(steps):
            for _ in range(20):
                b = int(torch.randint(1, 65, (1,), generator=gen))
                x = torch.randn(b, 128, 2048, device=DEV, dtype=dtype)
                for i in range(0, len(layers), 2):
                    x = x + layers[i + 1](F.gelu(layers[i](norm(x))))
                x.float().mean().item()


class Nerf(nn.Module):
    """A NeRF MLP: positional encodings of points and directions, 8 layers of 256 with
    a skip, density and colour heads."""

    def __init__(self, w=256, freqs=10, dfreqs=4):
        super().__init__()
        self.freqs, self.dfreqs = freqs, dfreqs
        pin, din = 3 + 6 * freqs, 3 + 6 * dfreqs
        self.trunk = nn.ModuleList(
            [nn.Linear(pin, w)] + [nn.Linear(w + (pin if i == 4 else 0), w) for i in range(1, 8)])
        self.sigma = nn.Linear(w, 1)
        self.feat = nn.Linear(w, w)
        self.rgb = nn.Sequential(nn.Linear(w + din, w // 2), nn.ReLU(), nn.Linear(w // 2, 3))

    @staticmethod
    def encode(x, n):
        f = 2.0 ** torch.arange(n, device=x.device) * torch.pi
        y = x[..., None] * f
        return torch.cat([x, y.sin().flatten(-2), y.cos().flatten(-2)], -1)

    def forward(self, pts, dirs):
        p = self.encode(pts, self.freqs)
        h = p
        for i, layer in enumerate(self.trunk):
            h = F.relu(layer(torch.cat([h, p], -1) if i == 4 else h))
        d = self.encode(dirs, self.dfreqs).expand(*h.shape[:-1], -1)
        return self.sigma(h).squeeze(-1), torch.sigmoid(self.rgb(torch.cat([self.feat(h), d], -1)))


def _render(model, origins, dirs, t):
    pts = origins[:, None] + dirs[:, None] * t[..., None]
    sigma, rgb = model(pts, dirs[:, None])
    delta = torch.diff(t, dim=1, append=t[:, -1:] + 1e10)
    alpha = 1 - torch.exp(-F.relu(sigma) * delta)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha + 1e-10], 1), 1)
    w = alpha * trans[:, :-1]
    return (w[..., None] * rgb).sum(1), w


def nerf_varsamples_train(steps):
    """NeRF training, coarse and fine MLPs, Adam, 4,096 rays a step: 64 coarse samples
    per ray, then a number of fine samples drawn each step from 32-160 by importance
    sampling of the coarse weights, so the fine pass's activations change size."""
    torch.manual_seed(75)
    coarse, fine = Nerf().to(DEV), Nerf().to(DEV)
    opt = torch.optim.Adam(list(coarse.parameters()) + list(fine.parameters()), lr=5e-4)
    gen = torch.Generator().manual_seed(15)
    for _ in range(steps):
        origins = torch.randn(4096, 3, device=DEV)
        dirs = F.normalize(torch.randn(4096, 3, device=DEV), dim=-1)
        target = torch.rand(4096, 3, device=DEV)
        t = torch.linspace(2.0, 6.0, 64, device=DEV).expand(4096, 64).contiguous()
        rgb_c, w = _render(coarse, origins, dirs, t)
        n_fine = int(torch.randint(32, 161, (1,), generator=gen))
        extra = torch.multinomial(w.detach() + 1e-5, n_fine, replacement=True)
        t_fine = torch.sort(torch.cat([t, torch.gather(t, 1, extra)], 1), 1).values
        rgb_f, _ = _render(fine, origins, dirs, t_fine)
        loss = F.mse_loss(rgb_c, target) + F.mse_loss(rgb_f, target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


WORKLOADS = {
    "model_swap_serve": (model_swap_serve, 8),
    "tree_gru_train": (tree_gru_train, 4),
    "mae_varmask_train": (mae_varmask_train, 8),
    "int8_dequant_infer": (int8_dequant_infer, 4),
    "nerf_varsamples_train": (nerf_varsamples_train, 10),
}
