"""The twenty-seventh corpus: eight workloads written on 2026-11-27, held out from every
change to the allocator until recorded. Same conventions as workloads.py: `run(steps)`
builds its models and data on DEV and runs `steps` steps; random weights; seeded. On the
CPU (RECORD_DEVICE=cpu) the models and data are smaller and the streams are left out.

Each holds memory in a way the first twenty-six corpora do not: Reformer (LSH attention over
16k-64k tokens: hashes by random rotations, one sort over every hash round, chunks gathered
with the chunk before, outputs scattered back and the rounds combined by their logsumexps;
reversible layers, so only one layer's graph at a time); kNN-LM (a 16 GiB datastore of the
LM's own hidden states built in place, then every generated token searched against all of it
in chunks, the neighbours' distribution scattered over the vocabulary and mixed with the
LM's); RetNet (chunkwise-parallel retention in training, a state per chunk, and generation in
the same process from a fixed-size recurrent state per layer, no cache); a training loop with
the logging leaks people write (a metric computed from the logits kept with its graph every
step, an evaluation run without no_grad whose graphs live until the next log line, all dropped
at once); LLaDA-style masked-diffusion sampling (the whole sequence re-predicted every step,
float64 Gumbel noise, confidence-ranked commits, guidance by a doubled batch); EnCodec (weight-
normalised convolutions, residual vector quantisation at a bandwidth drawn per batch, five
STFT discriminators, audio crops of new lengths from pinned memory on a loader stream); a
Universal Transformer with adaptive computation time (one shared block applied until every
token halts: a depth known only on the host, bookkeeping tensors per hop); MuZero with
reanalysis (windows of frames from a host replay buffer on a loader stream, a target network
re-evaluating eleven offsets with a one-step expansion of every action, a five-step unroll).

Above each workload, a comment estimates its peak on the GPU (from the sizes; PyTorch's
allocated bytes) and its time on an H100.
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block, Gpt
# Earlier corpora's helpers: autocast, generators, choices, streams and hand-over (thirteenth);
# an integer in a closed range, fp16 on the GPU (fourteenth); Llama blocks, RMSNorm, rotary
# embeddings (sixteenth); a step, Reformer's reversible coupling and stack (twenty-first);
# rotary angles (twenty-sixth).
from workloads_thirteenth import CUDA, _amp, _generator, _hand_over, _on, _pick, _stream
from workloads_fourteenth import _half, _randint
from workloads_sixteenth import LlamaBlock, RmsNorm, _rope
from workloads_twentyfirst import _RevBlock, _RevStack, _update
from workloads_twentysixth import _angles


def _soft_ce(logits, target):
    """Cross-entropy against a distribution, per row."""
    return -(target * logits.float().log_softmax(-1)).sum(-1)


# ------------------------------------------------------------ Reformer, LSH attention

class _LshBlock(_RevBlock):
    """A Reformer layer on the two halves of the width (the twenty-first corpus's coupling):
    LSH attention with shared queries and keys (angular hashing by random rotations, factorised
    into two rotations, `hashes` rounds sorted at once; chunks attend to themselves and the
    chunk before, causally, never to their own position unless alone) and a feed-forward layer
    run over the sequence in chunks. `rot` is drawn each step and kept for the reverse pass."""

    def __init__(self, d, heads, hashes, chunk, ff_chunks):
        super().__init__(d, heads)
        self.qkv = nn.Linear(d, 2 * d)  # shared query-key, value
        self.hashes, self.chunk, self.ff_chunks, self.rot = hashes, chunk, ff_chunks, None

    def mlp(self, x):
        return torch.cat([self.fc2(F.gelu(self.fc1(self.ln2(c))))
                          for c in x.chunk(self.ff_chunks, 1)], 1)

    def attend(self, x):
        b, t, d = x.shape
        h, c, n = self.heads, self.chunk, self.hashes
        hd, bh = d // h, b * h
        qk, v = (z.reshape(b, t, h, hd).transpose(1, 2).reshape(bh, t, hd)
                 for z in self.qkv(self.ln1(x)).split(d, -1))
        with torch.no_grad():
            unit, codes, width = F.normalize(qk.float(), dim=-1), [], 1
            for r in self.rot:  # r (head_dim, hashes, f / 2): buckets f1 x f2
                z = torch.einsum("btd,dnr->bntr", unit, r)
                codes.append(width * torch.cat([z, -z], -1).argmax(-1))
                width *= 2 * r.shape[-1]
            buckets = sum(codes) + width * torch.arange(n, device=x.device)[:, None]
            order = (buckets * t + torch.arange(t, device=x.device)).flatten(1).argsort(-1)
            undo, st = order.argsort(-1), order % t  # (bh, hashes * t)
            del unit, codes, buckets, order
        sq = qk.gather(1, st[..., None].expand(-1, -1, hd)).view(bh, -1, c, hd)
        sv = v.gather(1, st[..., None].expand(-1, -1, hd)).view(bh, -1, c, hd)
        sp = st.view(bh, -1, c)

        def back(z):  # each chunk with the one before it
            return torch.cat([z, z.roll(1, 1)], 2)

        sk, sv, kp = back(F.normalize(sq, dim=-1)), back(sv), back(sp)
        dots = sq @ sk.mT * hd ** -0.5  # (bh, chunks, c, 2c)
        dots = dots.masked_fill(sp[..., None] < kp[..., None, :], -1e9)
        dots = dots.masked_fill(sp[..., None] == kp[..., None, :], -1e4)
        lse = dots.float().logsumexp(-1, keepdim=True)
        out = ((dots - lse).exp().to(sv.dtype) @ sv).flatten(1, 2)
        out = out.gather(1, undo[..., None].expand(-1, -1, hd)).view(bh, n, t, hd)
        w = lse.flatten(1).gather(1, undo).view(bh, n, t, 1).softmax(1)
        y = (out * w.to(out.dtype)).sum(1)
        return self.proj(y.view(b, h, t, hd).transpose(1, 2).reshape(b, t, d))


# GPU peak about 10 GiB, at 1 x 65,536 tokens: the stack keeps only its output (256 MiB fp32)
# and the axial positions; the reverse pass of one layer rebuilds its attention graph: the
# sorted queries, keys (normalised, with the chunk before: fp32, 1 GiB) and values of 4 rounds
# x 8 heads x 65,536, chunk scores 8 x 4,096 x 64 x 128 (268M entries: bf16 scores, two masks,
# two masked copies, the fp32 scores kept by logsumexp, the shifted scores and their
# exponentials, 5-6 GiB) and their gradients beside them. Time: the 35M-parameter stack is
# cheap (some 15 TFLOP a step); the sorts, gathers and the score tensors' elementwise passes,
# forward and reverse, some 0.3-0.6 s a step: 40 steps, some 15-25 s.
def reformer_lsh_attention_train(steps):
    """Reformer (Kitaev et al. 2020) on bytes (vocab 256): 12 reversible layers over two
    streams of d 512, 8 heads; LSH attention with 4 hash rounds and chunks of 64 (as many
    buckets as chunks, hashed by two rotations of their square root); the feed-forward layer
    in 16 chunks of the sequence; axial position embeddings. 65,536 tokens a step as 4 x
    16,384, 2 x 32,768 or 1 x 65,536 (a shape drawn each step, new rotations each step).
    bf16 autocast, AdamW."""
    torch.manual_seed(271)
    vocab, d, layers, heads, hashes, chunk, ff_chunks, axial, shapes = (
        (256, 512, 12, 8, 4, 64, 16, (256, 256), ((4, 16384), (2, 32768), (1, 65536))) if CUDA
        else (64, 16, 2, 2, 2, 4, 2, (8, 8), ((2, 32), (1, 64))))
    with torch.device(DEV):
        model = nn.ModuleDict(dict(
            emb=nn.Embedding(vocab, 2 * d), ln=nn.LayerNorm(2 * d),
            blocks=nn.ModuleList(_LshBlock(d, heads, hashes, chunk, ff_chunks)
                                 for _ in range(layers)),
            head=nn.Linear(2 * d, vocab, bias=False)))
        model.axial = nn.ParameterList([nn.Parameter(0.02 * torch.randn(axial[0], 1, 2 * d)),
                                        nn.Parameter(0.02 * torch.randn(1, axial[1], 2 * d))])
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
    gen, amp, hd = _generator(271), _amp(torch.bfloat16), d // heads
    for _ in range(steps):
        b, t = _pick(gen, shapes)
        nb = t // chunk
        f1 = 2 ** (nb.bit_length() // 2)
        for blk in model["blocks"]:
            blk.rot = [torch.randn(hd, hashes, f // 2, device=DEV) for f in (f1, nb // f1)]
        ids = torch.randint(0, vocab, (b, t + 1), device=DEV)
        with torch.autocast(**amp):
            pos = (model.axial[0] + model.axial[1]).view(-1, 2 * d)[:t]
            h = _RevStack.apply(model["emb"](ids[:, :-1]) + pos, model["blocks"])
            logits = model["head"](model["ln"](h))
        _update(opt, F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()))
        del ids, pos, h, logits


# ------------------------------------------------------------- kNN-LM, a GPU datastore

def _hidden(lm, ids, caches=None, start=0):
    """The final normalised hidden states of the Gpt `lm` (kNN-LM's keys)."""
    x = lm.tok(ids) + lm.pos(torch.arange(start, start + ids.shape[1], device=ids.device))
    for i, blk in enumerate(lm.blocks):
        x = blk(x, None if caches is None else caches[i])
    return lm.ln(x)


# GPU peak about 17 GiB: the datastore's keys 8,388,608 x 1,024 fp16 (16 GiB), their squared
# norms and next tokens (64 MiB), the LM 0.4 GiB; while building, 16 x 1,024 tokens of
# activations (under 0.5 GiB); while decoding, caches of up to 16 x 704 tokens (0.5 GiB) and a
# chunk's distances 16 x 1M fp16 and fp32 (96 MiB) with its top 1,024. Time: the build runs
# 8.4M tokens through the 217M-parameter LM (about 3.6 PFLOP, 10-12 s); each decoded token
# reads the 16 GiB of keys (5-7 ms) and takes 8 top-k of 1,024: some 130 tokens a request,
# about 1.2 s; 8 requests, some 25 s in all.
def knn_lm_datastore_decode(steps):
    """kNN-LM (Khandelwal et al. 2020): a 12-layer GPT (d 1,024, 16 heads, vocab 32,000, fp16,
    inference mode) first builds its datastore on the GPU, running 8M tokens of a corpus in
    contexts of 1,024 and writing every position's final hidden state (the key) and next
    token (the value) into preallocated buffers; then each step serves a batch of 4-16 prompts
    of 128-512 tokens, 64-192 tokens decoded with a key/value cache: every token's hidden
    state is searched against all 8M keys by L2 distance in chunks of 1M (a chunk's top 1,024
    merged with the running ones), the neighbours' softmax(-distance / 10) scattered onto
    their tokens and interpolated with the LM's distribution (lambda 0.25), greedy."""
    torch.manual_seed(272)
    vocab, d, layers, heads, ctx, n, rows, part, k, batches, prompts, news = (
        (32000, 1024, 12, 16, 1024, 1 << 23, 16, 1 << 20, 1024, (4, 16), (128, 512), (64, 192))
        if CUDA else (100, 32, 2, 4, 64, 4096, 4, 1024, 16, (1, 3), (4, 16), (2, 4)))
    with torch.device(DEV):
        lm = _half(Gpt(vocab, d, layers, heads, ctx)).eval().requires_grad_(False)
    gen, lam, temp = _generator(272), 0.25, 10.0
    with torch.inference_mode():
        keys = torch.empty(n, d, dtype=lm.tok.weight.dtype, device=DEV)
        norms, vals = torch.empty(n, device=DEV), torch.empty(n, dtype=torch.int32, device=DEV)
        for s in range(0, n, rows * ctx):
            ids = torch.randint(0, vocab, (rows, ctx + 1), device=DEV)
            h = _hidden(lm, ids[:, :-1]).flatten(0, 1)
            keys[s:s + len(h)] = h
            norms[s:s + len(h)] = h.float().pow(2).sum(1)
            vals[s:s + len(h)] = ids[:, 1:].flatten()
            del ids, h
        for _ in range(steps):
            b, t, new = _randint(gen, *batches), _randint(gen, *prompts), _randint(gen, *news)
            caches, start, out = [{} for _ in lm.blocks], 0, []
            tok = torch.randint(0, vocab, (b, t), device=DEV)
            for _ in range(new):
                q = _hidden(lm, tok, caches, start)[:, -1]
                start += tok.shape[1]
                p_lm = lm.head(q).float().softmax(-1)
                best_d = torch.full((b, k), math.inf, device=DEV)
                best_i = torch.zeros(b, k, dtype=torch.long, device=DEV)
                for s in range(0, n, part):
                    dist = norms[s:s + part] - 2 * (q @ keys[s:s + part].mT).float()
                    dd, ii = dist.topk(k, 1, largest=False)
                    dd, ii = torch.cat([best_d, dd], 1), torch.cat([best_i, ii + s], 1)
                    best_d, sel = dd.topk(k, 1, largest=False)
                    best_i = ii.gather(1, sel)
                    del dist, dd, ii, sel
                w = (-(best_d + q.float().pow(2).sum(1, keepdim=True)) / temp).softmax(-1)
                p_knn = torch.zeros(b, vocab, device=DEV).scatter_add_(1, vals[best_i].long(), w)
                tok = (lam * p_knn + (1 - lam) * p_lm).argmax(-1, keepdim=True)
                out.append(tok)
            torch.cat(out, 1).cpu()
            del caches, tok, out, q, p_lm, p_knn, best_d, best_i, w


# --------------------------------------------- RetNet, chunkwise training, recurrent decoding

class _Retention(nn.Module):
    """Multi-scale retention (Sun et al. 2023): a decay per head, rotary queries and keys,
    values twice the width, a per-head LayerNorm and a swish gate. Chunkwise over a sequence
    (the state entering each chunk kept), or one recurrent step from a state."""

    def __init__(self, d, heads, chunk):
        super().__init__()
        self.h, self.dk, self.dv, self.chunk = heads, d // heads, 2 * d // heads, chunk
        self.q, self.k = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.v, self.g = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.o = nn.Linear(2 * d, d, bias=False)
        gamma = 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float))
        self.register_buffer("lg", gamma.log().view(heads, 1, 1))

    def chunkwise(self, q, k, v, state):
        b, h, t, _ = q.shape
        c, lg = self.chunk, self.lg
        i = torch.arange(c, device=q.device, dtype=torch.float)
        decay = (lg * (i[:, None] - i)).exp().masked_fill(i[:, None] < i, 0)  # (h, c, c)
        qc, kc, vc = (z.reshape(b, h, t // c, c, -1) for z in (q, k, v))
        inner = (qc @ kc.mT * decay[:, None]) @ vc
        kv = kc.mT @ (vc * (lg * (c - 1 - i)).exp()[..., None])  # each chunk's own state
        s = torch.zeros(b, h, self.dk, self.dv, device=q.device) if state is None else state
        states = []
        for j in range(t // c):
            states.append(s)
            s = s * (lg * c).exp() + kv[:, :, j]
        cross = qc @ torch.stack(states, 2) * (lg * (i + 1)).exp()[..., None]
        return (inner + cross).reshape(b, h, t, -1), s

    def forward(self, x, cos, sin, state=None):
        b, t, _ = x.shape
        q = _rope(self.q(x).view(b, t, self.h, self.dk).transpose(1, 2), cos, sin)
        k = _rope(self.k(x).view(b, t, self.h, self.dk).transpose(1, 2), cos, sin)
        k = k * self.dk ** -0.5
        v = self.v(x).view(b, t, self.h, self.dv).transpose(1, 2)
        if t == 1 and state is not None:  # recurrent: the state replaced, nothing grows
            state = state * self.lg.exp() + k.mT @ v
            y = q @ state
        else:
            y, state = self.chunkwise(q, k, v, state)
        y = F.layer_norm(y.float(), (self.dv,)).transpose(1, 2).reshape(b, t, -1)
        return self.o(F.silu(self.g(x)) * y), state


class _RetNetBlock(nn.Module):
    def __init__(self, d, heads, hidden, chunk):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ret = _Retention(d, heads, chunk)
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x, cos, sin, state=None):
        y, state = self.ret(self.ln1(x), cos, sin, state)
        x = x + y
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)))), state


