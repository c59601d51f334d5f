"""The seventeenth corpus: eight workloads written on 2026-11-26 (twelfth session on the
allocator), held out from every change to the allocator until recorded. Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and
data are smaller.

Each holds memory in a way the first sixteen corpora do not: an encoder-decoder trained
with Adafactor (factored second moments: a row and a column vector per matrix, not a
full copy); early-exit inference whose batch shrinks layer by layer as samples leave;
torchvision's RAFT optical flow (an all-pairs correlation volume and its pyramid, twelve
recurrent refinements each kept for the sequence loss); CTC speech recognition over
padded batches of 2-16 s; contrastive decoding (a large and a small model generating
together, each with its own cache); a hypernetwork that writes every sample's
convolution weights (grouped convolutions over the batch); continual learning with EWC
(a Fisher diagonal from per-sample gradients after each task, kept for every task
since); and 8-bit Adam written out in PyTorch (block-wise quantised moments, dequantised
to float32 one parameter at a time).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Gpt
# The thirteenth corpus's helpers: autocast settings, seeded generators.
from workloads_thirteenth import CUDA, _amp, _generator
# The fourteenth corpus's helper: an integer in a closed range.
from workloads_fourteenth import _randint


# ------------------------------------------------------------------ Adafactor, seq2seq

def adafactor_seq2seq_train(steps):
    """An encoder-decoder transformer (`nn.Transformer`, d 768, 6 + 6 layers, 12 heads,
    feed-forward 3,072, vocab 32,128 shared by both sides and the untied head) trained
    as T5 was, with `torch.optim.Adafactor` (factored second moments, no first moment):
    batches of 16 with sources of 64-512 and targets of 16-128 tokens, new lengths every
    step, bf16 autocast, padding masks."""
    torch.manual_seed(171)
    if CUDA:
        vocab, d, layers, heads, ff, batch, src, tgt = 32128, 768, 6, 12, 3072, 16, (64, 512), (16, 128)
    else:
        vocab, d, layers, heads, ff, batch, src, tgt = 300, 32, 2, 4, 64, 2, (6, 12), (3, 6)
    emb = nn.Embedding(vocab, d).to(DEV)
    core = nn.Transformer(d, heads, layers, layers, ff, dropout=0.1, batch_first=True).to(DEV)
    head = nn.Linear(d, vocab, bias=False).to(DEV)
    params = [*emb.parameters(), *core.parameters(), *head.parameters()]
    opt = torch.optim.Adafactor(params, lr=1e-2)
    gen = _generator(171)
    for _ in range(steps):
        s, t = _randint(gen, *src), _randint(gen, *tgt)
        x = torch.randint(1, vocab, (batch, s), device=DEV)
        y = torch.randint(1, vocab, (batch, t + 1), device=DEV)
        s_len = torch.randint(s // 2, s + 1, (batch,), device=DEV)
        src_pad = torch.arange(s, device=DEV)[None] >= s_len[:, None]
        causal = nn.Transformer.generate_square_subsequent_mask(t, device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            h = core(emb(x), emb(y[:, :-1]), tgt_mask=causal, src_key_padding_mask=src_pad,
                     memory_key_padding_mask=src_pad)
            logits = head(h)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), y[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, src_pad, causal, h, logits, loss


# ------------------------------------------------------------- early exits, shrinking batch

def early_exit_infer(steps):
    """Early-exit inference with a 12-layer encoder (d 768, 12 heads, fp16): batches of 64
    sequences of 128-384 tokens; after each layer from the third, a classifier looks at
    every sequence still running and those it is sure of (top probability over a
    threshold that loosens with depth) leave, so each layer runs on fewer sequences
    (`index_select` into a new, smaller batch)."""
    torch.manual_seed(172)
    if CUDA:
        d, layers, heads, batch, lens, classes = 768, 12, 12, 64, (128, 384), 32
    else:
        d, layers, heads, batch, lens, classes = 32, 4, 4, 4, (6, 12), 4
    enc = nn.ModuleList(nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True)
                        for _ in range(layers)).to(DEV).eval()
    exits = nn.ModuleList(nn.Linear(d, classes) for _ in range(layers)).to(DEV).eval()
    emb = nn.Embedding(30522, d).to(DEV).eval()
    if CUDA:
        enc, exits, emb = enc.half(), exits.half(), emb.half()
    gen = _generator(172)
    for _ in range(steps):
        t = _randint(gen, *lens)
        with torch.no_grad():
            x = emb(torch.randint(0, 30522, (batch, t), device=DEV))
            alive = torch.arange(batch, device=DEV)
            answer = torch.full((batch,), -1, dtype=torch.long, device=DEV)
            for i, layer in enumerate(enc):
                x = layer(x)
                if i < 2:
                    continue
                probs = exits[i](x[:, 0]).float().softmax(-1)
                conf, cls = probs.max(-1)
                done = conf > 0.9 - 0.06 * i if i < layers - 1 else torch.ones_like(conf, dtype=torch.bool)
                answer[alive[done]] = cls[done]
                keep = (~done).nonzero().squeeze(1)
                if keep.numel() == 0:
                    break
                x, alive = x.index_select(0, keep), alive.index_select(0, keep)
                del probs, conf, cls, done, keep
            del x, alive, answer


# ------------------------------------------------------------------------------- RAFT

def raft_flow_train(steps):
    """torchvision's RAFT (small, random weights) trained on pairs of frames as its
    recipes do: batches of 6 crops of 368 x 496 or 400 x 720 (drawn each step), twelve
    refinement iterations whose every flow the sequence loss weighs (so all twelve
    iterations' activations stay until backward), an all-pairs correlation volume of
    (h/8 * w/8)^2 with its four-level pyramid, AdamW and gradient clipping."""
    torch.manual_seed(173)
    from torchvision.models.optical_flow import raft_small
    if CUDA:
        sizes, batch, iters = ((368, 496), (400, 720)), 6, 12
    else:
        sizes, batch, iters = ((128, 128), (128, 160)), 1, 2
    model = raft_small(weights=None).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=1e-4)
    gen = _generator(173)
    for _ in range(steps):
        h, w = sizes[_randint(gen, 0, len(sizes) - 1)]
        a = torch.rand(batch, 3, h, w, generator=gen).to(DEV) * 2 - 1
        b = torch.rand(batch, 3, h, w, generator=gen).to(DEV) * 2 - 1
        target = torch.randn(batch, 2, h, w, generator=gen).to(DEV)
        flows = model(a, b, num_flow_updates=iters)
        loss = sum(0.8 ** (len(flows) - 1 - i) * (f - target).abs().mean()
                   for i, f in enumerate(flows))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        del a, b, target, flows, loss


# -------------------------------------------------------------------------------- CTC

def ctc_speech_train(steps):
    """CTC speech recognition: 80-dim filterbank frames of 2-16 s (200-1,600 frames, 16
    clips a batch padded to the longest), two stride-2 convolutions, a 12-layer encoder
    (d 512, 8 heads, key padding masks), a 1,024-token vocabulary with blank, CTC loss
    over transcripts of 10-150 tokens; fp16 autocast with a gradient scaler; AdamW."""
    torch.manual_seed(174)
    if CUDA:
        d, layers, heads, batch, frames, vocab, tokens = 512, 12, 8, 16, (200, 1600), 1024, (10, 150)
    else:
        d, layers, heads, batch, frames, vocab, tokens = 32, 2, 4, 2, (40, 80), 20, (2, 6)
    sub = nn.Sequential(nn.Conv1d(80, d, 3, stride=2, padding=1), nn.GELU(),
                        nn.Conv1d(d, d, 3, stride=2, padding=1), nn.GELU()).to(DEV)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True,
                                                           norm_first=True), layers,
                                enable_nested_tensor=False).to(DEV)
    out = nn.Linear(d, vocab).to(DEV)
    params = [*sub.parameters(), *enc.parameters(), *out.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    scaler = torch.amp.GradScaler(enabled=CUDA)
    gen = _generator(174)
    for _ in range(steps):
        lens = torch.randint(frames[0], frames[1] + 1, (batch,), generator=gen)
        t = int(lens.max())
        feats = torch.randn(batch, 80, t, generator=gen).to(DEV)
        out_lens = ((lens + 1) // 2 + 1) // 2
        tgt_lens = torch.minimum(torch.randint(tokens[0], tokens[1] + 1, (batch,), generator=gen),
                                 out_lens - 1)
        targets = torch.randint(1, vocab, (int(tgt_lens.sum()),), generator=gen).to(DEV)
        with torch.autocast(**_amp(torch.float16)):
            x = sub(feats).transpose(1, 2)
            pad = torch.arange(x.shape[1], device=DEV)[None] >= out_lens.to(DEV)[:, None]
            logp = out(enc(x, src_key_padding_mask=pad)).float().log_softmax(-1)
        loss = F.ctc_loss(logp.transpose(0, 1), targets, out_lens, tgt_lens, zero_infinity=True)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        del feats, targets, x, pad, logp, loss


# ---------------------------------------------------------------- contrastive decoding

def contrastive_decoding_generate(steps):
    """Contrastive decoding: a 24-layer expert (d 1,024) and a 4-layer amateur (d 512)
    generate together in fp16, each with its own key/value caches grown by
    concatenation; each token takes the expert's log-probabilities minus the amateur's
    over the tokens the expert finds plausible. Batches of 8 prompts of 64-256 tokens,
    64-192 new tokens, new lengths every step."""
    torch.manual_seed(175)
    if CUDA:
        vocab, big, small, plen, new, batch = 32000, (1024, 24, 16), (512, 4, 8), (64, 256), (64, 192), 8
    else:
        vocab, big, small, plen, new, batch = 300, (32, 2, 4), (16, 1, 2), (4, 8), (3, 6), 2
    ctx = plen[1] + new[1]
    expert = Gpt(vocab, *big, ctx).to(DEV).eval()
    amateur = Gpt(vocab, *small, ctx).to(DEV).eval()
    if CUDA:
        expert, amateur = expert.half(), amateur.half()
    gen = _generator(175)
    for _ in range(steps):
        t0, n = _randint(gen, *plen), _randint(gen, *new)
        prompt = torch.randint(0, vocab, (batch, t0), device=DEV)
        with torch.no_grad():
            ce, ca = [dict() for _ in expert.blocks], [dict() for _ in amateur.blocks]
            le = expert(prompt, ce, 0)[:, -1].float()
            la = amateur(prompt, ca, 0)[:, -1].float()
            out = [prompt]
            for i in range(n):
                pe, pa = le.log_softmax(-1), la.log_softmax(-1)
                plausible = pe >= pe.max(-1, keepdim=True).values + torch.log(torch.tensor(0.1))
                score = torch.where(plausible, pe - pa, torch.full_like(pe, -float("inf")))
                tok = score.argmax(-1, keepdim=True)
                out.append(tok)
                le = expert(tok, ce, t0 + i)[:, -1].float()
                la = amateur(tok, ca, t0 + i)[:, -1].float()
                del pe, pa, plausible, score
            seq = torch.cat(out, 1)
            del ce, ca, le, la, out, seq, prompt


# -------------------------------------------------------------------------- hypernetwork

def hypernet_conv_train(steps):
    """A hypernetwork writes every sample's convolution weights: an MLP maps a per-sample
    code (64) to the weights of three 3x3 convolutions of 64 channels (110,592 numbers a
    sample), applied to the batch at once as grouped convolutions (the batch folded
    into channels, one group a sample); batches of 32 images of 64-128 pixels (a new
    size every step); AdamW."""
    torch.manual_seed(176)
    if CUDA:
        c, code, hidden, batch, sizes = 64, 64, 512, 32, (64, 128)
    else:
        c, code, hidden, batch, sizes = 8, 8, 16, 2, (8, 16)
    per_layer = c * c * 9
    hyper = nn.Sequential(nn.Linear(code, hidden), nn.ReLU(),
                          nn.Linear(hidden, 3 * per_layer)).to(DEV)
    stem = nn.Conv2d(3, c, 3, padding=1).to(DEV)
    head = nn.Linear(c, 10).to(DEV)
    codes = nn.Embedding(1000, code).to(DEV)
    params = [*hyper.parameters(), *stem.parameters(), *head.parameters(), *codes.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    gen = _generator(176)
    for _ in range(steps):
        s = _randint(gen, *sizes)
        images = torch.randn(batch, 3, s, s, generator=gen).to(DEV)
        ids = torch.randint(0, 1000, (batch,), generator=gen).to(DEV)
        labels = torch.randint(0, 10, (batch,), generator=gen).to(DEV)
        weights = hyper(codes(ids)).view(batch, 3, c, c, 3, 3) * 0.05
        x = F.relu(stem(images))
        for k in range(3):
            w = weights[:, k].reshape(batch * c, c, 3, 3)
            y = F.conv2d(x.reshape(1, batch * c, s, s), w, padding=1, groups=batch)
            x = F.relu(y.view(batch, c, s, s)) + x
        loss = F.cross_entropy(head(x.mean((2, 3))), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del images, ids, labels, weights, x, y, loss


# -------------------------------------------------------------------------------- EWC

def ewc_continual_train(steps):
    """Continual learning with elastic weight consolidation: torchvision's ResNet-18
    (random weights, 100 classes) learns a new task every 4 steps (batches of 64 at
    224 pixels); at the end of each task, a diagonal Fisher from 32 per-sample gradients
    (one backward each) and a copy of the weights are kept for that task, and every later
    step adds each kept task's penalty to the loss. SGD with momentum."""
    torch.manual_seed(177)
    from torchvision.models import resnet18
    if CUDA:
        batch, size, per_task, fisher_n = 64, 224, 4, 32
    else:
        batch, size, per_task, fisher_n = 2, 32, 2, 2
    model = resnet18(num_classes=100).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = _generator(177)
    kept = []  # (fisher, anchor) per finished task
    for step in range(steps):
        images = torch.randn(batch, 3, size, size, generator=gen).to(DEV)
        labels = torch.randint(0, 100, (batch,), generator=gen).to(DEV)
        loss = F.cross_entropy(model(images), labels)
        for fisher, anchor in kept:
            loss = loss + 50.0 * sum((f * (p - a) ** 2).sum()
                                     for f, p, a in zip(fisher, model.parameters(), anchor))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del images, labels, loss
        if (step + 1) % per_task == 0:
            fisher = [torch.zeros_like(p) for p in model.parameters()]
            model.eval()
            for _ in range(fisher_n):
                x = torch.randn(1, 3, size, size, generator=gen).to(DEV)
                y = torch.randint(0, 100, (1,), generator=gen).to(DEV)
                model.zero_grad(set_to_none=True)
                F.cross_entropy(model(x), y).backward()
                for f, p in zip(fisher, model.parameters()):
                    f.add_(p.grad.detach() ** 2, alpha=1.0 / fisher_n)
            model.train()
            model.zero_grad(set_to_none=True)
            kept.append((fisher, [p.detach().clone() for p in model.parameters()]))


# ------------------------------------------------------------------------ 8-bit Adam

def _quantise(x, block):
    """Block-wise absmax quantisation of float32 `x` to int8 (padded to whole blocks)."""
    flat = x.reshape(-1)
    pad = (-flat.numel()) % block
    if pad:
        flat = F.pad(flat, (0, pad))
    blocks = flat.view(-1, block)
    scale = blocks.abs().amax(1, keepdim=True).clamp_min(1e-12)
    return (blocks / scale * 127).round().to(torch.int8), scale


def _dequantise(q, scale, like):
    return (q.float() * (scale / 127)).reshape(-1)[:like.numel()].view_as(like)


def adam8bit_gpt_train(steps):
    """A 12-layer GPT (d 768, vocab 32,000) trained with 8-bit Adam written out in
    PyTorch: both moments kept as int8 in blocks of 2,048 with a float32 scale a block;
    each step, parameter by parameter, the moments are dequantised to float32, updated,
    used and quantised again (float32 temporaries the size of each parameter, one after
    another). Batches of 8 x 1,024 tokens, bf16 autocast."""
    torch.manual_seed(178)
    if CUDA:
        vocab, d, layers, heads, batch, ctx = 32000, 768, 12, 12, 8, 1024
    else:
        vocab, d, layers, heads, batch, ctx = 300, 32, 2, 4, 2, 16
    model = Gpt(vocab, d, layers, heads, ctx).to(DEV)
    params = list(model.parameters())
    block, lr, b1, b2, eps = 2048, 3e-4, 0.9, 0.999, 1e-8
    state = [(_quantise(torch.zeros_like(p), block), _quantise(torch.zeros_like(p), block))
             for p in params]
    for step in range(1, steps + 1):
        idx = torch.randint(0, vocab, (batch, ctx + 1), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), idx[:, 1:].reshape(-1))
        loss.backward()
        with torch.no_grad():
            for i, p in enumerate(params):
                (qm, sm), (qv, sv) = state[i]
                m = _dequantise(qm, sm, p).mul_(b1).add_(p.grad, alpha=1 - b1)
                v = _dequantise(qv, sv, p).mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                denom = (v / (1 - b2 ** step)).sqrt_().add_(eps)
                p.addcdiv_(m, denom, value=-lr / (1 - b1 ** step))
                state[i] = (_quantise(m, block), _quantise(v, block))
                del m, v, denom, qm, sm, qv, sv
                p.grad = None
        del idx, logits, loss


WORKLOADS = {
    "adafactor_seq2seq_train": (adafactor_seq2seq_train, 10),
    "early_exit_infer": (early_exit_infer, 16),
    "raft_flow_train": (raft_flow_train, 8),
    "ctc_speech_train": (ctc_speech_train, 12),
    "contrastive_decoding_generate": (contrastive_decoding_generate, 3),
    "hypernet_conv_train": (hypernet_conv_train, 16),
    "ewc_continual_train": (ewc_continual_train, 12),
    "adam8bit_gpt_train": (adam8bit_gpt_train, 6),
}
