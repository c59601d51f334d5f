"""The fifteenth corpus: eight workloads written on 2026-11-26 (eleventh session on the
allocator), held out from every change to the allocator until recorded. Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and
data are smaller, half precision and pinned memory are left out.

Each holds memory in a way the first fourteen corpora do not: the Muon optimizer
(Newton-Schulz orthogonalisation of every matrix's momentum in bf16, a ladder of
square and rectangular temporaries in the optimizer step); sharpness-aware minimisation
(a perturbation kept per parameter across a second forward and backward); batches of a
fixed token budget (the batch shrinks as the sequence grows, so the same bytes come in
new shapes and the attention scores grow with the length); a FastSpeech-style length
regulator (the decoder's length is the sum of predicted durations, known only on the
host); nucleus sampling (the whole vocabulary sorted, summed and scattered back every
token); a vision-language model that splices a varying number of images' tokens into
each sample's text; an energy-based model trained with Langevin sampling (twenty input
gradients a step from a sample buffer on the GPU); and quantisation-aware training
(PyTorch's own fake-quantised ResNet with observers).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block, Gpt
# The thirteenth corpus's helpers: autocast settings, seeded generators, random choices.
from workloads_thirteenth import CUDA, _amp, _generator, _pick
# The fourteenth corpus's helpers: an integer in a closed range, a module in fp16.
from workloads_fourteenth import _half, _randint


# ------------------------------------------------------------------------------- Muon

def _newton_schulz(g, iters=5):
    """The orthogonalised direction of a matrix (Muon's quintic Newton-Schulz iteration,
    in bf16 on the GPU): a new tensor the shape of `g`."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.bfloat16() if CUDA else g.clone()
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (x.norm() + 1e-7)
    for _ in range(iters):
        m = x @ x.T
        x = a * x + (b * m + c * m @ m) @ x
    return (x.T if tall else x).to(g.dtype)


def muon_optimizer_train(steps):
    """A 12-layer GPT (d 1024, vocab 32,000, context 512, batch 8, bf16 autocast) trained
    with Muon for the blocks' matrices (Nesterov momentum, then five Newton-Schulz
    iterations on each momentum in bf16: temporaries of d x d, 3d x d, 4d x d) and AdamW
    for embeddings, norms, biases and the head."""
    torch.manual_seed(151)
    if CUDA:
        vocab, d, layers, heads, ctx, batch = 32000, 1024, 12, 16, 512, 8
    else:
        vocab, d, layers, heads, ctx, batch = 500, 64, 2, 4, 32, 2
    model = Gpt(vocab, d, layers, heads, ctx).to(DEV)
    matrices = [p for n, p in model.named_parameters() if p.ndim == 2 and "blocks." in n]
    others = [p for n, p in model.named_parameters() if not (p.ndim == 2 and "blocks." in n)]
    adam = torch.optim.AdamW(others, lr=3e-4, weight_decay=0.0)
    momenta = [torch.zeros_like(p) for p in matrices]
    for _ in range(steps):
        idx = torch.randint(0, vocab, (batch, ctx + 1), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), idx[:, 1:].reshape(-1))
        loss.backward()
        adam.step()
        with torch.no_grad():
            for p, buf in zip(matrices, momenta):
                buf.mul_(0.95).add_(p.grad)
                update = _newton_schulz(p.grad.add(buf, alpha=0.95))
                scale = max(1.0, p.shape[0] / p.shape[1]) ** 0.5
                p.add_(update, alpha=-0.02 * scale)
                del update
        model.zero_grad(set_to_none=True)
        del idx, logits, loss


# ----------------------------------------------------------- sharpness-aware minimisation

def _conv_bn(i, o, stride=1):
    return nn.Sequential(nn.Conv2d(i, o, 3, stride, 1, bias=False), nn.BatchNorm2d(o),
                         nn.ReLU(inplace=True))


class WideBlock(nn.Module):
    def __init__(self, i, o, stride):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(i, o, stride),
                                  nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o))
        self.skip = (nn.Identity() if i == o and stride == 1 else
                     nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), nn.BatchNorm2d(o)))

    def forward(self, x):
        return F.relu(self.body(x) + self.skip(x))


def _wide_resnet(width, classes=100):
    chans = [16 * width, 32 * width, 64 * width]
    layers = [_conv_bn(3, 16)]
    i = 16
    for k, c in enumerate(chans):
        for j in range(4):
            layers.append(WideBlock(i, c, 2 if (j == 0 and k > 0) else 1))
            i = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(i, classes)]
    return nn.Sequential(*layers)