# GPU peak about 22 GiB: 216M parameters with gradients and AdamW 3.5 GiB; at 16,384 tokens a
# layer keeps about 1.3 GiB (projections, fp32 rotary queries and keys, chunk scores and their
# decayed copies, 32 chunk states of 256 x 512 per head, fp32 retention outputs and their
# LayerNorm, the gate, the MLP), 12 layers 15-16 GiB; the fp32 logits 2 GiB with their
# gradient. Generation: states of 32 x 4 x 256 x 512 fp32 (64 MiB) a layer, replaced every
# token. Time: about 21 TFLOP a training step (0.1-0.15 s); every fourth step a prefill and
# 128-256 tokens decoded by 12 x 25 small kernels (0.5-0.8 s): 48 steps, some 15 s.
def retnet_chunkwise_recurrent_train(steps):
    """RetNet (Sun et al. 2023): 12 layers of d 1,024 (4 retention heads, decays 1 - 2^(-5-h),
    values 2,048 wide, MLP 2,048), vocab 32,000, trained chunkwise (chunks of 256: retention
    inside each chunk by a decay mask, across chunks by the state entering it, the states of
    every chunk stacked for backward) on 16,384 tokens a step as 8 x 2,048, 4 x 4,096 or 2 x
    8,192; bf16 autocast, AdamW. Every fourth step the same process samples from it: 8-32
    prompts of 256-1,024 tokens prefilled chunkwise into one state per layer, then 128-256
    tokens generated recurrently from those states (no key/value cache)."""
    torch.manual_seed(273)
    vocab, d, depth, heads, hidden, chunk, shapes, batches, prompts, news = (
        (32000, 1024, 12, 4, 2048, 256, ((8, 2048), (4, 4096), (2, 8192)), (8, 32),
         (256, 512, 1024), (128, 256)) if CUDA
        else (100, 32, 2, 2, 64, 8, ((2, 16), (1, 32)), (1, 2), (8, 16), (2, 4)))
    with torch.device(DEV):
        emb, ln = nn.Embedding(vocab, d), nn.LayerNorm(d)
        blocks = nn.ModuleList(_RetNetBlock(d, heads, hidden, chunk) for _ in range(depth))
        head = nn.Linear(d, vocab, bias=False)
    model = nn.ModuleList([emb, blocks, ln, head])
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.98), weight_decay=0.05)
    angles, amp, gen = _angles(shapes[-1][1], d // heads), _amp(torch.bfloat16), _generator(273)
    cos, sin = angles.cos(), angles.sin()
    for step in range(steps):
        b, t = _pick(gen, shapes)
        ids = torch.randint(0, vocab, (b, t + 1), device=DEV)
        with torch.autocast(**amp):
            x = emb(ids[:, :-1])
            for blk in blocks:
                x, _ = blk(x, cos[:t], sin[:t])
            logits = head(ln(x)).float()
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        del x, logits
        _update(opt, loss)
        del ids, loss
        if step % 4 != 3:
            continue
        b, t, new = _randint(gen, *batches), _pick(gen, prompts), _randint(gen, *news)
        with torch.no_grad(), torch.autocast(**amp):
            tok = torch.randint(0, vocab, (b, t), device=DEV)
            states, pos, out = [None] * depth, 0, []
            for _ in range(new):
                n = tok.shape[1]
                x = emb(tok)
                for i, blk in enumerate(blocks):
                    x, states[i] = blk(x, cos[pos:pos + n], sin[pos:pos + n], states[i])
                pos += n
                tok = torch.multinomial(head(ln(x[:, -1])).float().softmax(-1), 1)
                out.append(tok)
            torch.cat(out, 1).cpu()
            del tok, states, out, x


# ----------------------------------------------------------- graphs kept for logging

# GPU peak about 35 GiB: 553M fp32 parameters with gradients and AdamW 8.8 GiB; a training step
# at 4 x 1,024 tokens 3.6 GiB of activations and 1.5 GiB of logits; the leaked entropy graphs
# 1 GiB a step (the fp32 log-probabilities and probabilities of 4,096 x 32,000), up to 8 of
# them; after an evaluation, 4 leaked graphs of 2 x 1,024 tokens until the next log line, each
# 3.2 GiB (its activations, the log-softmax, and the bf16 copies of every weight that autocast
# made and the graph saved). Time: about 14 TFLOP a step (40-50 ms with AdamW): 200 steps, some
# 12 s.
def logging_leak_graphs_train(steps):
    """The leaks of a training loop's logging, as people write them: a GPT (16 layers, d 1,536,
    12 heads, vocab 32,000, contexts of 1,024; bf16 autocast, AdamW) trained on 4 x 1,024
    tokens a step, its loss appended to a list without `.item()` and the predictive entropy
    computed from the same log-probabilities for the log without `.detach()` (backward frees
    the loss's graph but not the entropy's, which keeps two logits-sized tensors); every 40
    steps an evaluation of 4 batches of 2 x 1,024 under `model.eval()` but without
    `torch.no_grad()`, its losses appended too, every graph alive; every 8 steps the lists are
    averaged with `.item()` and cleared, freeing all the kept graphs at once."""
    torch.manual_seed(274)
    vocab, d, layers, heads, ctx, batch, eval_batch, log_every, eval_every, eval_batches = (
        (32000, 1536, 16, 12, 1024, 4, 2, 8, 40, 4) if CUDA
        else (100, 32, 2, 4, 16, 2, 1, 3, 2, 2))
    with torch.device(DEV):
        model = Gpt(vocab, d, layers, heads, ctx)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    amp, history, logged = _amp(torch.bfloat16), {"loss": [], "entropy": [], "val": []}, []
    for step in range(steps):
        ids = torch.randint(0, vocab, (batch, ctx + 1), device=DEV)
        with torch.autocast(**amp):
            logits = model(ids[:, :-1])
        logp = logits.float().log_softmax(-1)
        loss = F.nll_loss(logp.flatten(0, 1), ids[:, 1:].flatten())
        history["entropy"].append(-(logp.exp() * logp).sum(-1).mean())
        _update(opt, loss)
        history["loss"].append(loss)
        del ids, logits, logp, loss
        if step % eval_every == eval_every - 1:
            model.eval()
            for _ in range(eval_batches):
                ids = torch.randint(0, vocab, (eval_batch, ctx + 1), device=DEV)
                with torch.autocast(**amp):
                    logits = model(ids[:, :-1])
                history["val"].append(F.cross_entropy(logits.float().flatten(0, 1),
                                                      ids[:, 1:].flatten()))
                del ids, logits
            model.train()
        if step % log_every == log_every - 1:
            logged.append({k: torch.stack(v).mean().item() for k, v in history.items() if v})
            for v in history.values():
                v.clear()


# ------------------------------------------------- masked-diffusion LM sampling (LLaDA)

class _BiBlock(LlamaBlock):
    """A Llama block without the causal mask (LLaDA's mask predictor)."""

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.hd).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(_rope(q, cos, sin), _rope(k, cos, sin), v)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


