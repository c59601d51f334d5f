"""The twenty-eighth corpus: eight workloads, held out from every change to the allocator until
recorded. Same conventions as workloads.py: `run(steps)` builds its models and data on DEV and
runs `steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and data
are smaller and the streams are left out (every periodic event still happens within two steps).

Each holds memory in a way the first twenty-seven corpora do not: a Switch-style mixture of
experts whose dispatch buffers are dense experts x capacity slots, the capacity recomputed every
step from the token count and a capacity factor that a controller moves with the last step's
dropped-token rate (a padded buffer of a host-chosen size per layer, not per-expert gathers);
flash-decoding (a long-context GQA server: prompts of 1k-24k tokens prefilled in 4k chunks into
a preallocated cache, then every decoded token's attention computed as per-split partial outputs
and log-sum-exps over a number of splits chosen each token from the batch and the longest
context, and merged); a learned optimizer (a coordinatewise two-layer LSTM meta-trained by
unrolling 20 steps of a CNN optimizee whose half-million parameters are one flat tensor: the
LSTM's gates and states for every coordinate at every unrolled step are kept for the meta
backward); a Llama stack trained with three activation policies at once (the first layers'
saved tensors offloaded to pinned host memory on a side stream, the GPU copies freed after the
copies through `record_stream`, brought back on that stream a layer ahead in backward;
selective checkpointing that keeps only matmul and attention outputs in the middle layers; the
last layers kept); a GPT grown twice during training (Net2WiderNet and layer stacking: every
parameter and Adam moment rebuilt wider and deeper, the old ones freed); SWAG (a wide ResNet
trained with CutMix, channels_last and fp16; per parameter, a matrix of the last 20 deviations
grown by concatenation and then slid, a flat (K, P) copy of it to draw weight samples for a
second network whose BatchNorm statistics are recomputed before it is evaluated); ANCE-style
retrieval training (hard negatives mined from an in-GPU FIFO of passage embeddings and token
ids that grows by concatenation and then wraps in place, a data-dependent number of unique
negatives re-encoded with gradients, new passages encoded by a stale copy of the passage tower
on a side stream); and a temporal graph network (per-node memory and last-message tables of a
million nodes updated by scatter after each batch of events, a GRU over the nodes touched, a
most-recent-neighbour table merged by top-k, the tables cloned and restored around evaluation).

Above each workload, a comment estimates its peak on the GPU (from the sizes; PyTorch's
allocated bytes) and its time on an H100.
"""
import copy
import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

from workloads import DEV, Block, Gpt
# Earlier corpora's helpers: autocast, generators, choices, streams and hand-over (thirteenth);
# an integer in a closed range, fp16 on the GPU (fourteenth); a wide ResNet (fifteenth); Llama
# blocks, RMSNorm, rotary embeddings (sixteenth); text towers (twentieth); rotary angles
# (twenty-sixth).
from workloads_thirteenth import CUDA, _amp, _generator, _hand_over, _on, _pick, _stream
from workloads_fourteenth import _half, _randint
from workloads_fifteenth import _wide_resnet
from workloads_sixteenth import LlamaBlock, RmsNorm, _rope
from workloads_twentieth import _text_tower
from workloads_twentysixth import _angles


def _clip_step(opt, params, loss, scaler=None):
    """Backward, gradients clipped to norm 1, an optimizer step (through `scaler` if given),
    the gradients dropped."""
    if scaler is None:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        scaler.step(opt)
        scaler.update()
    opt.zero_grad(set_to_none=True)


# -------------------------------------------- Switch MoE, capacity slots and dropped tokens

class _SwitchMoe(nn.Module):
    """Experts as stacked weights (experts, d, hidden); top-k routing (GShard's normalised
    gates) into a dense buffer of experts x capacity slots: every token's first choice is
    placed before any second one, a token past its expert's capacity is dropped (its slot is
    a dummy row; the residual carries it). The router runs in fp32."""

    def __init__(self, d, experts, hidden, k, dtype):
        super().__init__()
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden ** -0.5)
        self.e, self.k, self.dtype = experts, k, dtype

    def forward(self, x, capacity):
        t, d = x.shape
        e, k = self.e, self.k
        with torch.autocast(DEV.type, enabled=False):
            logits = self.router(x.float())
        probs = logits.softmax(-1)
        gate, choice = probs.topk(k, -1)  # (t, k)
        gate = gate / gate.sum(-1, keepdim=True).clamp_min(1e-9)
        onehot = F.one_hot(choice, e)  # (t, k, e)
        ranks = onehot.transpose(0, 1).reshape(k * t, e).cumsum(0).view(k, t, e).transpose(0, 1)
        pos = ((ranks - 1) * onehot).sum(-1)  # each assignment's place in its expert's buffer
        keep = pos < capacity
        slot = torch.where(keep, choice * capacity + pos, e * capacity).flatten()
        src = x.to(self.dtype).repeat_interleave(k, 0)
        buf = src.new_zeros(e * capacity + 1, d).index_copy(0, slot, src)
        h = buf[:-1].view(e, capacity, d)
        y = torch.bmm(F.gelu(torch.bmm(h, self.w1)), self.w2)  # (e, capacity, d)
        y = torch.cat([y.flatten(0, 1), y.new_zeros(1, d)])[slot].view(t, k, d)
        out = (y * (gate * keep).to(y.dtype)[..., None]).sum(1)
        aux = e * (onehot[:, 0].float().mean(0) * probs.mean(0)).sum()  # load balancing
        z = logits.logsumexp(-1).pow(2).mean()  # router z-loss
        return out, aux, z, (~keep).sum()


class _MoeBlock(Block):
    def __init__(self, d, heads, experts, hidden, k, dtype):
        super().__init__(d, heads)
        del self.fc1, self.fc2
        self.moe = _SwitchMoe(d, experts, hidden, k, dtype)

    def forward(self, x, capacity, stats):
        x = x + self.attend(x)
        y, aux, z, dropped = self.moe(self.ln2(x).flatten(0, 1), capacity)
        stats.append((aux, z, dropped))
        return x + y.view_as(x)


def _moe_lm(m, ids, capacity, stats):
    x = m["tok"](ids) + m["pos"](torch.arange(ids.shape[1], device=DEV))
    for blk in m["blocks"]:
        x = blk(x, capacity, stats) if isinstance(blk, _MoeBlock) else blk(x)
    return m["head"](m["ln"](x))