def sam_sharpness_train(steps):
    """Sharpness-aware minimisation (SAM, rho 0.05) of a wide ResNet (WRN-26-8 on 32x32
    images, 100 classes, batch 256, bf16 autocast, channels_last): a forward and
    backward, the gradients' global norm, a perturbation e = rho g / |g| per parameter
    added to the weights and kept, a second forward and backward at the perturbed
    weights, the perturbation taken off and SGD with momentum stepping with the second
    gradients."""
    torch.manual_seed(152)
    width, batch, size = (8, 256, 32) if CUDA else (1, 4, 16)
    model = _wide_resnet(width).to(DEV).to(memory_format=torch.channels_last)
    params = [p for p in model.parameters()]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    for _ in range(steps):
        x = torch.randn(batch, 3, size, size, device=DEV).to(memory_format=torch.channels_last)
        y = torch.randint(0, 100, (batch,), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            norm = torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
            perturb = [p.grad * (0.05 / (norm + 1e-12)) for p in params]
            torch._foreach_add_(params, perturb)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(**_amp(torch.bfloat16)):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            torch._foreach_sub_(params, perturb)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, loss, norm, perturb


# ---------------------------------------------------------------- a fixed token budget

def token_budget_batches_train(steps):
    """Language-model training with batches of a fixed token budget, as length-bucketed
    loaders make them: 16,384 tokens a batch as 128 x 128, 64 x 256, 32 x 512, 16 x 1,024
    or 8 x 2,048 (a bucket at random each step), an 8-layer GPT (d 768, vocab 50,304)
    with attention written out (the scores are batch x heads x length^2: eight times
    larger at 2,048 than at 256), fp16 autocast with a gradient scaler, AdamW."""
    torch.manual_seed(153)
    if CUDA:
        vocab, d, layers, heads, budget, lengths = 50304, 768, 8, 12, 16384, (128, 256, 512,
                                                                           1024, 2048)
    else:
        vocab, d, layers, heads, budget, lengths = 300, 32, 2, 4, 64, (8, 16, 32)

    class ExplicitBlock(Block):
        """`Block` with its attention written out (scores, mask, softmax, product)."""

        def attend(self, x, cache=None):
            b, t, dm = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(dm, dim=2)
            shape = (b, t, self.heads, dm // self.heads)
            q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
            scores = q @ k.transpose(-1, -2) / (dm // self.heads) ** 0.5
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            att = scores.masked_fill(mask, float("-inf")).softmax(-1)
            return self.proj((att @ v).transpose(1, 2).reshape(b, t, dm))

    model = Gpt(vocab, d, layers, heads, max(lengths))
    model.blocks = nn.ModuleList(ExplicitBlock(d, heads) for _ in range(layers))
    model = model.to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler(enabled=CUDA)
    gen = _generator(153)
    for _ in range(steps):
        t = _pick(gen, lengths)
        idx = torch.randint(0, vocab, (budget // t, t + 1), device=DEV)
        with torch.autocast(**_amp(torch.float16)):
            logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.view(-1, vocab).float(), idx[:, 1:].reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        del idx, logits, loss


# ------------------------------------------------------------------ a length regulator

class FftBlock(nn.Module):
    """FastSpeech's feed-forward transformer block: self-attention over a padded batch
    (a key padding mask), then two 1-D convolutions."""

    def __init__(self, d, heads, hidden):
        super().__init__()
        self.att = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln1 = nn.LayerNorm(d)
        self.conv1 = nn.Conv1d(d, hidden, 9, padding=4)
        self.conv2 = nn.Conv1d(hidden, d, 1)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x, pad):
        x = self.ln1(x + self.att(x, x, x, key_padding_mask=pad, need_weights=False)[0])
        y = self.conv2(F.relu(self.conv1(x.transpose(1, 2)))).transpose(1, 2)
        return self.ln2(x + y).masked_fill(pad.unsqueeze(-1), 0.0)


def fastspeech_length_regulator_train(steps):
    """Text-to-speech training in the manner of FastSpeech 2: a phoneme encoder (4 FFT
    blocks, d 384) over 20-150 phonemes per utterance (batch 32, padded), a duration
    predictor trained on the log of the target durations (1-12 frames per phoneme), a
    length regulator that repeats each phoneme's state by its target duration
    (repeat_interleave per utterance, then padding to the longest: the decoder's length,
    up to about 1,000 frames, is known only once the durations are summed on the host),
    a 4-block decoder over the frames and an 80-band mel projection, L1 loss; fp16
    autocast with a gradient scaler, Adam."""
    torch.manual_seed(154)
    if CUDA:
        d, heads, hidden, blocks, batch, phonemes, frames = 384, 2, 1536, 4, 32, (20, 150), (1, 12)
    else:
        d, heads, hidden, blocks, batch, phonemes, frames = 32, 2, 64, 1, 3, (4, 9), (1, 3)
    emb = nn.Embedding(80, d).to(DEV)
    encoder = nn.ModuleList(FftBlock(d, heads, hidden) for _ in range(blocks)).to(DEV)
    decoder = nn.ModuleList(FftBlock(d, heads, hidden) for _ in range(blocks)).to(DEV)
    duration = nn.Sequential(nn.Linear(d, 256), nn.ReLU(), nn.Linear(256, 1)).to(DEV)
    mel = nn.Linear(d, 80).to(DEV)
    modules = nn.ModuleList([emb, encoder, decoder, duration, mel])
    opt = torch.optim.Adam(modules.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(enabled=CUDA)
    gen = _generator(154)
    for _ in range(steps):
        lens = [_randint(gen, *phonemes) for _ in range(batch)]
        durs = [torch.randint(frames[0], frames[1] + 1, (n,), generator=gen) for n in lens]
        n_max = max(lens)
        tokens = torch.zeros(batch, n_max, dtype=torch.long)
        for i, n in enumerate(lens):
            tokens[i, :n] = torch.randint(1, 80, (n,), generator=gen)
        tokens = tokens.to(DEV)
        pad = torch.arange(n_max, device=DEV)[None] >= torch.tensor(lens, device=DEV)[:, None]
        target_dur = torch.zeros(batch, n_max)
        for i, dur in enumerate(durs):
            target_dur[i, :len(dur)] = dur.float()
        target_dur = target_dur.to(DEV)
        with torch.autocast(**_amp(torch.float16)):
            h = emb(tokens)
            for blk in encoder:
                h = blk(h, pad)
            log_dur = duration(h).squeeze(-1)
            dur_loss = F.mse_loss(log_dur.float()[~pad], torch.log1p(target_dur[~pad]))
            out_lens = [int(dur.sum()) for dur in durs]
            t_max = max(out_lens)
            frames_h = torch.stack([
                F.pad(h[i, :lens[i]].repeat_interleave(durs[i].to(DEV), dim=0),
                      (0, 0, 0, t_max - out_lens[i]))
                for i in range(batch)])
            frame_pad = (torch.arange(t_max, device=DEV)[None]
                         >= torch.tensor(out_lens, device=DEV)[:, None])
            for blk in decoder:
                frames_h = blk(frames_h, frame_pad)
            pred = mel(frames_h)
        target = torch.randn(batch, t_max, 80, device=DEV)
        mel_loss = (pred.float() - target).abs().masked_fill(frame_pad.unsqueeze(-1), 0).sum()
        loss = mel_loss / (sum(out_lens) * 80) + dur_loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        del tokens, pad, target_dur, h, log_dur, dur_loss, frames_h, frame_pad, pred, target
        del mel_loss, loss


# -------------------------------------------------------------------------- nucleus sampling

def _top_p(logits, p, gen):
    """One token per row by nucleus sampling: the vocabulary sorted, its softmax summed,
    the tail beyond `p` masked, the mask scattered back to vocabulary order."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    drop = cum - sorted_logits.softmax(-1) > p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    kept = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return torch.multinomial(kept.softmax(-1), 1, generator=gen)


def topp_sampling_generate(steps):
    """Text generation by nucleus sampling (top-p 0.9, temperature 0.8): a 12-layer GPT
    (d 1,024, vocab 50,304) in fp16 over 16 prompts of 32-256 tokens (a new length per
    step, padded to the longest), then 96 tokens one at a time with key/value caches
    grown by concatenation; every token the fp32 logits of the whole vocabulary are
    sorted (values and int64 indices), soft-maxed, summed, masked and scattered back."""
    torch.manual_seed(155)
    if CUDA:
        vocab, d, layers, heads, batch, prompts, new = 50304, 1024, 12, 16, 16, (32, 256), 96
    else:
        vocab, d, layers, heads, batch, prompts, new = 300, 32, 2, 4, 2, (4, 8), 4
    model = _half(Gpt(vocab, d, layers, heads, prompts[1] + new)).to(DEV).eval()
    gen = _generator(155)
    dev_gen = torch.Generator(device=DEV).manual_seed(155)
    with torch.inference_mode():
        for _ in range(steps):
            t = _randint(gen, *prompts)
            caches = [dict() for _ in model.blocks]
            prompt = torch.randint(0, vocab, (batch, t), device=DEV)
            logits = model(prompt, caches, 0)[:, -1].float() / 0.8
            tokens = []
            for i in range(new):
                idx = _top_p(logits, 0.9, dev_gen)
                tokens.append(idx)
                logits = model(idx, caches, t + i)[:, -1].float() / 0.8
            torch.cat(tokens, dim=1).cpu()
            del caches, prompt, logits, tokens, idx


# ------------------------------------------------------------------- a vision-language model

class VisionTower(nn.Module):
    """A ViT encoder without a class token: 14-pixel patches of 224-pixel images (256
    tokens an image)."""

    def __init__(self, d, layers, heads, size=224, patch=14):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.pos = nn.Parameter(torch.zeros(1, (size // patch) ** 2, d))
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(
            d, heads, 4 * d, batch_first=True, norm_first=True, activation="gelu")
            for _ in range(layers))

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2) + self.pos
        for layer in self.layers:
            x = layer(x)
        return x


def vlm_image_tokens_train(steps):
    """Training a LLaVA-style vision-language model (the language model and projector;
    the vision tower frozen): each of 8 samples has 0-4 images (224 pixels, 256 tokens
    each) and 64-512 text tokens; the images of the batch go through a ViT (d 768, 8
    layers) under no_grad, a two-layer projector maps them to the language model's width
    (d 1,024), and each sample's input is its images' tokens then its text embeddings,
    concatenated and padded to the longest sample (up to 1,536 positions); a 12-layer
    GPT body (vocab 32,000) with a padding-aware attention mask, loss on text only; bf16
    autocast, AdamW."""
    torch.manual_seed(156)
    if CUDA:
        dv, vl, d, layers, heads, vocab, batch, texts, most, size = (768, 8, 1024, 12, 16,
                                                                    32000, 8, (64, 512), 4, 224)
    else:
        dv, vl, d, layers, heads, vocab, batch, texts, most, size = (32, 1, 32, 2, 4, 300, 2,
                                                                    (4, 8), 2, 28)
    tokens_per_image = (size // 14) ** 2
    vision = VisionTower(dv, vl, 4 if not CUDA else 12, size).to(DEV).eval().requires_grad_(False)
    projector = nn.Sequential(nn.Linear(dv, d), nn.GELU(), nn.Linear(d, d)).to(DEV)
    lm = Gpt(vocab, d, layers, heads, most * tokens_per_image + texts[1]).to(DEV)
    opt = torch.optim.AdamW([*projector.parameters(), *lm.parameters()], lr=2e-5)
    gen = _generator(156)
    for _ in range(steps):
        images = [_randint(gen, 0, most) for _ in range(batch)]
        lengths = [_randint(gen, *texts) for _ in range(batch)]
        total = sum(images)
        with torch.autocast(**_amp(torch.bfloat16)):
            if total:
                pixels = torch.randn(total, 3, size, size, device=DEV)
                with torch.no_grad():
                    feats = vision(pixels)
                img_tokens = projector(feats).split([n for n in images if n], dim=0)
                del pixels, feats
            img_iter = iter(img_tokens) if total else iter(())
            seqs, targets = [], []
            for n, t in zip(images, lengths):
                text = torch.randint(0, vocab, (t + 1,), device=DEV)
                parts = [next(img_iter).reshape(-1, d)] if n else []
                parts.append(lm.tok(text[:-1]))
                seqs.append(torch.cat(parts))
                targets.append(torch.cat([torch.full((n * tokens_per_image,), -100,
                                                     device=DEV), text[1:]]))
            longest = max(s.shape[0] for s in seqs)
            x = torch.stack([F.pad(s, (0, 0, 0, longest - s.shape[0])) for s in seqs])
            y = torch.stack([F.pad(z, (0, longest - z.shape[0]), value=-100) for z in targets])
            x = x + lm.pos(torch.arange(longest, device=DEV))
            valid = torch.tensor([s.shape[0] for s in seqs], device=DEV)
            keep = torch.arange(longest, device=DEV)[None] < valid[:, None]
            # Causal, padding keys masked; every position sees itself (no empty rows).
            mask = ((torch.ones(longest, longest, dtype=torch.bool, device=DEV).tril()[None]
                     & keep[:, None, :])
                    | torch.eye(longest, dtype=torch.bool, device=DEV)[None])[:, None]
            for blk in lm.blocks:
                h = blk.ln1(x)
                q, k, v = blk.qkv(h).split(d, dim=2)
                q, k, v = (z.view(batch, longest, heads, d // heads).transpose(1, 2)
                           for z in (q, k, v))
                att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                x = x + blk.proj(att.transpose(1, 2).reshape(batch, longest, d))
                x = x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x))))
            logits = lm.head(lm.ln(x))
            loss = F.cross_entropy(logits.float().view(-1, vocab), y.view(-1),
                                   ignore_index=-100)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del seqs, targets, x, y, valid, keep, mask, logits, loss, h, q, k, v, att
        if total:
            del img_tokens


# ---------------------------------------------------------------- an energy-based model

def ebm_sgld_train(steps):
    """An energy-based model of 32x32 images (JEM-like) trained by contrastive divergence
    with short-run Langevin sampling: a CNN energy function (widths 128-512, Swish);
    each step takes 128 chains from a 10,000-sample buffer on the GPU (5% restarted from
    noise), runs 20 Langevin steps (the energy's gradient with respect to the input by
    torch.autograd.grad, plus noise), writes the chains back with index_copy_, and trains
    on the energies of a batch of data and of the samples, with an L2 penalty on both;
    Adam."""
    torch.manual_seed(157)
    if CUDA:
        widths, buffer, chains, langevin, size = (128, 256, 512), 10000, 128, 20, 32
    else:
        widths, buffer, chains, langevin, size = (8, 16, 32), 64, 8, 3, 16
    layers, i = [], 3
    for w in widths:
        layers += [nn.Conv2d(i, w, 3, 1, 1), nn.SiLU(), nn.Conv2d(w, w, 3, 2, 1), nn.SiLU()]
        i = w
    energy = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                           nn.Linear(i, 1)).to(DEV)
    opt = torch.optim.Adam(energy.parameters(), lr=1e-4, betas=(0.0, 0.999))
    samples = torch.rand(buffer, 3, size, size, device=DEV) * 2 - 1
    for _ in range(steps):
        idx = torch.randint(0, buffer, (chains,), device=DEV)
        x = samples[idx]
        restart = torch.rand(chains, device=DEV) < 0.05
        x = torch.where(restart[:, None, None, None], torch.rand_like(x) * 2 - 1, x)
        energy.requires_grad_(False)
        for _ in range(langevin):
            x.requires_grad_(True)
            grad = torch.autograd.grad(energy(x).sum(), x)[0]
            x = (x - grad + 0.01 * torch.randn_like(x)).clamp(-1, 1).detach()
            del grad
        energy.requires_grad_(True)
        samples.index_copy_(0, idx, x)
        data = torch.rand(chains, 3, size, size, device=DEV) * 2 - 1
        pos, neg = energy(data), energy(x)
        loss = pos.mean() - neg.mean() + 0.1 * (pos.pow(2).mean() + neg.pow(2).mean())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del idx, x, restart, data, pos, neg, loss


# ---------------------------------------------------------- quantisation-aware training

def qat_fake_quant_train(steps):
    """Quantisation-aware training as PyTorch documents it: torchvision's quantisable
    ResNet-18 (100 classes), its modules fused for QAT, prepared with the default
    fbgemm QAT configuration (per-channel fake-quantised weights, fake-quantised
    activations with moving-average observers), batch 128 at 160x160, SGD; the
    observers are frozen after half the steps and the batch norms' statistics after
    three quarters, as the tutorial does."""
    torch.manual_seed(158)
    import torchvision
    batch, size = (128, 160) if CUDA else (2, 32)
    model = torchvision.models.quantization.resnet18(weights=None, quantize=False,
                                                     num_classes=100)
    model.train()
    model.fuse_model(is_qat=True)
    model.qconfig = torch.ao.quantization.get_default_qat_qconfig("fbgemm")
    torch.ao.quantization.prepare_qat(model, inplace=True)
    model = model.to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    for s in range(steps):
        if s == steps // 2:
            model.apply(torch.ao.quantization.disable_observer)
        if s == 3 * steps // 4:
            model.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)
        x = torch.randn(batch, 3, size, size, device=DEV)
        y = torch.randint(0, 100, (batch,), device=DEV)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del x, y, loss


WORKLOADS = {
    "muon_optimizer_train": (muon_optimizer_train, 12),
    "sam_sharpness_train": (sam_sharpness_train, 12),
    "token_budget_batches_train": (token_budget_batches_train, 20),
    "fastspeech_length_regulator_train": (fastspeech_length_regulator_train, 20),
    "topp_sampling_generate": (topp_sampling_generate, 4),
    "vlm_image_tokens_train": (vlm_image_tokens_train, 16),
    "ebm_sgld_train": (ebm_sgld_train, 12),
    "qat_fake_quant_train": (qat_fake_quant_train, 16),
}