# GPU peak about 3 GiB: 440M bf16 parameters 0.9 GiB; a forward of up to 8 x 448 tokens (a
# doubled batch with guidance) under 0.3 GiB; its bf16 logits 8 x 448 x 32,000 (0.23 GiB), the
# guided ones and their fp32 softmax; with temperature, the float64 logits, uniform noise, its
# Gumbel transform and the exponentials (each 0.46 GiB at 4 x 448). Time: a forward about 3
# TFLOP (8-12 ms) and the float64 passes; 32-128 forwards a request (128-256 tokens, 2-4
# committed a forward), about 1 s; 16 requests, some 15-20 s.
def masked_diffusion_lm_sample(steps):
    """LLaDA-style sampling (Nie et al. 2025) from a masked-diffusion language model (a
    bidirectional Llama of 12 layers, d 1,536, 12 heads, SwiGLU 4,096, vocab 32,000 and a mask
    token; bf16, inference mode): each request, 1-4 prompts of 64-192 tokens followed by 128
    or 256 mask tokens, generated semi-autoregressively in blocks of 32. Every step predicts
    the whole sequence again (with classifier-free guidance on some requests: the prompt
    masked in a second copy of the batch), draws with float64 Gumbel noise at temperature 0.7
    or takes the argmax, and commits the 2 or 4 most confident masked tokens of the current
    block per row (the rest stay masked, LLaDA's low-confidence remasking)."""
    torch.manual_seed(275)
    vocab, d, depth, heads, hidden, batches, prompts, gens, block, per_step = (
        (32000, 1536, 12, 12, 4096, (1, 4), (64, 192), (128, 256), 32, (2, 4)) if CUDA
        else (100, 32, 2, 4, 64, (1, 2), (4, 8), (8, 16), 4, (1, 2)))
    dt, mask_id = (torch.bfloat16 if CUDA else torch.float32), vocab
    with torch.device(DEV):
        emb, norm = nn.Embedding(vocab + 1, d).to(dt), RmsNorm(d).to(dt)
        blocks = nn.ModuleList(_BiBlock(d, heads, heads, hidden) for _ in range(depth)).to(dt)
        head = nn.Linear(d, vocab, bias=False).to(dt)
    angles, gen = _angles(prompts[1] + gens[1], d // heads), _generator(275)

    def net(ids, cos, sin):
        h = emb(ids)
        for blk in blocks:
            h = blk(h, cos, sin)
        return head(norm(h))

    with torch.inference_mode():
        for _ in range(steps):
            b, p, g = _randint(gen, *batches), _randint(gen, *prompts), _pick(gen, gens)
            per, cfg, temp = _pick(gen, per_step), _pick(gen, (0.0, 1.0)), _pick(gen, (0.0, 0.7))
            x = torch.full((b, p + g), mask_id, device=DEV)
            x[:, :p] = torch.randint(0, vocab, (b, p), device=DEV)
            prompt = torch.arange(p + g, device=DEV) < p
            cos, sin = angles[:p + g].cos().to(dt), angles[:p + g].sin().to(dt)
            for start in range(p, p + g, block):
                rounds = block // per
                left = (x[:, start:start + block] == mask_id).sum(1, keepdim=True).cpu()
                quota = (left // rounds + (torch.arange(rounds) < left % rounds)).tolist()
                for i in range(rounds):
                    masked = x == mask_id
                    if cfg:
                        cond, uncond = net(torch.cat([x, x.masked_fill(prompt, mask_id)]),
                                           cos, sin).chunk(2)
                        logits = uncond + (cfg + 1) * (cond - uncond)
                        del cond, uncond
                    else:
                        logits = net(x, cos, sin)
                    if temp:
                        noisy = logits.double()
                        gumbel = (-torch.log(torch.rand_like(noisy))) ** temp
                        x0 = (noisy.exp() / gumbel).argmax(-1)
                        del noisy, gumbel
                    else:
                        x0 = logits.argmax(-1)
                    conf = logits.float().softmax(-1).gather(-1, x0[..., None])[..., 0]
                    conf[:, start + block:] = -math.inf
                    x0 = torch.where(masked, x0, x)
                    conf = torch.where(masked, conf, -math.inf)
                    take = torch.zeros_like(masked)
                    for j in range(b):
                        take[j, conf[j].topk(quota[j][i]).indices] = True
                    x[take] = x0[take]
                    del logits, x0, conf, take, masked
            x[:, p:].cpu()


# --------------------------------------------------- EnCodec, RVQ and STFT discriminators

def _wn(conv):
    """EnCodec's weight-normalised convolutions (the weight made from g and v every call)."""
    return nn.utils.parametrizations.weight_norm(conv)


class _Res1d(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.net = nn.Sequential(nn.ELU(), _wn(nn.Conv1d(c, c // 2, 3, padding=1)), nn.ELU(),
                                 _wn(nn.Conv1d(c // 2, c, 1)))

    def forward(self, x):
        return x + self.net(x)


class _Lstm(nn.Module):
    """SEANet's two-layer LSTM over the frames, with a skip."""

    def __init__(self, c):
        super().__init__()
        self.lstm = nn.LSTM(c, c, 2)

    def forward(self, x):
        return x + self.lstm(x.permute(2, 0, 1))[0].permute(1, 2, 0)


def _seanet(strides, ch, dim):
    """SEANet's encoder and decoder: stride s by kernels of 2s, channels doubled each time."""
    enc, dec, c = [_wn(nn.Conv1d(1, ch, 7, padding=3))], [], ch
    for s in strides:
        p = (s + 1) // 2
        enc += [_Res1d(c), nn.ELU(), _wn(nn.Conv1d(c, 2 * c, 2 * s, s, p))]
        dec = [nn.ELU(), _wn(nn.ConvTranspose1d(2 * c, c, 2 * s, s, p, 2 * p - s)), _Res1d(c)] + dec
        c *= 2
    enc += [_Lstm(c), nn.ELU(), _wn(nn.Conv1d(c, dim, 7, padding=3))]
    dec = [_wn(nn.Conv1d(dim, c, 7, padding=3)), _Lstm(c)] + dec + [
        nn.ELU(), _wn(nn.Conv1d(ch, 1, 7, padding=3))]
    return nn.Sequential(*enc), nn.Sequential(*dec)


class _Rvq(nn.Module):
    """Residual vector quantisation (EnCodec's): codebooks updated by EMA with Laplace
    smoothing, dead codes replaced by frames of the batch, straight-through gradients."""

    def __init__(self, n_q, bins, dim, decay=0.99):
        super().__init__()
        self.decay, self.bins = decay, bins
        self.register_buffer("embed", torch.randn(n_q, bins, dim))
        self.register_buffer("size", torch.ones(n_q, bins))
        self.register_buffer("sums", self.embed.clone())

    def forward(self, z, n):
        x = z.transpose(1, 2).reshape(-1, z.shape[1])
        res, out, commit, a = x, 0, 0, 1 - self.decay
        for i in range(n):
            e = self.embed[i]
            dist = res.pow(2).sum(1, keepdim=True) - 2 * res @ e.t() + e.pow(2).sum(1)
            codes = dist.argmin(1)
            q = F.embedding(codes, e)
            commit = commit + F.mse_loss(q.detach(), res)
            with torch.no_grad():
                counts = torch.bincount(codes, minlength=self.bins)
                self.size[i].mul_(self.decay).add_(counts, alpha=a)
                self.sums[i].mul_(self.decay).add_(torch.zeros_like(e).index_add_(0, codes, res),
                                                   alpha=a)
                total = self.size[i].sum()
                smooth = (self.size[i] + 1e-5) / (total + self.bins * 1e-5) * total
                fresh = res[torch.randint(0, len(res), (self.bins,), device=res.device)]
                self.embed[i] = torch.where(self.size[i, :, None] < 2, fresh,
                                            self.sums[i] / smooth[:, None])
            q = res + (q - res).detach()
            res, out = res - q, out + q
        return out.view(z.shape[0], -1, z.shape[1]).transpose(1, 2), commit


class _StftDisc(nn.Module):
    """One scale of EnCodec's MS-STFT discriminator: 2-D convolutions over the real and
    imaginary parts of a spectrogram, dilated in time, strided in frequency."""

    def __init__(self, n_fft, ch=32):
        super().__init__()
        self.n_fft = n_fft
        self.register_buffer("window", torch.hann_window(n_fft))
        self.convs = nn.ModuleList([_wn(nn.Conv2d(2, ch, (3, 9), padding=(1, 4)))] + [
            _wn(nn.Conv2d(ch, ch, (3, 9), (1, 2), (dil, 4), (dil, 1))) for dil in (1, 2, 4)] + [
            _wn(nn.Conv2d(ch, ch, 3, padding=1))])
        self.out = _wn(nn.Conv2d(ch, 1, 3, padding=1))

    def forward(self, x):
        z = torch.stft(x[:, 0], self.n_fft, self.n_fft // 4, window=self.window,
                       return_complex=True)
        z, feats = torch.view_as_real(z).permute(0, 3, 2, 1), []
        for conv in self.convs:
            z = F.leaky_relu(conv(z), 0.2)
            feats.append(z)
        return self.out(z), feats


def _spectral(x, y, scales):
    """L1 + L2 distance of magnitude spectrograms at several resolutions."""
    loss = 0
    for n in scales:
        w = torch.hann_window(n, device=x.device)
        a, b = (torch.stft(z[:, 0], n, n // 4, window=w, return_complex=True).abs()
                for z in (x, y))
        loss = loss + (a - b).abs().mean() + (a - b).pow(2).mean()
    return loss


# GPU peak about 12 GiB, at 16 crops of 2 s: the codec 15M parameters, the discriminators 1M
# (with Adam, under 0.3 GiB); the encoder's and decoder's activations (16 x 32 x 48,000 down to
# 16 x 512 x 150, about 25M values a map, the weight-normalised weights remade every call)
# about 3 GiB; each STFT discriminator's five feature maps (16 x 32 x frames x bins: 0.2 GiB
# for the first at every scale, then halved in frequency) with the LeakyReLU inputs, about 4
# GiB for the five scales over one input: real and generated both kept for the
# discriminator's loss, the generated for the generator's; the RVQ's distances 2,400 x 1,024
# per codebook. Time: about 4-5 TFLOP of 2-D convolutions a step (TF32) and the 1-D
# convolutions' memory passes, some 0.15-0.3 s a step: 80 steps, some 15-20 s.
def encodec_rvq_msstft_train(steps):
    """EnCodec (Defossez et al. 2022) at 24 kHz: SEANet encoder and decoder (strides 2, 4, 5, 8,
    32-512 channels, two-layer LSTMs, 128-d latent at 75 Hz; weight-normalised convolutions),
    residual vector quantisation with up to 32 codebooks of 1,024 (a bandwidth of 2, 4, 8, 16
    or 32 codebooks drawn per batch), a multi-scale STFT discriminator (FFTs of 2,048-128).
    Batches of 16 crops of 1, 1.5 or 2 s cut on the host from a bank of clips and copied from
    pinned memory on a loader stream one batch ahead; each step a discriminator update (hinge,
    generated audio detached) and a generator update (time-domain L1, L1 + L2 of magnitude
    spectrograms at 7 scales, hinge, relative feature matching, commitment). fp32, Adam."""
    torch.manual_seed(276)
    rate, batch, strides, ch, dim, n_q, ffts, spec, bank_clips, bank_len, lengths, bands = (
        (24000, 16, (2, 4, 5, 8), 32, 128, 32, (2048, 1024, 512, 256, 128),
         tuple(2 ** i for i in range(5, 12)), 64, 10, (24000, 35840, 48000), (2, 4, 8, 16, 32))
        if CUDA else (1600, 2, (2, 4), 4, 8, 4, (64, 32), (16, 32), 4, 4, (1600, 2400), (2, 4)))
    with torch.device(DEV):
        enc, dec = _seanet(strides, ch, dim)
        rvq, discs = _Rvq(n_q, 1024, dim), nn.ModuleList(_StftDisc(n) for n in ffts)
    gen_params = list(enc.parameters()) + list(dec.parameters())
    opt_g = torch.optim.Adam(gen_params, lr=3e-4, betas=(0.5, 0.9))
    opt_d = torch.optim.Adam(discs.parameters(), lr=3e-4, betas=(0.5, 0.9))
    gen, side = _generator(276), _stream()
    bank = torch.randn(bank_clips, bank_len * rate, generator=gen) * 0.1

    def load():
        t = _pick(gen, lengths)
        clip = torch.randint(0, bank_clips, (batch,), generator=gen)
        at = torch.randint(0, bank.shape[1] - t, (batch,), generator=gen)
        x = torch.empty((batch, 1, t), pin_memory=CUDA)
        for j in range(batch):
            x[j, 0] = bank[clip[j], at[j]:at[j] + t]
        with _on(side):  # the loader stream allocates the batch
            return x.to(DEV, non_blocking=True)

    nxt = load()
    for _ in range(steps):
        real = nxt
        _hand_over([real], side)
        nxt = load()
        q, commit = rvq(enc(real), _pick(gen, bands))
        fake = dec(q)
        d_loss = 0
        for disc in discs:
            d_loss = (d_loss + F.relu(1 - disc(real)[0]).mean()
                      + F.relu(1 + disc(fake.detach())[0]).mean())
        _update(opt_d, d_loss / len(discs))
        del d_loss
        discs.requires_grad_(False)
        adv, fm = 0, 0
        for disc in discs:
            with torch.no_grad():
                feats_r = disc(real)[1]
            logit, feats_f = disc(fake)
            adv = adv + F.relu(1 - logit).mean()
            fm = fm + sum((f - r).abs().mean() / r.abs().mean() for f, r in zip(feats_f, feats_r))
            del logit, feats_f, feats_r
        discs.requires_grad_(True)
        rec = (fake - real).abs().mean() + _spectral(fake, real, spec)
        _update(opt_g, 0.1 * rec + (3 * adv + 3 * fm) / len(discs) + commit)
        del real, q, commit, fake, adv, fm, rec
    if CUDA:
        torch.cuda.current_stream().wait_stream(side)
    del nxt


# --------------------------------------- Universal Transformer, adaptive computation time

class _ActUt(nn.Module):
    """A causal Universal Transformer (Dehghani et al. 2019): one block shared by every hop,
    a hop embedding, ACT's halting unit (Graves 2016, tensor2tensor's bookkeeping)."""

    def __init__(self, vocab, d, heads, ctx, hops, bias=-1.5):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.hop = nn.Embedding(hops, d)
        self.block, self.halt = Block(d, heads), nn.Linear(d, 1)
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        nn.init.constant_(self.halt.bias, bias)
        self.hops = hops

    def forward(self, ids, threshold=0.99):
        b, t = ids.shape
        state = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        halting = torch.zeros(b, t, device=ids.device)
        remainders, updates, prev, hop = torch.zeros_like(halting), torch.zeros_like(halting), 0, 0
        while hop < self.hops and bool((halting < threshold).any()):  # the depth: a sync a hop
            p = torch.sigmoid(self.halt(state).float())[..., 0]
            running = (halting < 1.0).float()
            total = halting + p * running
            new_halted = (total > threshold).float() * running
            running = (total <= threshold).float() * running
            halting = halting + p * running
            remainders = remainders + new_halted * (1 - halting)
            halting = halting + new_halted * remainders
            updates = updates + running + new_halted
            weight = (p * running + new_halted * remainders)[..., None]
            state = self.block(state + self.hop.weight[hop])
            prev = state * weight + prev * (1 - weight)
            hop += 1
        return self.head(self.ln(prev)), (updates + remainders).mean()


# GPU peak about 5 GiB: 32M parameters with gradients and AdamW 0.5 GiB; each hop keeps the
# shared block's activations for 8,192 tokens (about 0.23 GiB in bf16 and fp32) and ACT's
# fp32 state, its weighted copy and the running mix (25 MiB each), up to 12 hops about 3.4
# GiB; the fp32 logits 8,192 x 16,384 (0.5 GiB) with their gradient. Time: about 0.3 TFLOP and
# some 150 kernels a hop, forward and backward, 20-40 ms a step at 12 hops, less as the depth
# falls: 400 steps, some 10-15 s.
def act_universal_transformer_train(steps):
    """A Universal Transformer language model with adaptive computation time: one causal block
    (d 768, 12 heads) applied up to 12 times, each token's halting probability accumulated
    until it passes 0.99 (the remainder weighting its last hop), its state mixed into the
    output by those weights; the loop stops when every token has halted, so the depth is set
    by the hardest token and known only on the host, and moves as the halting unit learns
    (halting bias -1.5, ponder cost 0.001 as tensor2tensor's). 8,192 tokens a step as 32 x
    256 up to 4 x 2,048 (a shape drawn each step); vocab 16,384, bf16 autocast, AdamW."""
    torch.manual_seed(277)
    vocab, d, heads, hops, shapes, tau = (
        (16384, 768, 12, 12, ((32, 256), (16, 512), (8, 1024), (4, 2048)), 0.001) if CUDA
        else (100, 32, 4, 6, ((4, 8), (2, 16)), 0.001))
    with torch.device(DEV):
        model = _ActUt(vocab, d, heads, shapes[-1][1], hops)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    amp, gen = _amp(torch.bfloat16), _generator(277)
    for _ in range(steps):
        b, t = _pick(gen, shapes)
        ids = torch.randint(0, vocab, (b, t + 1), device=DEV)
        with torch.autocast(**amp):
            logits, ponder = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()) + tau * ponder
        del logits
        _update(opt, loss)
        del ids, ponder, loss


# --------------------------------------------------- MuZero, reanalysis and unroll

class _Res2d(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.c2 = (nn.Conv2d(c, c, 3, padding=1, bias=False) for _ in range(2))
        self.b1, self.b2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class _MuZero(nn.Module):
    """EfficientZero's Atari networks: a downsampling representation (96 -> 6), dynamics on the
    state and an action plane, reward, value and policy heads over categorical supports."""

    def __init__(self, frames, actions, c, side, support):
        super().__init__()
        self.actions = actions
        self.rep = nn.Sequential(
            nn.Conv2d(3 * frames, c // 2, 3, 2, 1, bias=False), nn.BatchNorm2d(c // 2), nn.ReLU(),
            _Res2d(c // 2), nn.Conv2d(c // 2, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c),
            nn.ReLU(), _Res2d(c), nn.AvgPool2d(3, 2, 1), _Res2d(c), nn.AvgPool2d(3, 2, 1),
            _Res2d(c))
        self.dyn = nn.Sequential(nn.Conv2d(c + 1, c, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(c), nn.ReLU(), _Res2d(c))

        def head(out):
            return nn.Sequential(nn.Conv2d(c, 16, 1), nn.Flatten(),
                                 nn.Linear(16 * side * side, 256), nn.ReLU(), nn.Linear(256, out))

        self.reward, self.value, self.policy = head(support), head(support), head(actions)

    @staticmethod
    def _scale(s):  # min-max normalised per sample
        flat = s.flatten(1)
        lo, hi = flat.min(1, keepdim=True)[0], flat.max(1, keepdim=True)[0]
        return ((flat - lo) / (hi - lo + 1e-5)).view_as(s)

    def represent(self, obs):
        return self._scale(self.rep(obs))

    def step(self, s, a):
        plane = (a.to(s.dtype) / self.actions)[:, None, None, None].expand(-1, 1, *s.shape[2:])
        h = self.dyn(torch.cat([s, plane], 1))
        return self._scale(h), self.reward(h)

    def predict(self, s):
        return self.policy(s), self.value(s)


def _h(x, eps=0.001):
    return x.sign() * ((x.abs() + 1).sqrt() - 1) + eps * x


def _h_inv(y, eps=0.001):
    return y.sign() * ((((1 + 4 * eps * (y.abs() + 1 + eps)).sqrt() - 1) / (2 * eps)) ** 2 - 1)


def _two_hot(x, half):
    """Scalars as two-hot vectors over the support -half..half, after MuZero's h."""
    x = _h(x).clamp(-half, half - 1e-3)
    lo = x.floor()
    out = torch.zeros(*x.shape, 2 * half + 1, device=x.device)
    out.scatter_(-1, (lo + half).long()[..., None], (1 - (x - lo))[..., None])
    return out.scatter_(-1, (lo + half + 1).long()[..., None], (x - lo)[..., None])


def _scalar(logits, half):
    support = torch.arange(-half, half + 1, device=logits.device, dtype=torch.float)
    return _h_inv((logits.float().softmax(-1) * support).sum(-1))


# GPU peak about 2 GiB: the networks 4M parameters (with SGD's momentum, 50 MiB); a batch's
# window 256 x 18 frames of 96 x 96 uint8 (127 MiB, the next one arriving on the loader
# stream beside it); stacks of 8 frames in fp32 (226 MiB each, one at a time for the 11
# reanalysed offsets); the representation's maps at 48 x 48 and 24 x 24 for 256 observations
# (0.7 GiB kept for backward); 256 x 18 expanded states. Time: the host gathers 127 MiB a step
# (30-50 ms, overlapped); on the GPU 12 representation passes, 11 one-step expansions and a
# five-step unroll, 40-60 ms: 250 steps, some 12-15 s.
def muzero_reanalyse_unroll_train(steps):
    """MuZero (Schrittwieser et al. 2020) trained with reanalysis as EfficientZero does, on an
    Atari-like replay buffer in host memory (32 games of 400 frames of 96 x 96 RGB, 18
    actions, rewards; priorities): each step 256 positions drawn by priority, their windows
    of 18 frames with actions and rewards gathered into pinned memory and copied on a loader
    stream one batch ahead. A target network (refreshed every 25 steps) reanalyses the 11
    stacks of 8 frames at offsets 0-10 without a graph: values for 5-step bootstrapped targets
    and improved policies from a one-step expansion of all 18 actions (Gumbel MuZero's
    completed Q-values in place of a search); then the model unrolls 5 steps through its
    dynamics (gradients halved at every step) against those targets, categorical supports of
    601. bf16 autocast, SGD with momentum; priorities written back to the host once the next
    batch is drawn."""
    torch.manual_seed(278)
    games, length, res, frames, actions, c, batch, unroll, td, half, refresh = (
        (32, 400, 96, 8, 18, 64, 256, 5, 5, 300, 25) if CUDA
        else (4, 40, 32, 2, 4, 8, 4, 2, 2, 5, 2))
    window, gamma, gen = frames + unroll + td, 0.997, _generator(278)
    with torch.device(DEV):
        model = _MuZero(frames, actions, c, res // 16, 2 * half + 1)
    target = copy.deepcopy(model).eval().requires_grad_(False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    buf = torch.randint(0, 256, (games * length, 3, res, res), dtype=torch.uint8, generator=gen)
    acts = torch.randint(0, actions, (games * length,), generator=gen)
    rews = (torch.rand(games * length, generator=gen) < 0.05).float()
    prio = torch.ones(games, length)
    prio[:, length - window:] = 0  # windows stay inside their game
    side, amp = _stream(), _amp(torch.bfloat16)

    def load():
        at = torch.multinomial(prio.flatten(), batch, replacement=True, generator=gen)
        idx = (at[:, None] + torch.arange(window)).flatten()
        x = torch.empty((batch * window, 3, res, res), dtype=torch.uint8, pin_memory=CUDA)
        torch.index_select(buf, 0, idx, out=x)
        a = acts[idx].view(batch, window)[:, frames - 1:frames - 1 + unroll + td]
        r = rews[idx].view(batch, window)[:, frames - 1:frames - 1 + unroll + td]
        if CUDA:
            a, r = a.pin_memory(), r.pin_memory()
        with _on(side):  # the loader stream allocates the batch
            return at, [t.to(DEV, non_blocking=True) for t in (x, a, r)]

    def stack(x, j):
        return x[:, j:j + frames].flatten(1, 2).float() / 255

    nxt = load()
    for step in range(steps):
        at, (x, a, r) = nxt
        _hand_over([x, a, r], side)
        x = x.view(batch, window, 3, res, res)
        if step % refresh == 0:
            target.load_state_dict(model.state_dict())
        values, policies = [], []
        with torch.no_grad(), torch.autocast(**amp):
            for j in range(unroll + td + 1):
                s = target.represent(stack(x, j))
                logits, v = target.predict(s)
                values.append(_scalar(v, half))
                if j <= unroll:  # every action expanded once from the root
                    s2, rw = target.step(s.repeat_interleave(actions, 0),
                                         torch.arange(actions, device=DEV).repeat(batch))
                    q = (_scalar(rw, half) + gamma * _scalar(target.predict(s2)[1], half))
                    q = q.view(batch, actions)
                    lo, hi = q.min(1, keepdim=True)[0], q.max(1, keepdim=True)[0]
                    q = 50 * (q - lo) / (hi - lo + 1e-6)  # completed Q, scaled
                    policies.append((logits.float() + q).softmax(-1))
                    del s2, rw, q
                del s, logits, v
        disc = gamma ** torch.arange(td, device=DEV, dtype=torch.float)
        z = torch.stack([(r[:, k:k + td] * disc).sum(1) + gamma ** td * values[k + td]
                         for k in range(unroll + 1)], 1)
        with torch.autocast(**amp):
            s, loss = model.represent(stack(x, 0)), 0
            for k in range(unroll + 1):
                logits, v = model.predict(s)
                if k == 0:
                    err = (_scalar(v.detach(), half) - z[:, 0]).abs()
                loss = (loss + _soft_ce(logits, policies[k])
                        + 0.25 * _soft_ce(v, _two_hot(z[:, k], half)))
                if k < unroll:
                    s, rw = model.step(s, a[:, k])
                    loss = loss + _soft_ce(rw, _two_hot(r[:, k], half))
                    s = 0.5 * s + 0.5 * s.detach()
        _update(opt, loss.mean() / (unroll + 1))
        del x, a, r, values, policies, z, s, loss, logits, v, rw
        nxt = load()  # sampled on the host while the GPU runs the step
        # The next batch was drawn a step late. A diverged value head gives NaN errors, which
        # torch.multinomial refuses (the H100's first recording stopped there): priority 1.
        prio.view(-1)[at] = torch.nan_to_num(err.float().cpu(), nan=1.0, posinf=1.0) + 1e-3
        del err
    if CUDA:
        torch.cuda.current_stream().wait_stream(side)
    del nxt


WORKLOADS = {
    "reformer_lsh_attention_train": (reformer_lsh_attention_train, 40),
    "knn_lm_datastore_decode": (knn_lm_datastore_decode, 8),
    "retnet_chunkwise_recurrent_train": (retnet_chunkwise_recurrent_train, 48),
    "logging_leak_graphs_train": (logging_leak_graphs_train, 200),
    "masked_diffusion_lm_sample": (masked_diffusion_lm_sample, 16),
    "encodec_rvq_msstft_train": (encodec_rvq_msstft_train, 80),
    "act_universal_transformer_train": (act_universal_transformer_train, 400),
    "muzero_reanalyse_unroll_train": (muzero_reanalyse_unroll_train, 250),
}
