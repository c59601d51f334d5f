"""The third corpus: ten workloads recorded on 2026-11-25, after the allocator's policy
was set, and replayed through it before anything changed (BENCHMARKS.md, "A third
corpus, held out"). Same conventions as workloads.py: `run(steps)` builds its models and
data on DEV and runs `steps` steps; random weights; seeded.

Each varies its requests in a way the first two corpora do not: padding to the longest
sequence of each batch with a fused optimizer, evaluation between training steps at
another batch size, beam search that reorders its key/value cache every token, a
contrastive loss over a batch-by-batch similarity matrix, a GRU over packed sequences
of random lengths, a variational autoencoder, a batch size that grows during training,
a diffusion transformer with an EMA copy, two models served alternately, and a
training step that keeps its gradients (`zero_grad(set_to_none=False)`) with
gradient-norm clipping.
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Gpt, resnet, small_cnn


class Encoder(nn.Module):
    """A BERT-like encoder (token and position embeddings, post-norm layers)."""

    def __init__(self, vocab, d, layers, ctx):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        layer = nn.TransformerEncoderLayer(d, d // 64, 4 * d, batch_first=True,
                                           activation="gelu")
        self.core = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx, pad):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.core(self.tok(idx) + self.pos(pos), src_key_padding_mask=pad))


def bert_mlm_dynpad_fp16(steps):
    """Masked-language-model training of a 6-layer encoder (d 768, vocab 30522), fp16
    autocast and a gradient scaler, fused AdamW; each batch of 32 is padded to its
    longest sequence (lengths drawn from 16 to 384), so the padded length changes every
    step; the loss is taken on the masked positions only (a data-dependent gather)."""
    torch.manual_seed(31)
    model = Encoder(30522, 768, 6, 512).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=DEV.type == "cuda")
    scaler = torch.amp.GradScaler(DEV.type, enabled=DEV.type == "cuda")
    g = torch.Generator().manual_seed(32)
    for _ in range(steps):
        lengths = torch.randint(16, 385, (32,), generator=g)
        t = int(lengths.max())
        idx = torch.randint(0, 30522, (32, t), device=DEV)
        pad = torch.arange(t)[None, :] >= lengths[:, None]
        pad = pad.to(DEV)
        masked = (torch.rand(32, t, device=DEV) < 0.15) & ~pad
        with torch.autocast(DEV.type, dtype=torch.float16, enabled=DEV.type == "cuda"):
            logits = model(idx, pad)
            loss = F.cross_entropy(logits[masked].float(), idx[masked])
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


def resnet34_train_with_eval(steps):
    """torchvision ResNet-34 training (batch 64 at 128x128, SGD with momentum, fp32),
    with an evaluation pass (eval mode, no grad, batch 200, two batches) after every
    other training step, in the same process."""
    torch.manual_seed(33)
    model = resnet(34, classes=100).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for s in range(steps):
        model.train()
        x = torch.randn(64, 3, 128, 128, device=DEV)
        y = torch.randint(0, 100, (64,), device=DEV)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if s % 2 == 1:
            model.eval()
            with torch.no_grad():
                correct = 0
                for _ in range(2):
                    x = torch.randn(200, 3, 128, 128, device=DEV)
                    y = torch.randint(0, 100, (200,), device=DEV)
                    correct += (model(x).argmax(1) == y).sum()
                correct.item()


def gpt_beam_search(steps):
    """Beam search with a key/value cache: a 6-layer GPT (d 768) in fp16, 4 prompts of
    64 tokens, 4 beams each; every token the cache is reordered by the surviving beams
    (index_select along the batch, a new tensor per layer per token) and grown by
    concatenation; 40 tokens per step, a new set of prompts every step."""
    torch.manual_seed(34)
    vocab, beams, prompts = 32000, 4, 4
    model = Gpt(vocab, 768, 6, 12, 256).to(DEV).half().eval()
    with torch.inference_mode():
        for _ in range(steps):
            idx = torch.randint(0, vocab, (prompts, 64), device=DEV)
            idx = idx.repeat_interleave(beams, dim=0)
            caches = [{} for _ in model.blocks]
            logits = model(idx, caches, 0)[:, -1].float()
            scores = torch.zeros(prompts, beams, device=DEV)
            scores[:, 1:] = -1e9
            pos = 64
            for _ in range(40):
                logp = F.log_softmax(logits, -1).view(prompts, beams, vocab)
                total = (scores[:, :, None] + logp).view(prompts, -1)
                scores, flat = total.topk(beams, dim=1)
                beam = flat // vocab
                token = (flat % vocab).view(-1, 1)
                keep = (beam + torch.arange(prompts, device=DEV)[:, None] * beams).view(-1)
                for c in caches:
                    c["k"] = c["k"].index_select(0, keep)
                    c["v"] = c["v"].index_select(0, keep)
                logits = model(token, caches, pos)[:, -1].float()
                pos += 1


class TextTower(nn.Module):
    def __init__(self, vocab, d, layers, ctx):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(ctx, d))
        layer = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True, norm_first=True)
        self.core = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, idx):
        h = self.core(self.tok(idx) + self.pos[: idx.shape[1]])
        return h.mean(1)


def clip_contrastive_bf16(steps):
    """Two towers trained with a contrastive loss (CLIP-like): a ResNet-18 image encoder
    (batch 256 at 96x96) and a 4-layer text transformer (d 512, 32 tokens), bf16
    autocast, AdamW; the 256 x 256 similarity matrix is taken both ways."""
    torch.manual_seed(35)
    image = resnet(18, classes=512).to(DEV)
    text = TextTower(20000, 512, 4, 32).to(DEV)
    scale = nn.Parameter(torch.tensor(2.6592, device=DEV))
    params = list(image.parameters()) + list(text.parameters()) + [scale]
    opt = torch.optim.AdamW(params, lr=1e-4)
    for _ in range(steps):
        x = torch.randn(256, 3, 96, 96, device=DEV)
        t = torch.randint(0, 20000, (256, 32), device=DEV)
        with torch.autocast(DEV.type, dtype=torch.bfloat16):
            a = F.normalize(image(x), dim=-1)
            b = F.normalize(text(t), dim=-1)
            sim = scale.exp() * a @ b.t()
            labels = torch.arange(256, device=DEV)
            loss = (F.cross_entropy(sim.float(), labels)
                    + F.cross_entropy(sim.t().float(), labels)) / 2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class SpeechGru(nn.Module):
    """A 1-D convolutional front end over 80 filterbank channels, then a bidirectional
    GRU over packed sequences, then a per-frame classifier."""

    def __init__(self, d=512, classes=64):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(80, d, 5, stride=2, padding=2), nn.ReLU(),
                                   nn.Conv1d(d, d, 5, padding=2), nn.ReLU())
        self.rnn = nn.GRU(d, d, num_layers=3, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * d, classes)

    def forward(self, x, lengths):
        h = self.front(x).transpose(1, 2)
        lengths = (lengths + 1) // 2
        packed = nn.utils.rnn.pack_padded_sequence(h, lengths, batch_first=True,
                                                   enforce_sorted=False)
        y, _ = self.rnn(packed)
        y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True)
        return self.out(y), lengths


def gru_packed_varlen_train(steps):
    """Speech-like training: the model above on batches of 24 utterances of random
    lengths (200 to 1200 frames, padded to the batch's longest), CTC loss, Adam."""
    torch.manual_seed(36)
    model = SpeechGru().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(37)
    for _ in range(steps):
        lengths = torch.randint(200, 1201, (24,), generator=g)
        t = int(lengths.max())
        x = torch.randn(24, 80, t, device=DEV)
        logits, out_len = model(x, lengths)
        target_len = torch.randint(10, 60, (24,), generator=g)
        targets = torch.randint(1, 64, (int(target_len.sum()),), device=DEV)
        logp = logits.log_softmax(-1).transpose(0, 1)
        loss = F.ctc_loss(logp, targets, out_len, target_len, zero_infinity=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class Vae(nn.Module):
    def __init__(self, c=64, z=256):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(3, c, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(c, 2 * c, 4, 2, 1), nn.BatchNorm2d(2 * c), nn.LeakyReLU(0.2),
            nn.Conv2d(2 * c, 4 * c, 4, 2, 1), nn.BatchNorm2d(4 * c), nn.LeakyReLU(0.2),
            nn.Conv2d(4 * c, 8 * c, 4, 2, 1), nn.BatchNorm2d(8 * c), nn.LeakyReLU(0.2))
        self.mu = nn.Linear(8 * c * 8 * 8, z)
        self.logvar = nn.Linear(8 * c * 8 * 8, z)
        self.dec_in = nn.Linear(z, 8 * c * 8 * 8)
        self.dec = nn.Sequential(
            nn.ConvTranspose2d(8 * c, 4 * c, 4, 2, 1), nn.BatchNorm2d(4 * c), nn.ReLU(),
            nn.ConvTranspose2d(4 * c, 2 * c, 4, 2, 1), nn.BatchNorm2d(2 * c), nn.ReLU(),
            nn.ConvTranspose2d(2 * c, c, 4, 2, 1), nn.BatchNorm2d(c), nn.ReLU(),
            nn.ConvTranspose2d(c, 3, 4, 2, 1))
        self.c = c

    def forward(self, x):
        h = self.enc(x).flatten(1)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        y = self.dec(self.dec_in(z).view(-1, 8 * self.c, 8, 8))
        return y, mu, logvar


def vae_conv_train(steps):
    """A convolutional variational autoencoder at 128x128, batch 48, fp32, Adam;
    reconstruction plus KL loss."""
    torch.manual_seed(38)
    model = Vae().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    for _ in range(steps):
        x = torch.rand(48, 3, 128, 128, device=DEV)
        y, mu, logvar = model(x)
        kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        loss = F.mse_loss(y, x) + 1e-3 * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def mlp_growing_batch_train(steps):
    """A batch size that grows during training (batch-size warm-up): a 6-layer MLP of
    width 4096 with LayerNorm, fp32, AdamW, batch 256, 512, 1024, 2048, 3072, 4096..."""
    torch.manual_seed(39)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(4096, 4096), nn.LayerNorm(4096), nn.GELU()]
    model = nn.Sequential(nn.Linear(1024, 4096), *layers, nn.Linear(4096, 1000)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batches = [256, 512, 1024, 2048, 3072, 4096]
    for s in range(steps):
        b = batches[min(s, len(batches) - 1)]
        x = torch.randn(b, 1024, device=DEV)
        y = torch.randint(0, 1000, (b,), device=DEV)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class DitBlock(nn.Module):
    """A diffusion-transformer block: adaptive layer norm from the timestep embedding."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, elementwise_affine=False)
        self.ln2 = nn.LayerNorm(d, elementwise_affine=False)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))
        self.ada = nn.Linear(d, 6 * d)

    def forward(self, x, c):
        s1, b1, g1, s2, b2, g2 = self.ada(F.silu(c))[:, None].chunk(6, dim=-1)
        b, t, d = x.shape
        h = self.ln1(x) * (1 + s1) + b1
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + g1 * self.proj(a)
        return x + g2 * self.mlp(self.ln2(x) * (1 + s2) + b2)


class Dit(nn.Module):
    def __init__(self, d=768, depth=8, heads=12, patch=2, channels=4, size=32):
        super().__init__()
        self.patch = patch
        self.embed = nn.Conv2d(channels, d, patch, patch)
        self.pos = nn.Parameter(torch.zeros(1, (size // patch) ** 2, d))
        self.t = nn.Sequential(nn.Linear(256, d), nn.SiLU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList(DitBlock(d, heads) for _ in range(depth))
        self.out = nn.Linear(d, patch * patch * channels)

    def forward(self, x, t):
        freqs = torch.exp(-torch.arange(128, device=x.device) * (9.21 / 128))
        emb = torch.cat([torch.sin(t[:, None] * freqs), torch.cos(t[:, None] * freqs)], -1)
        c = self.t(emb)
        h = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        for blk in self.blocks:
            h = blk(h, c)
        return self.out(h)


def dit_diffusion_bf16_ema(steps):
    """A diffusion transformer (8 blocks, d 768, 2x2 patches of 4x32x32 latents) trained
    to predict noise, bf16 autocast, AdamW, batch 64, with an EMA copy of the weights
    updated after every step (torch._foreach_lerp_)."""
    torch.manual_seed(40)
    model = Dit().to(DEV)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        x0 = torch.randn(64, 4, 32, 32, device=DEV)
        t = torch.rand(64, device=DEV) * 1000
        noise = torch.randn_like(x0)
        a = torch.cos(t / 1000 * 1.5708)[:, None, None, None]
        xt = a * x0 + (1 - a * a).sqrt() * noise
        with torch.autocast(DEV.type, dtype=torch.bfloat16):
            pred = model(xt, t)
        target = noise.view(64, 4, 16, 2, 16, 2).permute(0, 2, 4, 3, 5, 1).reshape(64, 256, 16)
        loss = F.mse_loss(pred.float(), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1e-3)


def two_models_serving(steps):
    """Two models served in one process, requests alternating: a ResNet-18 classifier on
    image batches (1 to 64 images at 224x224, fp16) and a 6-layer GPT (d 512) scoring
    text batches (1 to 16 sequences of 32 to 512 tokens, fp16); inference mode. One
    step is 8 requests."""
    torch.manual_seed(41)
    cnn = resnet(18).to(DEV).half().eval()
    lm = Gpt(32000, 512, 6, 8, 512).to(DEV).half().eval()
    g = torch.Generator().manual_seed(42)
    with torch.inference_mode():
        for _ in range(steps):
            for r in range(8):
                if r % 2 == 0:
                    b = int(torch.randint(1, 65, (1,), generator=g))
                    x = torch.randn(b, 3, 224, 224, device=DEV, dtype=torch.half)
                    cnn(x).softmax(-1).argmax(-1).cpu()
                else:
                    b = int(torch.randint(1, 17, (1,), generator=g))
                    t = int(torch.randint(32, 513, (1,), generator=g))
                    idx = torch.randint(0, 32000, (b, t), device=DEV)
                    lm(idx).float().log_softmax(-1).gather(-1, idx[..., None]).sum().item()


def cnn_keep_grads_clip_train(steps):
    """The small CNN of workloads.py at batch 256 on 64x64 images, SGD with Nesterov
    momentum, gradients kept between steps (`zero_grad(set_to_none=False)`), clipped by
    their global norm (foreach), and a second loss term from a detached copy of the
    logits; fp32."""
    torch.manual_seed(43)
    model = small_cnn(100).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    for _ in range(steps):
        x = torch.randn(256, 3, 64, 64, device=DEV)
        y = torch.randint(0, 100, (256,), device=DEV)
        logits = model(x)
        soft = logits.detach().softmax(-1)
        loss = F.cross_entropy(logits, y) + 0.1 * F.kl_div(logits.log_softmax(-1), soft,
                                                           reduction="batchmean")
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()


WORKLOADS = {
    "bert_mlm_dynpad_fp16": (bert_mlm_dynpad_fp16, 8),
    "resnet34_train_with_eval": (resnet34_train_with_eval, 6),
    "gpt_beam_search": (gpt_beam_search, 4),
    "clip_contrastive_bf16": (clip_contrastive_bf16, 6),
    "gru_packed_varlen_train": (gru_packed_varlen_train, 8),
    "vae_conv_train": (vae_conv_train, 6),
    "mlp_growing_batch_train": (mlp_growing_batch_train, 8),
    "dit_diffusion_bf16_ema": (dit_diffusion_bf16_ema, 6),
    "two_models_serving": (two_models_serving, 4),
    "cnn_keep_grads_clip_train": (cnn_keep_grads_clip_train, 6),
}
