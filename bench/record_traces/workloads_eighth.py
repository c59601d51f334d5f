"""The eighth corpus: four workloads recorded on 2026-11-25 (fourth session), held out
from every change to the allocator (BENCHMARKS.md, "An eighth corpus, held out"). Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded.

Each moves memory in a way the first seven corpora do not: activations saved for the
backward pass kept on the host (`torch.autograd.graph.save_on_cpu`) and brought back
one by one, an optimizer whose state lives on the host (gradients out, parameters back
every step), layers skipped at random each step (stochastic depth: a different set of
activations every step), and a vector-quantised autoencoder whose codebook lookup makes
one large distance matrix per step.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block, Gpt


def activation_offload_train(steps):
    """A 12-layer GPT (d 1,024, vocab 32,000, context 512) trained on 8 sequences of
    512 in bf16 autocast with AdamW, every tensor saved for the backward pass kept in
    pinned host memory (`torch.autograd.graph.save_on_cpu`) and copied back when the
    backward pass needs it."""
    torch.manual_seed(81)
    model = Gpt(32000, 1024, 12, 16, 512).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    pin = DEV.type == "cuda"
    for _ in range(steps):
        idx = torch.randint(0, 32000, (8, 513), device=DEV)
        with torch.autograd.graph.save_on_cpu(pin_memory=pin):
            with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=DEV.type == "cuda"):
                logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, 32000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def cpu_optimizer_offload_train(steps):
    """A 16-layer GPT (d 1,024, vocab 32,000, context 256) whose AdamW state and fp32
    master weights live on the host: each step the GPU runs forward and backward on 8
    sequences of 256, the gradients are copied to the host and freed, the host optimizer
    steps, and the new weights are copied back into the GPU parameters."""
    torch.manual_seed(82)
    model = Gpt(32000, 1024, 16, 16, 256).to(DEV)
    params = [p for p in model.parameters()]
    master = [p.detach().to("cpu", copy=True).requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(master, lr=3e-4)
    for _ in range(steps):
        idx = torch.randint(0, 32000, (8, 257), device=DEV)
        loss = F.cross_entropy(model(idx[:, :-1]).reshape(-1, 32000), idx[:, 1:].reshape(-1))
        loss.backward()
        for p, m in zip(params, master):
            m.grad = p.grad.to("cpu")
            p.grad = None
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for p, m in zip(params, master):
                p.copy_(m, non_blocking=True)


class LayerDropGpt(nn.Module):
    """A GPT whose blocks are each skipped with probability `p` while training
    (stochastic depth, as LayerDrop does)."""

    def __init__(self, vocab, d, layers, heads, ctx, p):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.p = p

    def forward(self, idx, keep):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk, k in zip(self.blocks, keep):
            if k:
                x = blk(x)
        return self.head(self.ln(x))


def layerdrop_train(steps):
    """A 24-layer GPT (d 768, vocab 16,384, context 256) trained with LayerDrop (each
    block skipped with probability 0.4, drawn every step, so every step saves a
    different set of activations) on 16 sequences of 256, AdamW, bf16 autocast."""
    torch.manual_seed(83)
    model = LayerDropGpt(16384, 768, 24, 12, 256, 0.4).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(16)
    for _ in range(steps):
        keep = (torch.rand(24, generator=gen) >= 0.4).tolist()
        idx = torch.randint(0, 16384, (16, 257), device=DEV)
        with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=DEV.type == "cuda"):
            logits = model(idx[:, :-1], keep)
        loss = F.cross_entropy(logits.float().reshape(-1, 16384), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class VqVae(nn.Module):
    """A convolutional VQ-VAE: a 4x downsampling encoder, a codebook of 8,192 vectors
    of 256 (nearest code by a full distance matrix, straight-through gradients) and a
    mirrored decoder."""

    def __init__(self, codes=8192, d=256):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(3, 128, 4, 2, 1), nn.ReLU(), nn.Conv2d(128, 256, 4, 2, 1), nn.ReLU(),
            nn.Conv2d(256, d, 3, 1, 1))
        self.codebook = nn.Embedding(codes, d)
        self.dec = nn.Sequential(
            nn.Conv2d(d, 256, 3, 1, 1), nn.ReLU(), nn.ConvTranspose2d(256, 128, 4, 2, 1),
            nn.ReLU(), nn.ConvTranspose2d(128, 3, 4, 2, 1))

    def forward(self, x):
        z = self.enc(x)
        b, d, h, w = z.shape
        flat = z.permute(0, 2, 3, 1).reshape(-1, d)
        dist = (flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.codebook.weight.t()
                + self.codebook.weight.pow(2).sum(1)[None])
        q = self.codebook(dist.argmin(1)).view(b, h, w, d).permute(0, 3, 1, 2)
        commit = F.mse_loss(z, q.detach()) + 0.25 * F.mse_loss(q, z.detach())
        q = z + (q - z).detach()
        return self.dec(q), commit


def vqvae_codebook_train(steps):
    """VQ-VAE training on 32 images of 128 x 128 (a 32 x 32 grid of codes each, so a
    32,768 x 8,192 distance matrix per step), Adam; every fourth step a batch of 64 at
    96 x 96 instead."""
    torch.manual_seed(84)
    model = VqVae().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    for step in range(steps):
        n, s = (64, 96) if step % 4 == 3 else (32, 128)
        x = torch.randn(n, 3, s, s, device=DEV)
        recon, commit = model(x)
        loss = F.mse_loss(recon, x) + commit
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


WORKLOADS = {
    "activation_offload_train": (activation_offload_train, 4),
    "cpu_optimizer_offload_train": (cpu_optimizer_offload_train, 4),
    "layerdrop_train": (layerdrop_train, 8),
    "vqvae_codebook_train": (vqvae_codebook_train, 8),
}