# GPU peak about 22 GiB: 391M parameters (302M of them in 4 x 16 experts) with gradients and
# AdamW 5.8 GiB; at 24,576 tokens the 8 layers' activations (about 0.8 GiB a dense layer; an
# MoE layer's attention half, dispatch buffer, two bf16 copies of its input, the experts'
# hidden layer 16 x capacity x 3,072 in bf16 before and after the GELU: 1.2-1.6 GiB at
# capacity factors 1-1.5) some 9-10 GiB, and the logits 24,576 x 32,000 (bf16, fp32, their
# log-softmax and gradient: up to 6 GiB around the loss). Time: about 100M active parameters,
# 12-20 TFLOP a step, 60-120 ms with the routing's small kernels and one host sync for the
# dropped count; 48 steps and 4 evaluations, some 5-8 s.
def switch_moe_capacity_drop_train(steps):
    """A GPT (8 layers, d 768, 12 heads, vocab 32,000) whose every other MLP is a Switch/
    GShard mixture of 16 experts (hidden 3,072, top-2): tokens are dispatched into a dense
    buffer of 16 x capacity slots, capacity = capacity factor x tokens x 2 / 16 (rounded up
    to 16), recomputed every step; tokens past capacity are dropped. The capacity factor
    starts at 1.0 and a controller moves it after every step from the dropped fraction
    (up 0.25 above 1%, down 0.125 below 0.2%, within 1-4); 12k-24k tokens a step in four
    shapes; every 12th step an evaluation at capacity factor 2.0 on another shape. Load-
    balancing and z-losses, bf16 autocast, AdamW, clipping."""
    torch.manual_seed(281)
    vocab, d, layers, heads, experts, hidden, shapes, eval_shape, align, every = (
        (32000, 768, 8, 12, 16, 3072, ((16, 1024), (24, 512), (8, 2048), (32, 768)),
         (4, 2048), 16, 12) if CUDA
        else (100, 32, 2, 4, 4, 64, ((2, 16), (4, 8), (1, 32)), (2, 24), 1, 2))
    k, dt = 2, (torch.bfloat16 if CUDA else torch.float32)
    ctx = max(t for _, t in shapes + (eval_shape,))
    with torch.device(DEV):
        model = nn.ModuleDict(dict(
            tok=nn.Embedding(vocab, d), pos=nn.Embedding(ctx, d),
            blocks=nn.ModuleList(_MoeBlock(d, heads, experts, hidden, k, dt) if i % 2
                                 else Block(d, heads) for i in range(layers)),
            ln=nn.LayerNorm(d), head=nn.Linear(d, vocab, bias=False)))
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.1)
    gen, amp, cf, moes = _generator(281), _amp(torch.bfloat16), 1.0, layers // 2

    def capacity(factor, tokens):
        return max(align, math.ceil(factor * tokens * k / experts / align) * align)

    for step in range(steps):
        b, t = _pick(gen, shapes)
        ids = torch.randint(0, vocab, (b, t + 1), device=DEV)
        stats = []
        with torch.autocast(**amp):
            logits = _moe_lm(model, ids[:, :-1], capacity(cf, b * t), stats)
        loss = (F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
                + 0.01 * sum(s[0] for s in stats) + 1e-3 * sum(s[1] for s in stats))
        dropped = torch.stack([s[2] for s in stats]).sum()
        del logits, stats
        _clip_step(opt, params, loss)
        frac = dropped.item() / (b * t * k * moes)
        cf = min(cf + 0.25, 4.0) if frac > 0.01 else max(cf - 0.125, 1.0) if frac < 0.002 else cf
        del ids, loss, dropped
        if step % every == every - 1:
            eb, et = eval_shape
            with torch.no_grad(), torch.autocast(**amp):
                ids = torch.randint(0, vocab, (eb, et + 1), device=DEV)
                logits = _moe_lm(model, ids[:, :-1], capacity(2.0, eb * et), [])
                F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()).item()
            del ids, logits


# --------------------------------------------------- flash-decoding, split key/value

