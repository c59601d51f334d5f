"""The workloads recorded into tests/data/traces/ (see README.md beside this file).

Each workload is a function `run(steps)` that builds its models and data on the GPU
and runs `steps` steps. Models are defined here or taken from torchvision with random
weights (the GPU machine has no network). Every workload seeds its generators, so a
recording is reproducible up to PyTorch's own nondeterminism.
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

# RECORD_DEVICE=cpu runs the workloads without a GPU (to try them; nothing is recorded).
DEV = torch.device(os.environ.get("RECORD_DEVICE", "cuda"))


# ----------------------------------------------------------------------------- models

class Block(nn.Module):
    """A pre-norm transformer block (causal self-attention and an MLP)."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def attend(self, x, cache=None):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            # A growing key/value cache: concatenation allocates a longer tensor each
            # token, as simple generation loops do.
            if cache.get("k") is not None:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
            causal = t > 1
        else:
            causal = True
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x, cache=None):
        x = x + self.attend(x, cache)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, d, layers, heads, ctx, ckpt=False):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.ckpt = ckpt

    def forward(self, idx, caches=None, start=0):
        t = idx.shape[1]
        pos = torch.arange(start, start + t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for i, blk in enumerate(self.blocks):
            if caches is not None:
                x = blk(x, caches[i])
            elif self.ckpt and self.training:
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return self.head(self.ln(x))


class LstmLm(nn.Module):
    def __init__(self, vocab, d, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.LSTM(d, d, num_layers=layers, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, idx):
        y, _ = self.rnn(self.emb(idx))
        return self.out(y)


class UNet(nn.Module):
    """A small U-Net: convolutions, down- and up-sampling, skip connections."""

    def __init__(self, c=32):
        super().__init__()

        def conv(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(8, o), nn.SiLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.GroupNorm(8, o), nn.SiLU())

        self.d1, self.d2, self.d3 = conv(3, c), conv(c, 2 * c), conv(2 * c, 4 * c)
        self.mid = conv(4 * c, 4 * c)
        self.u3, self.u2, self.u1 = conv(8 * c, 2 * c), conv(4 * c, c), conv(2 * c, c)
        self.out = nn.Conv2d(c, 3, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.avg_pool2d(a, 2))
        c = self.d3(F.avg_pool2d(b, 2))
        m = self.mid(F.avg_pool2d(c, 2))
        c2 = self.u3(torch.cat([F.interpolate(m, scale_factor=2), c], 1))
        b2 = self.u2(torch.cat([F.interpolate(c2, scale_factor=2), b], 1))
        a2 = self.u1(torch.cat([F.interpolate(b2, scale_factor=2), a], 1))
        return self.out(a2)


def small_cnn(classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(256, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, classes))


def resnet(depth, classes=1000):
    import torchvision
    return getattr(torchvision.models, f"resnet{depth}")(weights=None, num_classes=classes)


# -------------------------------------------------------------------------- workloads

def resnet50_amp_train(steps):
    """ResNet-50 training, fp16 autocast with a gradient scaler, batch 64 at 160x160, SGD."""
    torch.manual_seed(1)
    model = resnet(50).to(DEV).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(steps):
        x = torch.randn(64, 3, 160, 160, device=DEV).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (64,), device=DEV)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


def resnet18_infer_varbatch(steps):
    """ResNet-18 inference (eval, no grad), batch size changing every step (1 to 96), fp32."""
    torch.manual_seed(2)
    model = resnet(18).to(DEV).eval()
    batches = [96, 1, 32, 7, 64, 16, 80, 3, 48, 24]
    with torch.no_grad():
        for s in range(steps):
            x = torch.randn(batches[s % len(batches)], 3, 224, 224, device=DEV)
            model(x).softmax(-1).argmax(-1)


def gpt_train_varlen(steps):
    """A 12-layer GPT (d 768) training with AdamW, bf16 autocast, sequence length changing
    every step (128 to 1024), batch 8."""
    torch.manual_seed(3)
    model = Gpt(vocab=32000, d=768, layers=12, heads=12, ctx=1024).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    lengths = [512, 128, 1024, 256, 768, 384, 896, 640]
    for s in range(steps):
        t = lengths[s % len(lengths)]
        idx = torch.randint(0, 32000, (8, t + 1), device=DEV)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, 32000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def gpt_checkpoint_train(steps):
    """The same GPT with activation checkpointing (every block recomputed in backward),
    fp32, batch 16, sequence length alternating 256 / 512."""
    torch.manual_seed(4)
    model = Gpt(vocab=16000, d=512, layers=8, heads=8, ctx=512, ckpt=True).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for s in range(steps):
        t = 512 if s % 2 == 0 else 256
        idx = torch.randint(0, 16000, (16, t + 1), device=DEV)
        loss = F.cross_entropy(model(idx[:, :-1]).view(-1, 16000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def gpt_generate_kvcache(steps):
    """Generation with a growing key/value cache: a 6-layer GPT (d 1024) in fp16, batch 8,
    a 128-token prompt, then one token at a time (each step of this workload generates
    32 tokens, restarting from a fresh prompt every 3 steps)."""
    torch.manual_seed(5)
    model = Gpt(vocab=32000, d=1024, layers=6, heads=16, ctx=1024).to(DEV).half().eval()
    with torch.no_grad():
        caches, idx, start = None, None, 0
        for s in range(steps):
            if s % 3 == 0:
                caches = [dict() for _ in model.blocks]
                prompt = torch.randint(0, 32000, (8, 128), device=DEV)
                logits = model(prompt, caches, 0)
                idx, start = logits[:, -1:].argmax(-1), 128
            for _ in range(32):
                logits = model(idx, caches, start)
                idx = logits[:, -1:].argmax(-1)
                start += 1


def lstm_train(steps):
    """A 2-layer LSTM language model (d 1024) training, batch 32, sequence length 256
    (every third step 128), Adam."""
    torch.manual_seed(6)
    model = LstmLm(vocab=10000, d=1024, layers=2).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for s in range(steps):
        t = 128 if s % 3 == 2 else 256
        idx = torch.randint(0, 10000, (32, t + 1), device=DEV)
        loss = F.cross_entropy(model(idx[:, :-1]).reshape(-1, 10000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def side_stream_loader_train(steps):
    """A CNN trained on batches copied to the GPU on a side stream, one batch ahead: the
    loader stream allocates each batch (pinned host memory, non-blocking copy), the main
    stream waits for it and calls record_stream, as a prefetching data loader does.
    Batch 128 at 64x64, SGD; the labels travel the same way."""
    torch.manual_seed(7)
    model = small_cnn().to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    host_x = [torch.randn(128, 3, 64, 64).pin_memory() for _ in range(2)]
    host_y = [torch.randint(0, 10, (128,)).pin_memory() for _ in range(2)]

    def load(i):
        with torch.cuda.stream(side):
            x = host_x[i % 2].to(DEV, non_blocking=True)
            y = host_y[i % 2].to(DEV, non_blocking=True)
            x = (x - 0.5) * 2.0  # a transform on the loader stream
        return x, y

    nxt = load(0)
    for s in range(steps):
        main.wait_stream(side)
        x, y = nxt
        x.record_stream(main)
        y.record_stream(main)
        nxt = load(s + 1)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del x, y
    main.wait_stream(side)
    del nxt


def dcgan_generator(z_dim):
    """A DCGAN generator: `z_dim` x 1 x 1 noise to a 3 x 64 x 64 image."""
    return nn.Sequential(
        nn.ConvTranspose2d(z_dim, 512, 4, 1, 0), nn.BatchNorm2d(512), nn.ReLU(),
        nn.ConvTranspose2d(512, 256, 4, 2, 1), nn.BatchNorm2d(256), nn.ReLU(),
        nn.ConvTranspose2d(256, 128, 4, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.ConvTranspose2d(64, 3, 4, 2, 1), nn.Tanh())


def gan_two_models_train(steps):
    """Two models in one process: a convolutional GAN (generator and discriminator, each
    with its own Adam), batch 64 at 64x64."""
    torch.manual_seed(8)
    z_dim = 128
    gen = dcgan_generator(z_dim).to(DEV)
    disc = nn.Sequential(
        nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(64, 128, 4, 2, 1), nn.BatchNorm2d(128), nn.LeakyReLU(0.2),
        nn.Conv2d(128, 256, 4, 2, 1), nn.BatchNorm2d(256), nn.LeakyReLU(0.2),
        nn.Conv2d(256, 512, 4, 2, 1), nn.BatchNorm2d(512), nn.LeakyReLU(0.2),
        nn.Conv2d(512, 1, 4, 1, 0), nn.Flatten()).to(DEV)
    og = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    od = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for _ in range(steps):
        real = torch.randn(64, 3, 64, 64, device=DEV)
        fake = gen(torch.randn(64, z_dim, 1, 1, device=DEV))
        d_loss = (F.binary_cross_entropy_with_logits(disc(real), torch.ones(64, 1, device=DEV))
                  + F.binary_cross_entropy_with_logits(disc(fake.detach()),
                                                       torch.zeros(64, 1, device=DEV)))
        od.zero_grad(set_to_none=True)
        d_loss.backward()
        od.step()
        g_loss = F.binary_cross_entropy_with_logits(disc(fake), torch.ones(64, 1, device=DEV))
        og.zero_grad(set_to_none=True)
        g_loss.backward()
        og.step()


def unet_bf16_train(steps):
    """A small U-Net (denoising-style regression) training in bf16 autocast, batch 16 at
    128x128 (every other step 96x96), AdamW."""
    torch.manual_seed(9)
    model = UNet(48).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for s in range(steps):
        side = 128 if s % 2 == 0 else 96
        x = torch.randn(16, 3, side, side, device=DEV)
        noise = torch.randn_like(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x + noise).float(), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def tiny_mlp_train(steps):
    """A small MLP training step (for the pickled snapshot: a few MB at most)."""
    torch.manual_seed(10)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(),
                          nn.Linear(256, 10)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x = torch.randn(128, 64, device=DEV)
        y = torch.randint(0, 10, (128,), device=DEV)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# name -> (function, steps)
WORKLOADS = {
    "resnet50_amp_train": (resnet50_amp_train, 5),
    "resnet18_infer_varbatch": (resnet18_infer_varbatch, 10),
    "gpt_train_varlen": (gpt_train_varlen, 8),
    "gpt_checkpoint_train": (gpt_checkpoint_train, 6),
    "gpt_generate_kvcache": (gpt_generate_kvcache, 6),
    "lstm_train": (lstm_train, 6),
    "side_stream_loader_train": (side_stream_loader_train, 12),
    "gan_two_models_train": (gan_two_models_train, 8),
    "unet_bf16_train": (unet_bf16_train, 6),
}