def _num_splits(b, kv_heads, length, sms, block):
    """Flash-decoding's split count: enough (batch x kv head x split) work items to fill
    the SMs twice, each split a whole number of `block`-token blocks. (splits, split)."""
    blocks = -(-length // block)
    want = max(1, min(blocks, -(-2 * sms // (b * kv_heads))))
    per = -(-blocks // want)
    return -(-blocks // per), per * block


def _fd_prefill(blk, x, ck, cv, cos, sin, p, mask):
    """One chunk of a prompt (1, c, d) at positions p..p+c through a Llama block, its keys
    and values written into the request's cache slot (kv_heads, max_len, hd) first."""
    _, c, d = x.shape
    kvh, hd, g = blk.kv_heads, blk.hd, blk.heads // blk.kv_heads
    h = blk.norm1(x)
    q = blk.q(h).view(1, c, blk.heads, hd).transpose(1, 2)
    k, v = blk.kv(h).view(1, c, 2, kvh, hd).permute(2, 0, 3, 1, 4)
    q, k = _rope(q, cos[p:p + c], sin[p:p + c]), _rope(k, cos[p:p + c], sin[p:p + c])
    ck[:, p:p + c], cv[:, p:p + c] = k[0], v[0]
    keys = ck[None, :, :p + c].repeat_interleave(g, 1)
    vals = cv[None, :, :p + c].repeat_interleave(g, 1)
    y = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask, is_causal=mask is None)
    x = x + blk.o(y.transpose(1, 2).reshape(1, c, d))
    h = blk.norm2(x)
    return x + blk.down(F.silu(blk.gate(h)) * blk.up(h))


def _fd_decode(blk, x, ck, cv, cos, sin, lens, splits, split):
    """One token per row (b, 1, d) through a Llama block: its key and value written at each
    row's length, then attention over the first splits x split positions of the cache as
    flash-decoding computes it: per split a partial output, its maximum and its sum of
    exponentials (rows masked past their length), merged by their log-sum-exps."""
    b, _, d = x.shape
    kvh, hd, g = blk.kv_heads, blk.hd, blk.heads // blk.kv_heads
    h = blk.norm1(x)
    q = blk.q(h).view(b, 1, blk.heads, hd).transpose(1, 2)
    k, v = blk.kv(h).view(b, 1, 2, kvh, hd).permute(2, 0, 3, 1, 4)
    q, k = _rope(q, cos, sin), _rope(k, cos, sin)
    rows = torch.arange(b, device=DEV)
    ck[rows, :, lens], cv[rows, :, lens] = k[:, :, 0], v[:, :, 0]
    n = splits * split
    s = q.reshape(b * kvh, g, hd) @ ck[:b, :, :n].reshape(b * kvh, n, hd).mT
    s = s.float().view(b, kvh, g, splits, split) * hd ** -0.5
    valid = torch.arange(n, device=DEV).view(splits, split) <= lens.view(b, 1, 1, 1, 1)
    s = s.masked_fill(~valid, -1e30)
    m = s.amax(-1, keepdim=True)
    p = (s - m).exp()
    l = p.sum(-1)  # (b, kvh, g, splits)
    o = p.to(x.dtype).transpose(2, 3) @ cv[:b, :, :n].reshape(b, kvh, splits, split, hd)
    m = m[..., 0]
    w = (m - m.amax(-1, keepdim=True)).exp()  # (b, kvh, g, splits)
    o = (o.float() * w.transpose(2, 3)[..., None]).sum(2) / (l * w).sum(-1)[..., None]
    x = x + blk.o(o.to(x.dtype).reshape(b, 1, d))
    h = blk.norm2(x)
    return x + blk.down(F.silu(blk.gate(h)) * blk.up(h))


# GPU peak about 13.5 GiB: the 0.7B-parameter model in fp16 (1.3 GiB); the cache of 8 slots x
# 31,312 positions x 12 layers x 8 kv heads x 128, keys and values, fp16 (11.5 GiB); a
# prefill chunk's repeated keys and values (up to 16 heads x 24,576 x 128, 96 MiB each), its
# mask (up to 4,096 x 24,576) and MLP (4,096 x 5,632); a decoded token's fp32 split scores
# (up to 8 x 16 x 24,700, 12 MiB, a few copies). Time: prefill of some 60k tokens a wave
# (about 80 TFLOP of matmuls and 50 of masked attention, 0.5-0.8 s), 24-64 decoded tokens
# of 12 layers (5-8 ms each, reading up to 10 GiB of cache): 8 waves, some 8-12 s.
def flash_decode_split_kv_serve(steps):
    """Long-context serving with flash-decoding, written out in PyTorch: a 12-layer Llama-
    style model (d 2,048, 16 query heads over 8 key/value heads of 128, SwiGLU 5,632, vocab
    32,000, fp16, inference mode) and a preallocated cache of 8 request slots. Each step
    serves a wave of 2-8 requests with prompts of 1k-24k tokens (multiples of 256), each
    prefilled in chunks of 4,096 into its slot (a chunk attends to the cache so far under a
    causal mask); then 24-64 tokens are decoded greedily for the wave at once: every layer
    writes the new keys and values at each row's length and splits the longest context into
    a number of splits chosen for that token from the batch size and the length (filling
    132 SMs twice), computes per-split partial outputs with their maxima and sums, masked
    past each row's length, and merges them by their log-sum-exps."""
    torch.manual_seed(282)
    vocab, d, layers, heads, kvh, hidden, slots, batches, prompt_blocks, align, news, chunk = (
        (32000, 2048, 12, 16, 8, 5632, 8, (2, 8), (4, 96), 256, (24, 64), 4096) if CUDA
        else (100, 32, 2, 4, 2, 64, 3, (2, 3), (1, 4), 16, (3, 5), 32))
    block = 256 if CUDA else 8
    sms = torch.cuda.get_device_properties(DEV).multi_processor_count if CUDA else 4
    longest = prompt_blocks[1] * align + news[1]
    max_len = longest + longest // 4 + 2 * block  # room for the last split's overhang
    with torch.device(DEV):
        emb = _half(nn.Embedding(vocab, d))
        blocks = _half(nn.ModuleList(LlamaBlock(d, heads, kvh, hidden) for _ in range(layers)))
        norm, head = _half(RmsNorm(d)), _half(nn.Linear(d, vocab, bias=False))
    dt, hd = emb.weight.dtype, d // heads
    angles = _angles(max_len, hd)
    cos, sin = angles.cos().to(dt), angles.sin().to(dt)
    gen = _generator(282)
    with torch.inference_mode():
        cache_k = torch.zeros(layers, slots, kvh, max_len, hd, dtype=dt, device=DEV)
        cache_v = torch.zeros_like(cache_k)
        for _ in range(steps):
            b = _randint(gen, *batches)
            lens_host = [align * _randint(gen, *prompt_blocks) for _ in range(b)]
            new = _randint(gen, *news)
            first = []
            for i, length in enumerate(lens_host):
                ids = torch.randint(0, vocab, (1, length), device=DEV)
                for p in range(0, length, chunk):
                    c = min(chunk, length - p)
                    mask = None if p == 0 else (torch.arange(p + c, device=DEV)
                                                <= torch.arange(p, p + c, device=DEV)[:, None])
                    x = emb(ids[:, p:p + c])
                    for j, blk in enumerate(blocks):
                        x = _fd_prefill(blk, x, cache_k[j, i], cache_v[j, i], cos, sin, p, mask)
                    del mask
                first.append(head(norm(x[:, -1])).argmax(-1))
                del ids, x
            tok = torch.stack(first)
            lens = torch.tensor(lens_host, device=DEV)
            top, out = max(lens_host), []
            for _ in range(new):
                splits, split = _num_splits(b, kvh, top + 1, sms, block)
                x = emb(tok)
                c, s = cos[lens][:, None, None], sin[lens][:, None, None]
                for j, blk in enumerate(blocks):
                    x = _fd_decode(blk, x, cache_k[j], cache_v[j], c, s, lens, splits, split)
                tok = head(norm(x[:, 0])).argmax(-1, keepdim=True)
                out.append(tok)
                lens, top = lens + 1, top + 1
            torch.cat(out, 1).cpu()
            del first, tok, lens, out, x, c, s


# ------------------------------------------------- a learned optimizer, unrolled

class _L2o(nn.Module):
    """The coordinatewise LSTM optimizer of Andrychowicz et al. (2016): two LSTM layers of 20
    shared by every coordinate, the gradient preprocessed into (log magnitude / p, sign) or
    (-1, e^p g) for tiny gradients, the update a linear read-out scaled by 0.1."""

    def __init__(self, hidden=20, p=10.0):
        super().__init__()
        self.cells = nn.ModuleList([nn.LSTMCell(2, hidden), nn.LSTMCell(hidden, hidden)])
        self.out = nn.Linear(hidden, 1)
        self.p = p

    def forward(self, g, state):
        g = g[:, None]
        mag = (g.abs() + 1e-20).log() / self.p
        big = mag >= -1
        h = torch.cat([torch.where(big, mag, -1.0),
                       torch.where(big, g.sign(), (math.exp(self.p) * g).clamp(-1, 1))], 1)
        new = []
        for cell, hc in zip(self.cells, state):
            h, c = cell(h, hc)
            new.append((h, c))
        return 0.1 * self.out(h)[:, 0], new


def _cnn_shapes(c1, c2, fc, classes=10):
    return [(c1, 3, 3, 3), (c1,), (c2, c1, 3, 3), (c2,), (c2, c2, 3, 3), (c2,),
            (fc, c2 * 16), (fc,), (classes, fc), (classes,)]


def _cnn_init(shapes):
    """A flat parameter vector: He-initialised weights, zero biases."""
    parts = [torch.randn(s, device=DEV) * math.sqrt(2 / math.prod(s[1:])) if len(s) > 1
             else torch.zeros(s, device=DEV) for s in shapes]
    return torch.cat([p.flatten() for p in parts])


def _cnn(theta, shapes, x):
    """The optimizee: three convolutions (the last two strided), a 4 x 4 pool, two linear
    layers, every weight a view of the flat `theta`."""
    w = [t.view(s) for t, s in zip(theta.split([math.prod(s) for s in shapes]), shapes)]
    h = F.relu(F.conv2d(x, w[0], w[1], padding=1))
    h = F.relu(F.conv2d(h, w[2], w[3], stride=2, padding=1))
    h = F.relu(F.conv2d(h, w[4], w[5], stride=2, padding=1))
    h = F.relu(F.linear(F.adaptive_avg_pool2d(h, 4).flatten(1), w[6], w[7]))
    return F.linear(h, w[8], w[9])


# GPU peak about 13 GiB: the optimizee's 486,794 parameters are the LSTM's batch; each unrolled
# step keeps both cells' inputs, states and fused-gate workspaces (n x 80 fp32) and the read-
# out's input, some 0.6 GiB, 20 steps 12 GiB; the optimizee's activations (128 images of 32 x
# 32: 64 and 128 channels, about 70 MiB a step) for the same 20 steps; the data set (4,096
# images, 48 MiB). Time: each unrolled step is an optimizee forward and backward and two LSTM
# cells over 486k rows (2-4 ms), the meta backward as long again: 0.1-0.2 s an unroll, 40
# unrolls some 5-8 s.
def l2o_lstm_optimizer_meta_train(steps):
    """Learning to learn by gradient descent by gradient descent: a coordinatewise LSTM
    optimizer meta-trained on a CNN optimizee (conv 3-64-128-128, a 2,048-128-10 head; 487k
    parameters in one flat tensor, new random weights every 100 optimizee steps) learning
    the labels a fixed random teacher CNN gives 4,096 random 32 x 32 images, batches of 128.
    Each step unrolls 20 optimizee steps: the loss, its gradient (detached, as the paper's
    first-order approximation), the LSTM's update over every coordinate, the new parameters
    as `theta + update` (so the whole unroll stays in the graph); then the mean loss is
    backpropagated into the LSTM (truncated BPTT: parameters and states detached), clipped,
    Adam. Three networks in one process: the teacher, the optimizee and the optimizer."""
    torch.manual_seed(283)
    c1, c2, fc, size, images, batch, unroll, episode = (
        (64, 128, 128, 32, 4096, 128, 20, 5) if CUDA else (4, 8, 16, 16, 64, 8, 4, 2))
    shapes = _cnn_shapes(c1, c2, fc)
    with torch.device(DEV):
        l2o = _L2o()
    meta_opt = torch.optim.Adam(l2o.parameters(), lr=1e-3)
    data = torch.randn(images, 3, size, size, device=DEV)
    with torch.no_grad():
        labels = _cnn(_cnn_init(shapes), shapes, data).argmax(-1)
    n = sum(math.prod(s) for s in shapes)
    theta = state = None
    for step in range(steps):
        if step % episode == 0 or theta is None:
            theta = _cnn_init(shapes).requires_grad_()
            state = [(torch.zeros(n, 20, device=DEV), torch.zeros(n, 20, device=DEV))
                     for _ in l2o.cells]
        meta = 0
        for _ in range(unroll):
            pick = torch.randint(0, images, (batch,), device=DEV)
            loss = F.cross_entropy(_cnn(theta, shapes, data[pick]), labels[pick])
            g, = torch.autograd.grad(loss, theta, retain_graph=True)
            update, state = l2o(g.detach(), state)
            theta = theta + update
            meta = meta + loss / unroll
            del pick, loss, g, update
        if bool(torch.isfinite(meta)):
            _clip_step(meta_opt, list(l2o.parameters()), meta)
            theta = theta.detach().requires_grad_()
            state = [(h.detach(), c.detach()) for h, c in state]
        else:  # a diverged optimizee: dropped, a new one next step
            theta = state = None
        del meta


# -------------------------- activation offload, selective checkpointing, kept layers

class _Offloaded:
    __slots__ = ("host", "gpu", "layer")


class _Offloader:
    """Saved-tensor hooks that move a layer's saved activations of 1 MiB or more to pinned
    host memory on a side stream (the side stream waits for the main one; the GPU tensor is
    recorded on the side stream, so its memory waits for the copy), and in backward bring a
    layer's tensors back on that stream at its first unpack, the layer before with them
    (a layer ahead); each copy is recorded on the main stream that uses it."""

    def __init__(self, side, min_bytes):
        self.side, self.min_bytes, self.pending = side, min_bytes, {}

    def hooks(self, layer):
        self.pending[layer] = []

        def pack(t):
            if (t.device.type != DEV.type or isinstance(t, nn.Parameter)
                    or t.numel() * t.element_size() < self.min_bytes):
                return t
            h = _Offloaded()
            h.layer, h.gpu = layer, None
            if self.side is not None:
                self.side.wait_stream(torch.cuda.current_stream())
            with _on(self.side):
                h.host = torch.empty(t.shape, dtype=t.dtype, pin_memory=CUDA)
                h.host.copy_(t, non_blocking=True)
            if self.side is not None:
                t.record_stream(self.side)
            self.pending[layer].append(h)
            return h

        def unpack(h):
            if not isinstance(h, _Offloaded):
                return h
            if h.gpu is None:
                self._fetch(h.layer)
                self._fetch(h.layer - 1)
            if self.side is not None:
                main = torch.cuda.current_stream()
                main.wait_stream(self.side)
                h.gpu.record_stream(main)
            return h.gpu

        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def _fetch(self, layer):
        with _on(self.side):
            for h in self.pending.pop(layer, []):
                h.gpu = h.host.to(DEV, non_blocking=True)
                h.host = None


_SAVED_OPS = {getattr(torch.ops.aten, name).default for name in (
    "mm", "addmm", "bmm", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu") if hasattr(torch.ops.aten, name)}


def _keep_matmuls(ctx, op, *args, **kwargs):
    """torchtitan's selective-checkpoint policy: matmul and attention outputs saved, every
    other op recomputed in backward."""
    return CheckpointPolicy.MUST_SAVE if op in _SAVED_OPS else CheckpointPolicy.PREFER_RECOMPUTE


# GPU peak about 17 GiB: 0.40B parameters with gradients and fused AdamW 6 GiB; at 12,288
# tokens a kept layer's saved tensors (fp32 residual and RMSNorm temporaries, bf16 q, k, v,
# rotary copies, repeated k and v, attention output, SwiGLU's four 4,096-wide tensors) about
# 1.1 GiB, 4 of them; 5 selectively checkpointed layers about 0.4 GiB each; 3 offloaded
# layers on the GPU only while their copies run, and again one or two at a time in backward;
# the logits 12,288 x 32,000 (bf16, fp32, log-softmax, gradient: up to 4 GiB around the
# loss). Time: about 36 TFLOP a step (0.1-0.15 s) and some 3.3 GiB copied each way through
# pinned memory (0.15-0.3 s, the copies back on the backward's path); the first step pins
# 3.3 GiB of host memory: 16 steps, some 6-10 s.
def selective_ckpt_offload_train(steps):
    """A 12-layer Llama-style model (d 1,536, 12 query heads over 4 key/value heads, SwiGLU
    4,096, vocab 32,000, untied head) trained with three activation policies at once, as
    memory-tight fine-tuning recipes mix them: layers 0-2 offload their saved activations to
    pinned host memory on a side stream (saved-tensor hooks; copies back on that stream a
    layer ahead in backward), layers 3-7 are checkpointed non-reentrantly with a selective
    policy (matmul and attention outputs saved, the rest recomputed), layers 8-11 keep
    everything. 12,288 tokens a step as 6 x 2,048, 3 x 4,096 or 12 x 1,024; bf16 autocast,
    fused AdamW, clipping."""
    torch.manual_seed(284)
    vocab, d, layers, heads, kvh, hidden, shapes, off, sac, min_bytes = (
        (32000, 1536, 12, 12, 4, 4096, ((6, 2048), (3, 4096), (12, 1024)), 3, 5, 1 << 20)
        if CUDA else (100, 32, 4, 4, 2, 64, ((2, 16), (1, 32)), 1, 2, 1024))
    with torch.device(DEV):
        emb = nn.Embedding(vocab, d)
        blocks = nn.ModuleList(LlamaBlock(d, heads, kvh, hidden) for _ in range(layers))
        norm, head = RmsNorm(d), nn.Linear(d, vocab, bias=False)
    params = [*emb.parameters(), *blocks.parameters(), *norm.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, **({"fused": True} if CUDA else {}))
    angles = _angles(max(t for _, t in shapes), d // heads)
    cos, sin = angles.cos(), angles.sin()
    gen, amp = _generator(284), _amp(torch.bfloat16)
    offloader = _Offloader(_stream(), min_bytes)
    policy = functools.partial(create_selective_checkpoint_contexts, _keep_matmuls)
    for _ in range(steps):
        b, t = _pick(gen, shapes)
        ids = torch.randint(0, vocab, (b, t + 1), device=DEV)
        with torch.autocast(**amp):
            x = emb(ids[:, :-1])
            for i, blk in enumerate(blocks):
                if i < off:
                    with offloader.hooks(i):
                        x = blk(x, cos[:t], sin[:t])
                elif i < off + sac:
                    x = checkpoint(blk, x, cos[:t], sin[:t], use_reentrant=False,
                                   context_fn=policy)
                else:
                    x = blk(x, cos[:t], sin[:t])
            logits = head(norm(x))
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        del x, logits
        _clip_step(opt, params, loss)
        del ids, loss
    if CUDA:
        torch.cuda.current_stream().wait_stream(offloader.side)


# ----------------------------------------------------- Net2Net, a model grown twice

# Which axes of a Gpt parameter (and of its Adam moments) run over the width ("d"), three
# widths ("3d": q, k, v), the MLP's width ("f"), and whether each is an input axis, which
# Net2WiderNet divides by the copy counts.
_GPT_AXES = {
    "tok.weight": ((1, "d", False),), "pos.weight": ((1, "d", False),),
    "ln1.weight": ((0, "d", False),), "ln1.bias": ((0, "d", False),),
    "ln2.weight": ((0, "d", False),), "ln2.bias": ((0, "d", False),),
    "ln.weight": ((0, "d", False),), "ln.bias": ((0, "d", False),),
    "qkv.weight": ((0, "3d", False), (1, "d", True)), "qkv.bias": ((0, "3d", False),),
    "proj.weight": ((0, "d", False), (1, "d", True)), "proj.bias": ((0, "d", False),),
    "fc1.weight": ((0, "f", False), (1, "d", True)), "fc1.bias": ((0, "f", False),),
    "fc2.weight": ((0, "d", False), (1, "f", True)), "fc2.bias": ((0, "d", False),),
    "head.weight": ((1, "d", True),),
}


def _wider_map(old, new, gen):
    """Net2WiderNet's mapping: new unit j copies old unit g[j] (the first `old` themselves,
    the rest drawn at random), and how many copies each old unit has."""
    g = torch.cat([torch.arange(old), torch.randint(0, old, (new - old,), generator=gen)])
    return g.to(DEV), torch.bincount(g, minlength=old).float().to(DEV)


def _widen(t, axes, maps, power=1):
    for axis, kind, is_input in axes:
        g, count = maps[kind]
        t = t.index_select(axis, g)
        if is_input:
            shape = [1] * t.dim()
            shape[axis] = -1
            t = t / count[g].view(shape) ** power
    return t


def _grow(old, opt, d, layers, heads, vocab, ctx, gen, lr):
    """A wider and deeper copy of the Gpt `old` (new layer j from old layer j mod depth, as
    stacking does) with every parameter and Adam moment mapped across, a little noise on the
    matrices to break the copies' symmetry; the new model and its AdamW."""
    d0, depth = old.ln.weight.numel(), len(old.blocks)
    gd, gf = _wider_map(d0, d, gen), _wider_map(4 * d0, 4 * d, gen)
    g3 = (torch.cat([gd[0] + i * d0 for i in range(3)]), gd[1].repeat(3))
    maps = {"d": gd, "f": gf, "3d": g3}
    with torch.device(DEV):
        new = Gpt(vocab, d, layers, heads, ctx)
    new_opt = torch.optim.AdamW(new.parameters(), lr=lr, weight_decay=0.1)
    source = dict(old.named_parameters())
    with torch.no_grad():
        for name, p in new.named_parameters():
            parts = name.split(".")
            if parts[0] == "blocks":
                parts[1] = str(int(parts[1]) % depth)
            q = source[".".join(parts)]
            axes = _GPT_AXES[".".join(parts[-2:])]
            p.copy_(_widen(q, axes, maps))
            if p.dim() > 1:
                p.add_(torch.randn_like(p) * (0.01 * p.std()))
            state = opt.state.get(q)
            if state:
                new_opt.state[p] = {"step": state["step"].clone(),
                                    "exp_avg": _widen(state["exp_avg"], axes, maps),
                                    "exp_avg_sq": _widen(state["exp_avg_sq"], axes, maps, 2)}
    return new, new_opt


# GPU peak about 19 GiB, in the last stage: 369M parameters (d 1,024, 24 layers, untied
# embeddings) with gradients and AdamW 5.5 GiB; 8 x 1,024 tokens of fp16 activations, about
# 0.42 GiB a layer (10 GiB); the logits 8,192 x 32,000 (fp16, fp32, log-softmax, gradient:
# some 3 GiB). At each growth the old model and moments (0.8 or 2 GiB) live beside the new
# ones. Time: stages of about 2, 7 and 18 TFLOP a step (20-80 ms with the eager overhead of
# 6-24 layers); 90 steps, some 4-6 s.
def net2net_growing_gpt_train(steps):
    """A GPT grown twice during training, as progressive-growth recipes (Net2Net, stacking,
    bert2BERT) do: a third of the steps at d 512 and 6 layers (16 x 512 tokens), then widened
    by Net2WiderNet's copy-and-divide mapping to d 768 and deepened to 12 layers by stacking
    (12 x 1,024 tokens), then to d 1,024 and 24 layers (8 x 1,024 tokens). Every parameter
    and both Adam moments are rebuilt at the new size and the old ones freed; fp16 autocast
    with a gradient scaler carried across the growths, AdamW, clipping; vocab 32,000."""
    torch.manual_seed(285)
    vocab, ctx, stages = (
        (32000, 1024, ((512, 6, 8, (16, 512)), (768, 12, 12, (12, 1024)),
                       (1024, 24, 16, (8, 1024)))) if CUDA
        else (100, 16, ((16, 1, 2, (2, 8)), (24, 2, 3, (2, 16)), (32, 4, 4, (1, 16)))))
    lr, gen = 3e-4, _generator(285)
    d, layers, heads, _ = stages[0]
    with torch.device(DEV):
        model = Gpt(vocab, d, layers, heads, ctx)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    scaler = torch.amp.GradScaler(DEV.type, enabled=CUDA)
    amp, stage = _amp(torch.float16), 0
    for step in range(steps):
        now = min(len(stages) - 1, step * len(stages) // steps)
        if now != stage:
            stage = now
            d, layers, heads, _ = stages[stage]
            model, opt = _grow(model, opt, d, layers, heads, vocab, ctx, gen, lr)
        b, t = stages[stage][3]
        ids = torch.randint(0, vocab, (b, t + 1), device=DEV)
        with torch.autocast(**amp):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        del logits
        _clip_step(opt, list(model.parameters()), loss, scaler)
        del ids, loss


# ------------------------------------------------------------ SWAG, a weight posterior

class _Swag:
    """SWAG's moments as the reference implementation (Maddox et al. 2019) keeps them, per
    parameter: a running mean, a running mean of squares, and a matrix of the last K
    deviations from the mean, grown by concatenation (its oldest row dropped once full)."""

    def __init__(self, model, k):
        self.params = list(model.parameters())
        self.mean = [torch.zeros_like(p) for p in self.params]
        self.sq = [torch.zeros_like(p) for p in self.params]
        self.dev = [p.new_zeros(0, p.numel()) for p in self.params]
        self.k, self.n = k, 0

    @torch.no_grad()
    def collect(self):
        n = self.n
        for i, p in enumerate(self.params):
            self.mean[i].mul_(n / (n + 1)).add_(p / (n + 1))
            self.sq[i].mul_(n / (n + 1)).add_(p * p / (n + 1))
            old = self.dev[i][1:] if self.dev[i].shape[0] + 1 > self.k else self.dev[i]
            self.dev[i] = torch.cat([old, (p - self.mean[i]).reshape(1, -1)])
        self.n += 1

    @torch.no_grad()
    def sample(self, into, scale=0.5, cov=True):
        """Weights for `into`: the mean plus scale^1/2 (diagonal sample + low-rank sample), the
        low-rank part from the deviations flattened into one (K, P) matrix."""
        mean = torch.cat([m.flatten() for m in self.mean])
        var = (torch.cat([s.flatten() for s in self.sq]) - mean ** 2).clamp_min(1e-30)
        rand = var.sqrt() * torch.randn_like(var)
        if cov:
            dev = torch.cat(self.dev, 1)
            rand += dev.t() @ torch.randn(dev.shape[0], device=DEV) / max(1, self.k - 1) ** 0.5
            del dev
        sample = mean + scale ** 0.5 * rand
        for p, w in zip(into.parameters(), sample.split([p.numel() for p in self.params])):
            p.copy_(w.view_as(p))


def _bn_update(model, batches, amp):
    """BatchNorm statistics recomputed from scratch (cumulative averages) over `batches`."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad(), torch.autocast(**amp):
        for x in batches:
            model(x)
    for m in bns:
        m.momentum = 0.1
    model.eval()


# GPU peak about 7.5 GiB: WRN-26-10 has 36.5M parameters (with its gradients, SGD momentum,
# the SWAG mean and mean of squares and the second network, 0.8 GiB); the deviation matrices
# 20 x 36.5M fp32 (2.7 GiB) once full; a draw flattens them into one (20, P) copy (2.7 GiB)
# beside P-sized temporaries (6-8 x 146 MiB); training activations of 128 images at 32 x 32
# (160-640 channels, fp16, about 2-3 GiB). Time: about 3.7 TFLOP a step (25-40 ms); 35
# collections (161 parameters each); three evaluations of 3 draws and the mean, each
# BatchNorm-updated over 4 batches and evaluated on 512 images: some 5-8 s.
def swag_resnet_posterior_train(steps):
    """SWAG (stochastic weight averaging Gaussian) on a wide ResNet (WRN-26-10, 100 classes,
    32 x 32 images, batch 128, CutMix, channels_last, fp16 autocast with a gradient scaler,
    SGD with Nesterov momentum, cosine learning rate to the SWA rate at 30% of the run): from
    then on the weights are collected every other step into SWAG's per-parameter moments and
    deviation matrices (K = 20, grown by concatenation, then slid); every 25th step three
    weight samples and the SWA mean are loaded into a second network, its BatchNorm
    statistics recomputed over four batches, and evaluated on 512 held-out images, the
    samples' probabilities averaged (Bayesian model averaging)."""
    torch.manual_seed(286)
    width, batch, size, k, samples, swa_frac, every, each, evals, held_n = (
        (10, 128, 32, 20, 3, 0.3, 2, 25, 2, 256) if CUDA else (1, 4, 16, 3, 2, 0.0, 1, 2, 1, 8))
    with torch.device(DEV):
        model = _wide_resnet(width).to(memory_format=torch.channels_last)
    sampled = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4,
                          nesterov=True)
    scaler = torch.amp.GradScaler(DEV.type, enabled=CUDA)
    swag, amp, gen = _Swag(model, k), _amp(torch.float16), _generator(286)
    swa_start, params = int(swa_frac * steps), list(model.parameters())
    held = [torch.randn(held_n, 3, size, size, device=DEV).to(memory_format=torch.channels_last)
            for _ in range(evals)]
    held_y = torch.randint(0, 100, (evals * held_n,), device=DEV)

    def images(n):
        return torch.randn(n, 3, size, size, device=DEV).to(memory_format=torch.channels_last)

    for step in range(steps):
        lr = (0.02 + 0.04 * (1 + math.cos(math.pi * step / swa_start)) if step < swa_start
              else 0.02)
        for group in opt.param_groups:
            group["lr"] = lr
        model.train()
        x, y = images(batch), torch.randint(0, 100, (batch,), device=DEV)
        lam = float(torch.rand(1, generator=gen))
        cut = int(size * math.sqrt(1 - lam))
        cy, cx = _randint(gen, 0, size - cut), _randint(gen, 0, size - cut)
        x[:, :, cy:cy + cut, cx:cx + cut] = x.flip(0)[:, :, cy:cy + cut, cx:cx + cut]
        lam = 1 - cut * cut / (size * size)
        target = lam * F.one_hot(y, 100).float() + (1 - lam) * F.one_hot(y.flip(0), 100).float()
        with torch.autocast(**amp):
            loss = F.cross_entropy(model(x), target)
        _clip_step(opt, params, loss, scaler)
        del x, y, target, loss
        if step >= swa_start and (step - swa_start) % every == 0:
            swag.collect()
        if swag.n >= 2 and step % each == each - 1:
            probs = 0
            for s in range(samples + 1):  # the draws, then the SWA mean (no variance)
                swag.sample(sampled, scale=0.5 if s < samples else 0.0, cov=s < samples)
                _bn_update(sampled, [images(batch) for _ in range(4)], amp)
                with torch.no_grad(), torch.autocast(**amp):
                    p = torch.cat([sampled(h).float().softmax(-1) for h in held])
                if s < samples:
                    probs = probs + p / samples
                else:
                    (p.argmax(-1) == held_y).float().mean().item()
                del p
            F.nll_loss(probs.clamp_min(1e-12).log(), held_y).item()
            del probs


# ------------------------------------------ ANCE, hard negatives from a GPU FIFO index

def _masked_embed(tower, ids, lens):
    """A twentieth-corpus text tower over padded ids: the valid tokens' mean, projected and
    normalised (fp32)."""
    pad = torch.arange(ids.shape[1], device=DEV) >= lens[:, None]
    h = tower["enc"](tower["emb"](ids), src_key_padding_mask=pad)
    h = (h * (~pad)[..., None]).sum(1) / lens[:, None].clamp_min(1)
    return F.normalize(tower["out"](h).float(), dim=-1)


# GPU peak about 15 GiB: two towers of 66.5M parameters with gradients and AdamW 2 GiB, the
# stale copy 0.25 GiB; the negatives' pass over up to 256 passages x 192 tokens (6 post-norm
# layers of d 768 with their padding masks in bf16, about 10 GiB kept for backward) and the
# positives' 64 x 192 (2.5 GiB); the FIFO index 24,576 x 768 fp16 and its token ids 24,576 x
# 192 int32 (36 and 18 MiB, twice while a concatenation copies them); the side stream's
# encoding of 256 passages at a time. Time: some 17 TFLOP of training and 8 of refresh
# encoding a step (0.1-0.15 s, the refresh overlapping on its stream): 60 steps, some 6-9 s.
def ance_fifo_hard_negative_train(steps):
    """ANCE-style dense retrieval training (Xiong et al. 2021): a query tower and a passage
    tower (6-layer transformers, d 768, vocab 30,522, mean-pooled over padding masks); each
    step 64 queries of 16-48 tokens and their positive passages of 64-192, plus hard
    negatives mined from an in-GPU FIFO index of passage embeddings: every query's top 4
    (fp16 scores against the whole index), made unique (a data-dependent count), their
    token ids gathered from the index's store and re-encoded by the passage tower with
    gradients. The index grows by concatenation (this step's positives and 512 new passages
    a step encoded by a stale copy of the passage tower on a side stream, one step ahead,
    handed over with record_stream) until 24,576 rows, then wraps, written in place. The
    stale copy is refreshed every 20 steps. InfoNCE at temperature 0.05 over positives and
    negatives, bf16 autocast, AdamW, clipping. Three towers in one process."""
    torch.manual_seed(287)
    vocab, d, layers, heads, batch, qlens, plens, refresh, micro, capacity, hard, every = (
        (30522, 768, 6, 12, 64, (16, 48), (64, 192), 512, 256, 24576, 4, 20) if CUDA
        else (200, 32, 1, 4, 4, (3, 6), (6, 12), 8, 4, 20, 2, 2))
    qt, pt = _text_tower(vocab, d, layers, heads), _text_tower(vocab, d, layers, heads)
    stale = copy.deepcopy(pt).eval().requires_grad_(False)
    params = [*qt.parameters(), *pt.parameters()]
    opt = torch.optim.AdamW(params, lr=5e-5, weight_decay=0.01)
    gen, side, amp = _generator(287), _stream(), _amp(torch.bfloat16)
    main = torch.cuda.current_stream() if CUDA else None
    width = plens[1]
    index = torch.empty(0, d, dtype=torch.float16, device=DEV)
    store = torch.empty(0, width, dtype=torch.int32, device=DEV)
    store_lens = torch.empty(0, dtype=torch.long, device=DEV)
    at = 0  # where the ring writes next once full

    def lengths(n, lo_hi):
        return torch.randint(lo_hi[0], lo_hi[1] + 1, (n,), generator=gen)

    def encode_new():  # the stale tower over `refresh` new passages, on the side stream
        host = lengths(refresh, plens)
        if side is not None:
            side.wait_stream(main)
        with _on(side), torch.no_grad(), torch.autocast(**amp):
            ids = torch.randint(0, vocab, (refresh, width), dtype=torch.int32, device=DEV)
            lens = host.to(DEV, non_blocking=True)
            embs = torch.cat([
                _masked_embed(stale, ids[i:i + micro, :int(host[i:i + micro].max())],
                              lens[i:i + micro]).half() for i in range(0, refresh, micro)])
        return embs, ids, lens

    def push(buf, rows, room):  # grown by concatenation up to capacity, then a ring
        if room > 0:
            buf, rows = torch.cat([buf, rows[:room]]), rows[room:]
        if len(rows):
            buf.index_copy_(0, (at + torch.arange(len(rows), device=DEV)) % capacity, rows)
        return buf

    pending = encode_new()
    for step in range(steps):
        embs, ids, lens = pending
        _hand_over([embs, ids, lens], side)
        ql, pl = lengths(batch, qlens), lengths(batch, plens)
        q = torch.randint(0, vocab, (batch, int(ql.max())), device=DEV)
        p = torch.randint(0, vocab, (batch, width), dtype=torch.int32, device=DEV)
        pmax, ql, pl = int(pl.max()), ql.to(DEV), pl.to(DEV)
        with torch.autocast(**amp):
            qe = _masked_embed(qt, q, ql)
            cands = [_masked_embed(pt, p[:, :pmax], pl)]
            if len(index) >= hard:
                with torch.no_grad():
                    scores = qe.detach().half() @ index.T
                    u = scores.float().topk(hard, 1).indices.flatten().unique()
                    nl = store_lens[u]
                    negs = store[u, :int(nl.max())]
                    del scores
                cands.append(_masked_embed(pt, negs, nl))
                del u, nl, negs
            logits = qe @ torch.cat(cands).T / 0.05
        loss = F.cross_entropy(logits.float(), torch.arange(batch, device=DEV))
        _clip_step(opt, params, loss)
        with torch.no_grad():  # the FIFO: this step's positives, then the refreshed passages
            room, n = capacity - len(index), batch + refresh
            index = push(index, torch.cat([cands[0].detach().half(), embs]), room)
            store = push(store, torch.cat([p, ids]), room)
            store_lens = push(store_lens, torch.cat([pl, lens]), room)
            at = (at + max(0, n - max(room, 0))) % capacity
        del q, p, ql, pl, qe, cands, logits, loss, embs, ids, lens, pending
        if step % every == every - 1:  # the stale tower refreshed once its stream is done
            if CUDA:
                main.wait_stream(side)
            stale.load_state_dict(pt.state_dict())
        pending = encode_new()
    if CUDA:
        main.wait_stream(side)
    del pending


# ------------------------------------------------- a temporal graph network (TGN)

class _Tgn(nn.Module):
    """TGN (Rossi et al. 2020): a time encoding cos(w t + b), a GRU memory updater over raw
    messages (both memories, the edge's features, the time since the last update), one
    layer of temporal attention over each node's most recent neighbours, a link decoder."""

    def __init__(self, mem, edge, tdim, emb, heads):
        super().__init__()
        self.time = nn.Linear(1, tdim)
        with torch.no_grad():
            self.time.weight.copy_((1 / 10 ** torch.linspace(0, 9, tdim))[:, None])
            self.time.bias.zero_()
        self.gru = nn.GRUCell(2 * mem + edge + tdim, mem)
        self.q = nn.Linear(mem + tdim, emb)
        self.kv = nn.Linear(mem + edge + tdim, 2 * emb)
        self.out = nn.Sequential(nn.Linear(emb + mem, emb), nn.ReLU(), nn.Linear(emb, emb))
        self.link = nn.Sequential(nn.Linear(2 * emb, emb), nn.ReLU(), nn.Linear(emb, 1))
        self.heads = heads

    def enc(self, dt):
        return torch.cos(self.time(dt[..., None]))


# GPU peak about 5.6 GiB: the tables of 1M nodes: memory (172 fp32, 0.64 GiB), last raw
# messages (516 fp32, 1.9 GiB), their times, last-update times and flags, the neighbour table
# (10 ids, edge ids, times: 0.19 GiB); the event stream (300k events, edge features 172 fp32,
# 0.2 GiB); around each evaluation a clone of the memory and message tables (2.6 GiB). A
# batch's tensors are small (up to 3,000 queries x 10 neighbours x 444). Time: some 250
# kernels a batch with a few host syncs (unique, lengths), 4-7 ms: 500 batches and five
# evaluations of 8 x 2,000 events, some 4-6 s.
def tgn_memory_link_train(steps):
    """A temporal graph network trained for link prediction on a stream of user-item events
    (100k users, 900k items, popularity skewed; 172 edge features): each step takes the next
    200-1,000 events (a new size each step) with one random negative item per event; the
    nodes touched and their recorded neighbours are made unique (data-dependent counts), their
    memories updated by the GRU from their stored last messages (with gradients), the
    events' endpoints embedded by attention over their 10 most recent neighbours, BCE on the
    positive and negative links, Adam, clipping; then the memories are written back into the
    node table (detached), the batch's raw messages stored per node (last wins) and the
    neighbour table merged with the new events by top-k on event ids (as PyG's
    LastNeighborLoader does). Every 100 steps the memory and message tables are cloned, 8
    evaluation batches of 2,000 held-out events run without gradients, and the tables are
    restored from the clones."""
    torch.manual_seed(288)
    users, items, mem, edge, tdim, emb, heads, nbrs, train_events, eval_events, sizes, every, \
        eval_batch, eval_batches = (
            (100_000, 900_000, 172, 172, 100, 100, 2, 10, 280_000, 20_000,
             (200, 400, 600, 1000), 100, 2000, 8) if CUDA
            else (50, 200, 8, 8, 4, 8, 2, 4, 400, 100, (10, 20), 2, 20, 2))
    nodes, total = users + items, train_events + eval_events
    gen = _generator(288)
    src = (users * torch.rand(total, generator=gen) ** 2).long().to(DEV)
    dst = (users + items * torch.rand(total, generator=gen) ** 3).long().to(DEV)
    ts = torch.cumsum(2 * torch.rand(total, generator=gen), 0).to(DEV)
    feats = torch.randn(total, edge, device=DEV)
    with torch.device(DEV):
        model = _Tgn(mem, edge, tdim, emb, heads)
        memory, last = torch.zeros(nodes, mem), torch.zeros(nodes)
        msg, msg_t = torch.zeros(nodes, 2 * mem + edge), torch.zeros(nodes)
        has_msg = torch.zeros(nodes, dtype=torch.bool)
        nbr = torch.full((nodes, nbrs), -1, dtype=torch.long)
        nbr_e = torch.full((nodes, nbrs), -1, dtype=torch.long)
        nbr_t = torch.zeros(nodes, nbrs)
        assoc = torch.zeros(nodes, dtype=torch.long)
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=1e-4)
    dh = emb // heads

    def batch_loss(lo, hi):
        s, d_, t, e = src[lo:hi], dst[lo:hi], ts[lo:hi], torch.arange(lo, hi, device=DEV)
        neg = torch.randint(users, nodes, (hi - lo,), device=DEV)
        qn, tq = torch.cat([s, d_, neg]), t.repeat(3)
        touched = qn.unique()
        around = nbr[touched]
        n_all = torch.cat([touched, around[around >= 0]]).unique()
        assoc[n_all] = torch.arange(len(n_all), device=DEV)
        has = has_msg[n_all]
        old = memory[n_all]
        inp = torch.cat([msg[n_all], model.enc(msg_t[n_all] - last[n_all])], 1)
        mem_all = torch.where(has[:, None], model.gru(inp, old), old)
        nq = nbr[qn]
        valid = nq >= 0
        k_mem = mem_all[torch.where(valid, assoc[nq.clamp_min(0)], 0)]
        k_in = torch.cat([k_mem, feats[nbr_e[qn].clamp_min(0)],
                          model.enc(tq[:, None] - nbr_t[qn])], -1)
        k, v = model.kv(k_in).view(len(qn), nbrs, 2, heads, dh).permute(2, 0, 3, 1, 4)
        own = mem_all[assoc[qn]]
        q = model.q(torch.cat([own, model.enc(torch.zeros_like(tq))], -1))
        bias = torch.where(valid, 0.0, -1e4)[:, None, None, :]
        att = F.scaled_dot_product_attention(q.view(-1, heads, 1, dh), k, v, attn_mask=bias)
        h = model.out(torch.cat([att.reshape(len(qn), emb), own], -1))
        hs, hd, hn = h.chunk(3)
        pos, negs = model.link(torch.cat([hs, hd], -1)), model.link(torch.cat([hs, hn], -1))
        loss = (F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos))
                + F.binary_cross_entropy_with_logits(negs, torch.zeros_like(negs)))
        return loss, (s, d_, t, e, n_all, has, mem_all)

    @torch.no_grad()
    def write_back(s, d_, t, e, n_all, has, mem_all, insert):
        mem_all = mem_all.detach()
        memory[n_all] = mem_all
        last[n_all] = torch.where(has, msg_t[n_all], last[n_all])
        has_msg[n_all] = False
        ms, md, ef = mem_all[assoc[s]], mem_all[assoc[d_]], feats[e]
        msg[s], msg[d_] = torch.cat([ms, md, ef], 1), torch.cat([md, ms, ef], 1)
        msg_t[s], msg_t[d_] = t, t
        has_msg[s], has_msg[d_] = True, True
        if not insert:
            return
        # PyG's LastNeighborLoader.insert: the new interactions in a dense (node, slot) form,
        # merged with the table's by the latest event ids.
        seen_n, seen_by = torch.cat([d_, s]).sort()
        other, eid, et = torch.cat([s, d_])[seen_by], e.repeat(2)[seen_by], t.repeat(2)[seen_by]
        n_id = seen_n.unique()
        assoc[n_id] = torch.arange(len(n_id), device=DEV)
        dense = torch.arange(len(seen_n), device=DEV) % nbrs + assoc[seen_n] * nbrs
        new_e = torch.full((len(n_id) * nbrs,), -1, dtype=torch.long, device=DEV)
        new_n, new_t = torch.full_like(new_e, -1), torch.zeros(len(n_id) * nbrs, device=DEV)
        new_e[dense], new_n[dense], new_t[dense] = eid, other, et
        all_e = torch.cat([nbr_e[n_id], new_e.view(-1, nbrs)], 1)
        all_n = torch.cat([nbr[n_id], new_n.view(-1, nbrs)], 1)
        all_t = torch.cat([nbr_t[n_id], new_t.view(-1, nbrs)], 1)
        top, order = all_e.topk(nbrs, 1)
        nbr_e[n_id], nbr[n_id], nbr_t[n_id] = top, all_n.gather(1, order), all_t.gather(1, order)

    cursor = 0
    for step in range(steps):
        n = _pick(gen, sizes)
        if cursor + n > train_events:
            cursor = 0
        loss, rec = batch_loss(cursor, cursor + n)
        _clip_step(opt, params, loss)
        write_back(*rec, insert=True)
        cursor += n
        del loss, rec
        if step % every == every - 1:
            backup = [x.clone() for x in (memory, last, msg, msg_t, has_msg)]
            model.eval()
            with torch.no_grad():
                for j in range(eval_batches):
                    lo = train_events + (j * eval_batch) % (eval_events - eval_batch + 1)
                    loss, rec = batch_loss(lo, lo + eval_batch)
                    write_back(*rec, insert=False)
                    loss.item()
                    del loss, rec
            model.train()
            for x, b in zip((memory, last, msg, msg_t, has_msg), backup):
                x.copy_(b)
            del backup


WORKLOADS = {
    "switch_moe_capacity_drop_train": (switch_moe_capacity_drop_train, 48),
    "flash_decode_split_kv_serve": (flash_decode_split_kv_serve, 8),
    "l2o_lstm_optimizer_meta_train": (l2o_lstm_optimizer_meta_train, 40),
    "selective_ckpt_offload_train": (selective_ckpt_offload_train, 16),
    "net2net_growing_gpt_train": (net2net_growing_gpt_train, 90),
    "swag_resnet_posterior_train": (swag_resnet_posterior_train, 100),
    "ance_fifo_hard_negative_train": (ance_fifo_hard_negative_train, 60),
    "tgn_memory_link_train": (tgn_memory_link_train, 500),
}
