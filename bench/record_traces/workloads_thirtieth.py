"""The thirtieth corpus: eight workloads, held out from every change to the allocator until
recorded. Same conventions as workloads.py: `run(steps)` builds its models and data on DEV and
runs `steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) the models and data
are smaller and the streams are left out (every periodic event still happens within two steps).

Each holds memory in a way the first twenty-nine corpora do not: network slimming applied during
training (every 50 steps the channels with the smallest batch-norm scales are cut out of a VGG:
every convolution, batch norm, the head and their momentum buffers rebuilt narrower, so the
parameters, the optimizer state and every activation shrink five times in a run); a DLRM whose
embedding tables live in host memory behind a GPU cache of rows (ColossalAI's cached embedding
bag: each batch's unique rows found on the GPU, the misses' rows gathered on the host and copied
in on a side stream one batch ahead, least recently used slots written back first; sparse
gradients of a data-dependent size, row-wise Adagrad on the cached rows; the whole cache flushed
to the host now and then); a Fusion-in-Decoder reader (10-100 retrieved passages of a question
encoded as a batch of their own, each encoder layer checkpointed, the decoder cross-attending to
all of them at once, so the memory's length is the passage count times their length); IVF-PQ
search written out in PyTorch (coarse k-means and product quantisation trained on the GPU, the
index a sorted flat array rebuilt at every add and removal, each request's candidates from the
probed inverted lists, a data-dependent count, scanned in chunks through lookup tables, re-ranked
on fp16 vectors kept in a store grown by half its size when full); AWD-LSTM (DropConnect on the
recurrent weights, so cuDNN copies every layer's weights into a new buffer each call; embedding
dropout, a masked copy of the whole tied table each step; a new truncation length each step; the
switch to averaged SGD, whose averages are swapped into the parameters for evaluation); top-k
distillation from a 128k-vocabulary teacher run one batch ahead on a side stream (its fp16 logits
and their fp32 log-sum-exp made and freed there chunk by chunk, only the top 64 log-probabilities
and ids handed over), the student's full log-softmax in fp32 beside them; a GraphCast-style
weather model (grid-to-mesh, multimesh and mesh-to-grid message passing over 0.2-0.5M edges)
trained autoregressively with a rollout length that grows from 1 to 8 steps over training, each
rollout step checkpointed; and DeepCache sampling (a Stable-Diffusion-sized U-Net whose deep
features are cached at every N-th denoising step and reused by the shallow branch alone in
between, N, the batch and the size new for each request).

Above each workload, a comment estimates its peak on the GPU (from the sizes; PyTorch's
allocated bytes) and its time on an H100.
"""
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from workloads import DEV, Gpt
# Earlier corpora's helpers: autocast, generators, choices, streams and hand-over (thirteenth);
# an integer in a closed range, fp16 on the GPU (fourteenth); a clipped optimizer step (twenty-
# eighth).
from workloads_thirteenth import CUDA, _amp, _generator, _hand_over, _on, _pick, _stream
from workloads_fourteenth import _half, _randint
from workloads_twentyeighth import _clip_step


# ----------------------------------------- network slimming, channels cut during training

_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512)


class _SlimVgg(nn.Module):
    """VGG-16 with batch norm for 32 x 32 images (max pooling after each stage but the last,
    global average pooling, one linear layer), every width times `scale`."""

    def __init__(self, scale, classes):
        super().__init__()
        self.convs, self.bns, self.pools = nn.ModuleList(), nn.ModuleList(), set()
        i = 3
        for w in _VGG16:
            if w == "M":
                self.pools.add(len(self.convs) - 1)
                continue
            w = int(w * scale)
            self.convs.append(nn.Conv2d(i, w, 3, padding=1, bias=False))
            self.bns.append(nn.BatchNorm2d(w))
            i = w
        self.fc = nn.Linear(i, classes)

    def forward(self, x):
        for k, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            x = F.relu(bn(conv(x)))
            if k in self.pools:
                x = F.max_pool2d(x, 2)
        return self.fc(x.mean((2, 3)))


def _slim(model, opt, frac, floor, multiple, make_opt):
    """Network slimming's pruning: the fraction `frac` of all channels with the smallest |scale|
    (one threshold over every batch norm) removed, each layer keeping a multiple of `multiple`,
    at least `floor`; every convolution, batch norm, the head and their momentum buffers rebuilt
    at the new widths (new tensors, the old ones freed with the old optimizer). The new one."""
    with torch.no_grad():
        gammas = torch.cat([bn.weight.abs() for bn in model.bns])
        thr = gammas.kthvalue(max(1, int(frac * gammas.numel()))).values
        keeps = []
        for bn in model.bns:
            g = bn.weight.abs()
            n = int((g > thr).sum())
            n = min(bn.num_features, max(floor, -(-n // multiple) * multiple))
            keeps.append(g.topk(n).indices.sort().values)
        del gammas, thr
    bufs = {p: opt.state.get(p, {}).get("momentum_buffer") for p in model.parameters()}
    moved = {}

    def cut(p, rows, cols=None):
        def take(t):
            t = t.detach()
            t = t[rows] if rows is not None else t
            t = t[:, cols] if cols is not None else t
            return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t.clone()
        q = nn.Parameter(take(p))
        if bufs.get(p) is not None:
            moved[q] = take(bufs[p])
        return q

    with torch.no_grad():
        prev = None
        for conv, bn, keep in zip(model.convs, model.bns, keeps):
            conv.weight = cut(conv.weight, keep, prev)
            conv.out_channels, conv.in_channels = conv.weight.shape[:2]
            bn.weight, bn.bias = cut(bn.weight, keep), cut(bn.bias, keep)
            bn.running_mean = bn.running_mean[keep].clone()
            bn.running_var = bn.running_var[keep].clone()
            bn.num_features = len(keep)
            prev = keep
        model.fc.weight = cut(model.fc.weight, None, prev)
        model.fc.in_features = len(prev)
        if bufs.get(model.fc.bias) is not None:
            moved[model.fc.bias] = bufs[model.fc.bias]
    del bufs, opt
    new = make_opt()
    for p, b in moved.items():
        new.state[p]["momentum_buffer"] = b
    return new


# GPU peak about 2.5 GiB: VGG-16-BN at twice the widths (128-1,024 channels, 59M parameters:
# weights, gradients and momentum 0.7 GiB); a step's bf16 activations at batch 256 of 32 x 32
# (the first stage's 256 x 128 x 32 x 32 maps, 64 MiB each, about 1.2 GiB in all); an evaluation
# batch of 1,024 (maps of 0.25 GiB, freed as it goes); at a pruning, each tensor's cut copy and
# its momentum's beside the old. Time: about 1.9 TFLOP a step at first, a third of it after the
# last pruning (10-20 ms); 300 steps, 5 prunings and evaluations: some 5-9 s.
def slimming_channel_prune_train(steps):
    """Network slimming (Liu et al. 2017) applied gradually during training: a VGG-16 with batch
    norm at twice the usual widths (128-1,024 channels, 59M parameters) on 32 x 32 images of 100
    classes, batch 256, channels-last, bf16 autocast, SGD with Nesterov momentum, an L1 penalty
    on every batch norm's scale (its sign added to the gradient). Every 50 steps until step 250,
    the 20% of the remaining channels with the smallest |scale| (one threshold over the whole
    network) are removed: every convolution, batch norm, the head and their momentum buffers
    are rebuilt at the new widths (each layer a multiple of 8, at least 16), so parameters,
    optimizer state and every activation shrink five times during the run; after each pruning,
    an evaluation of 1,024 held-out images."""
    torch.manual_seed(301)
    scale, batch, size, classes, every, last, frac, floor, mult, held_n = (
        (2.0, 256, 32, 100, 50, 250, 0.2, 16, 8, 1024) if CUDA
        else (0.125, 4, 32, 10, 1, 2, 0.2, 2, 2, 8))
    with torch.device(DEV):
        model = _SlimVgg(scale, classes).to(memory_format=torch.channels_last)

    def make_opt():
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4,
                               nesterov=True)

    def images(n):
        return torch.randn(n, 3, size, size, device=DEV).contiguous(
            memory_format=torch.channels_last)

    opt, amp = make_opt(), _amp(torch.bfloat16)
    held = images(held_n)
    for step in range(steps):
        x, y = images(batch), torch.randint(0, classes, (batch,), device=DEV)
        with torch.autocast(**amp):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            for bn in model.bns:
                bn.weight.grad.add_(bn.weight.sign(), alpha=1e-4)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, loss
        if step % every == every - 1 and step < last:
            opt = _slim(model, opt, frac, floor, mult, make_opt)
            model.eval()
            with torch.no_grad(), torch.autocast(**amp):
                model(held).argmax(-1).cpu()
            model.train()


# -------------------------------------- DLRM with host-resident tables behind a GPU cache

class _CachedBag:
    """One table of a cached embedding bag (ColossalAI's CachedEmbeddingBag, FBGEMM's LXU cache):
    the whole table and its row-wise Adagrad sums in host memory, `slots` rows of both on the
    GPU, with the slot of every row (-1: not cached), the row in every slot and its last use."""

    def __init__(self, rows, dim, slots, block):
        self.host = torch.empty(rows, dim)
        for lo in range(0, rows, len(block)):
            n = min(len(block), rows - lo)
            self.host[lo:lo + n] = block[:n]
        self.hsum = torch.zeros(rows)
        self.weight = torch.zeros(slots, dim, device=DEV, requires_grad=True)
        self.sum = torch.zeros(slots, device=DEV)
        self.where = torch.full((rows,), -1, dtype=torch.int32, device=DEV)
        self.row_of = torch.full((slots,), -1, dtype=torch.long, device=DEV)
        self.used = torch.full((slots,), -1, dtype=torch.long, device=DEV)
        self.stage_w = torch.empty(slots, dim, pin_memory=CUDA)
        self.stage_s = torch.empty(slots, pin_memory=CUDA)

    def plan(self, ids):
        """(On the loader stream.) The batch's rows not cached, their rows and sums gathered on
        the host and copied in, and as many victim slots: the least recently used of those the
        batch does not read."""
        u = torch.unique(ids)
        s = self.where[u]
        cached = s >= 0
        hit, miss = s[cached].long(), u[~cached]
        score = self.used.clone()
        score[hit] = 1 << 62
        victims = score.topk(len(miss), largest=False).indices
        rows = miss.cpu()
        n = len(rows)
        torch.index_select(self.host, 0, rows, out=self.stage_w[:n])
        torch.index_select(self.hsum, 0, rows, out=self.stage_s[:n])
        w = self.stage_w[:n].to(DEV, non_blocking=True)
        sm = self.stage_s[:n].to(DEV, non_blocking=True)
        del u, s, cached, hit, score
        return [miss, victims, w, sm]

    def insert(self, plan, ids, tick):
        """The victims' rows written back to the host, the missed rows put in their slots; the
        batch's slots (every lookup), marked used."""
        miss, victims, w, sm = plan
        with torch.no_grad():
            old = self.row_of[victims]
            live = old >= 0
            gone, at = old[live], victims[live]
            if len(gone):
                back = gone.cpu()
                self.host.index_copy_(0, back, self.weight[at].cpu())
                self.hsum.index_copy_(0, back, self.sum[at].cpu())
                self.where[gone] = -1
            self.weight[victims] = w
            self.sum[victims] = sm
            self.row_of[victims] = miss
            self.where[miss] = victims.int()
            slots = self.where[ids].long()
            self.used[slots] = tick
        return slots

    def adagrad(self, lr, eps=1e-8):
        """Row-wise Adagrad on the rows the batch touched (the sparse gradient coalesced)."""
        g = self.weight.grad.coalesce()
        self.weight.grad = None
        idx, val = g.indices()[0], g.values()
        with torch.no_grad():
            self.sum.index_add_(0, idx, val.pow(2).mean(1))
            self.weight.index_add_(0, idx, val * (-lr / (self.sum[idx].sqrt() + eps))[:, None])

    def flush(self):
        """Every cached row and sum written back to the host (as a checkpoint does)."""
        with torch.no_grad():
            live = (self.row_of >= 0).nonzero()[:, 0]
            back = self.row_of[live].cpu()
            self.host.index_copy_(0, back, self.weight[live].cpu())
            self.hsum.index_copy_(0, back, self.sum[live].cpu())


def _mlp_stack(sizes, last_act=True):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_act or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class _Dlrm(nn.Module):
    """DLRM's dense part: a bottom MLP over the dense features, the pairwise dot products of it
    and the tables' pooled embeddings, a top MLP."""

    def __init__(self, dense, dim, tables, bottom, top):
        super().__init__()
        n = tables + 1
        self.bottom = _mlp_stack((dense, *bottom, dim))
        self.top = _mlp_stack((dim + n * (n - 1) // 2, *top, 1), last_act=False)
        self.register_buffer("pairs", torch.triu_indices(n, n, 1))

    def forward(self, dense, pooled):
        x = self.bottom(dense)
        z = torch.stack([x, *pooled], 1)
        inter = (z @ z.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([x, inter], 1))[:, 0]


# GPU peak about 1.5 GiB: 8 caches of 131,072 rows of 128 (64 MiB each, with their sums, slot
# maps of the 1M rows and slot tables); a batch's 300k lookups (the slots, the pooled 4,096 x
# 128 per table); the sparse gradients, one row per lookup (up to 100k x 128 fp32 a table, 50
# MiB) and their coalesced copies; the missed rows of the next batch copied in on the loader
# stream (up to 40k rows a table at first, 20 MiB, a few thousand after); a flush's gather of
# every cached row (64 MiB a table). Time: host-bound (ids made on the host, two syncs a table
# a step, rows gathered and written back on the host): some 30-50 ms a step; the host tables
# (4 GiB) filled first, about 1-2 s: 120 steps, some 5-8 s.
def cached_embedding_dlrm_train(steps):
    """DLRM (13 dense features, a bottom MLP 512-256-128, dot interactions, a top MLP 1,024-
    1,024-512-256-1, fp32; Adagrad) over 8 embedding tables of 1M rows of 128 kept in host
    memory, as ColossalAI's CachedEmbeddingBag and FBGEMM's LXU cache keep them: each table has
    a GPU cache of 131,072 rows with their row-wise Adagrad sums. Each step a batch of 4,096
    samples with bags of a random length per sample (means 1-24 by table; Zipf-like ids). One
    batch ahead, on a loader stream, its ids are copied in, made unique, looked up in the slot
    map; the missed rows go to the host, which gathers them (and their sums) into pinned
    staging, copied in; victims are the least recently used slots the batch does not read. The
    main stream then writes the victims' rows back to the host, puts the new rows in, pools
    every bag from the cache (`embedding_bag` with sparse gradients) and, after backward,
    applies row-wise Adagrad to the rows touched. Every 40 steps the caches are flushed to the
    host."""
    torch.manual_seed(302)
    rows, dim, slots, batch, pooling, every = (
        (1_000_000, 128, 131_072, 4096, (1, 2, 4, 6, 8, 12, 16, 24), 40) if CUDA
        else (2000, 8, 512, 16, (1, 2, 4, 8), 2))
    dense_n, bottom, top = (13, (512, 256), (1024, 1024, 512, 256)) if CUDA else (13, (16,), (16,))
    gen = _generator(302)
    block = torch.randn(min(rows, 65536), dim, generator=gen) * 0.01
    tables = [_CachedBag(rows, dim, slots, block.roll(7 * k, 0)) for k in range(len(pooling))]
    del block
    with torch.device(DEV):
        dlrm = _Dlrm(dense_n, dim, len(tables), bottom, top)
    opt = torch.optim.Adagrad(dlrm.parameters(), lr=0.01)
    side = _stream()
    main = torch.cuda.current_stream() if CUDA else None

    def pinned(t):
        return t.pin_memory() if CUDA else t

    def prepare(after):
        """The next batch made on the host, and on the loader stream its copies and plans."""
        bags = []
        for pf in pooling:
            lengths = torch.randint(1, 2 * pf + 1, (batch,), generator=gen)
            ids = (torch.rand(int(lengths.sum()), generator=gen) * math.log(rows)).exp().long()
            ids = ids.sub_(1).clamp_(0, rows - 1)
            offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
            bags.append((pinned(ids), pinned(offsets)))
        dense, labels = pinned(torch.randn(batch, dense_n, generator=gen)), \
            pinned(torch.randint(0, 2, (batch,), generator=gen).float())
        if after is not None:
            side.wait_event(after)
        elif side is not None:
            side.wait_stream(main)
        with _on(side):
            dev = [(i.to(DEV, non_blocking=True), o.to(DEV, non_blocking=True)) for i, o in bags]
            plans = [t.plan(i) for t, (i, _) in zip(tables, dev)]
            extra = (dense.to(DEV, non_blocking=True), labels.to(DEV, non_blocking=True))
        return dev, plans, extra

    pending = prepare(None)
    for step in range(steps):
        dev, plans, (dense, labels) = pending
        _hand_over([t for pair in dev for t in pair] + [t for p in plans for t in p]
                   + [dense, labels], side)
        slots = [t.insert(p, i, step) for t, p, (i, _) in zip(tables, plans, dev)]
        del plans
        inserted = None
        if CUDA:
            inserted = torch.cuda.Event()
            inserted.record()
        pooled = [F.embedding_bag(s, t.weight, o, mode="sum", sparse=True)
                  for t, s, (_, o) in zip(tables, slots, dev)]
        loss = F.binary_cross_entropy_with_logits(dlrm(dense, pooled), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        for t in tables:
            t.adagrad(0.01)
        del pooled, loss, slots, dev, dense, labels
        if step + 1 < steps:
            pending = prepare(inserted)
        if step % every == every - 1:
            for t in tables:
                t.flush()


# ----------------------------------------------------- Fusion-in-Decoder over many passages

class _FidReader(nn.Module):
    """Fusion-in-Decoder (Izacard and Grave 2021): each (question + passage) row encoded alone,
    the rows of a question concatenated into one memory that the decoder cross-attends to. Pre-
    norm layers, learned positions, the embedding tied to the output."""

    def __init__(self, vocab, d, heads, enc, dec, ctx, answer):
        super().__init__()
        kw = dict(d_model=d, nhead=heads, dim_feedforward=4 * d, dropout=0.1, activation="gelu",
                  batch_first=True, norm_first=True)
        self.emb, self.pos, self.dpos = (nn.Embedding(vocab, d), nn.Embedding(ctx, d),
                                         nn.Embedding(answer, d))
        self.enc = nn.ModuleList(nn.TransformerEncoderLayer(**kw) for _ in range(enc))
        self.dec = nn.ModuleList(nn.TransformerDecoderLayer(**kw) for _ in range(dec))
        self.enc_ln, self.dec_ln = nn.LayerNorm(d), nn.LayerNorm(d)

    def encode(self, ids, pad):
        """ids, pad (questions, passages, length): the memory (questions, passages x length, d)
        and its padding mask; every layer checkpointed in training."""
        b, p, t = ids.shape
        x = self.emb(ids.flatten(0, 1)) + self.pos(torch.arange(t, device=ids.device))
        pad = pad.flatten(0, 1)
        for layer in self.enc:
            if self.training and torch.is_grad_enabled():
                x = checkpoint(layer, x, None, pad, use_reentrant=False)
            else:
                x = layer(x, src_key_padding_mask=pad)
        return self.enc_ln(x).view(b, p * t, -1), pad.view(b, p * t)

    def decode(self, mem, mem_pad, tgt):
        t = tgt.shape[1]
        y = self.emb(tgt) + self.dpos(torch.arange(t, device=tgt.device))
        causal = nn.Transformer.generate_square_subsequent_mask(t, device=tgt.device)
        for layer in self.dec:
            y = layer(y, mem, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=mem_pad)
        return F.linear(self.dec_ln(y), self.emb.weight)


# GPU peak about 8 GiB: 223M parameters (12 + 12 layers of d 768 and a 32,128 vocabulary) with
# gradients and AdamW 3.6 GiB; up to 100 passages of 256 tokens (25,600): the 12 checkpointed
# encoder layers' fp32 inputs (0.1 GiB each, 1.2 GiB), one layer recomputed (about 0.7 GiB);
# every decoder layer's bf16 copy of the memory and its keys and values over the 25,600
# positions (about 0.12 GiB a layer, 1.4 GiB) and the memory's gradient. Time: about 1.7
# TFLOP of encoder forward for the average 10k tokens, four passes with recomputation (some
# 40-70 ms a step) and some 4-5k allocations a step (24 layers, their recomputation, AdamW's
# per-parameter temporaries); 40 steps and 2 evaluations (an encoding of 100 passages and 16
# tokens decoded over it): some 6-12 s.
def fid_reader_train(steps):
    """A Fusion-in-Decoder reader for open-domain question answering, FiD-base-sized: a 12-layer
    encoder and a 12-layer decoder (d 768, 12 heads, feed-forward 3,072, dropout 0.1, vocab
    32,128). Each step one question with 10, 25, 50, 75 or 100 retrieved passages (drawn each
    step), each row the question and a passage, 128, 192 or 256 tokens (drawn each step; every
    row's own length, padded): the encoder runs over the passages as a batch of rows (each layer
    checkpointed, as FiD does), the rows are concatenated into one memory of up to 25,600
    positions with its padding mask, and the decoder is trained on an answer of 8-32 tokens,
    cross-attending to all of it. bf16 autocast, AdamW, clipping. Every 20 steps an evaluation:
    100 passages of 256 encoded, 16 answer tokens decoded greedily (the decoder rerun over the
    prefix)."""
    torch.manual_seed(303)
    vocab, d, heads, enc, dec, passages, lengths, answers, every, gen_len = (
        (32128, 768, 12, 12, 12, (10, 25, 50, 75, 100), (128, 192, 256), (8, 32), 20, 16)
        if CUDA else (200, 32, 4, 2, 2, (2, 4), (8, 12), (2, 4), 2, 3))
    with torch.device(DEV):
        model = _FidReader(vocab, d, heads, enc, dec, max(lengths), max(answers[1], gen_len) + 1)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    gen, amp = _generator(303), _amp(torch.bfloat16)

    def rows(p, t):
        ids = torch.randint(1, vocab, (1, p, t), device=DEV)
        lens = torch.randint(t // 2, t + 1, (1, p, 1), device=DEV)
        return ids, torch.arange(t, device=DEV) >= lens

    for step in range(steps):
        p, t, a = _pick(gen, passages), _pick(gen, lengths), _randint(gen, *answers)
        ids, pad = rows(p, t)
        tgt = torch.randint(1, vocab, (1, a + 1), device=DEV)
        with torch.autocast(**amp):
            mem, mem_pad = model.encode(ids, pad)
            logits = model.decode(mem, mem_pad, tgt[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt[:, 1:].flatten())
        del mem, mem_pad, logits
        _clip_step(opt, params, loss)
        del ids, pad, tgt, loss
        if step % every == every - 1:
            model.eval()
            with torch.no_grad(), torch.autocast(**amp):
                ids, pad = rows(max(passages), max(lengths))
                mem, mem_pad = model.encode(ids, pad)
                out = torch.zeros(1, 1, dtype=torch.long, device=DEV)
                for _ in range(gen_len):
                    nxt = model.decode(mem, mem_pad, out)[:, -1].argmax(-1)
                    out = torch.cat([out, nxt[:, None]], 1)
                out.cpu()
                del ids, pad, mem, mem_pad, out
            model.train()


# ------------------------------------------------------------ IVF-PQ search, written out

def _assign(x, cents, chunk):
    """The nearest centroid of every row of x, by chunks of rows."""
    cn = cents.pow(2).sum(1)
    return torch.cat([(cn - 2 * x[i:i + chunk] @ cents.T).argmin(1)
                      for i in range(0, len(x), chunk)])


def _kmeans(x, k, iters, chunk):
    """Lloyd's k-means of x's rows into k centroids (started from k random rows)."""
    cents = x[torch.randperm(len(x), device=x.device)[:k]].clone()
    for _ in range(iters):
        a = _assign(x, cents, chunk)
        total = torch.zeros_like(cents).index_add_(0, a, x)
        cents = total / torch.bincount(a, minlength=k).clamp_min(1)[:, None]
        del a, total
    return cents


class _IvfPq:
    """An IVF-PQ index as FAISS builds one (L2, precomputed tables), held as flat arrays sorted by
    inverted list (codes, ids, list of each) with every list's size and offset, rebuilt at every
    add and removal; the vectors themselves kept in fp16 in a store grown by half when full, for
    re-ranking."""

    def __init__(self, coarse, pq, capacity, chunk):
        self.coarse, self.pq, self.chunk = coarse, pq, chunk
        self.nlist, (self.m, self.ksub, self.dsub) = len(coarse), pq.shape
        self.cn = coarse.pow(2).sum(1)
        # FAISS's precomputed term per list: ||pq||^2 + 2 <coarse_m, pq>, (nlist, m, ksub).
        self.table = pq.pow(2).sum(2)[None] + 2 * torch.einsum(
            "lmd,mjd->lmj", coarse.view(self.nlist, self.m, self.dsub), pq).contiguous()
        d = coarse.shape[1]
        self.store = torch.empty(capacity, d, dtype=torch.float16, device=DEV)
        self.count = 0
        self.codes = torch.empty(0, self.m, dtype=torch.uint8, device=DEV)
        self.ids = torch.empty(0, dtype=torch.long, device=DEV)
        self.lists = torch.empty(0, dtype=torch.long, device=DEV)
        self._sizes()

    def _sizes(self):
        self.sizes = torch.bincount(self.lists, minlength=self.nlist)
        self.offsets = self.sizes.cumsum(0) - self.sizes

    def _encode(self, x, a):
        r = x - self.coarse[a]
        codes = torch.empty(len(x), self.m, dtype=torch.uint8, device=DEV)
        for j in range(self.m):
            sub, c = r[:, j * self.dsub:(j + 1) * self.dsub], self.pq[j]
            codes[:, j] = (c.pow(2).sum(1) - 2 * sub @ c.T).argmin(1)
        return codes

    def add(self, x):
        a = _assign(x, self.coarse, self.chunk)
        codes = self._encode(x, a)
        n = len(x)
        if self.count + n > len(self.store):
            grown = torch.empty(int(1.5 * (self.count + n)), x.shape[1], dtype=torch.float16,
                                device=DEV)
            grown[:self.count] = self.store[:self.count]
            self.store = grown
            del grown
        self.store[self.count:self.count + n] = x
        ids = torch.arange(self.count, self.count + n, device=DEV)
        self.count += n
        lists = torch.cat([self.lists, a])
        order = lists.argsort(stable=True)
        self.lists = lists[order]
        self.codes = torch.cat([self.codes, codes])[order]
        self.ids = torch.cat([self.ids, ids])[order]
        self._sizes()

    def remove_below(self, first):
        """Every vector whose id is below `first` removed (a sliding window over the data)."""
        keep = self.ids >= first
        self.lists, self.codes, self.ids = self.lists[keep], self.codes[keep], self.ids[keep]
        self._sizes()

    def search(self, q, nprobe, k, refine, budget):
        """The k nearest ids of each query: the nprobe nearest lists, every vector of them
        scored through the lookup tables (queries in chunks of at most `budget` candidates and
        padded rows), the best k * refine re-ranked on the fp16 vectors."""
        nq = len(q)
        cd = self.cn - 2 * q @ self.coarse.T + q.pow(2).sum(1, keepdim=True)
        cdist, lists = cd.topk(nprobe, largest=False)
        del cd
        lut = -2 * torch.einsum("qmd,mjd->qmj", q.view(nq, self.m, self.dsub), self.pq)
        lut = lut.contiguous()
        lens = self.sizes[lists]
        per_q = lens.sum(1).cpu().tolist()
        out = []
        lo = 0
        while lo < nq:
            hi, total, widest = lo + 1, per_q[lo], per_q[lo]
            while hi < nq and max(widest, per_q[hi]) * (hi + 1 - lo) <= budget:
                total, widest = total + per_q[hi], max(widest, per_q[hi])
                hi += 1
            out.append(self._scan(q[lo:hi], cdist[lo:hi], lists[lo:hi], lens[lo:hi],
                                  lut[lo:hi], total, widest, k, refine))
            lo = hi
        return torch.cat(out)

    def _scan(self, q, cdist, lists, lens, lut, total, widest, k, refine):
        qc, npb = lists.shape
        flat, ln = lists.flatten(), lens.flatten()
        seg = torch.repeat_interleave(torch.arange(qc * npb, device=DEV), ln, output_size=total)
        first = ln.cumsum(0) - ln
        pos = self.offsets[flat][seg] + torch.arange(total, device=DEV) - first[seg]
        qi, lst = seg // npb, flat[seg]
        dist = cdist.flatten()[seg]
        code = self.codes[pos]
        del seg, first
        tflat, qflat = self.table.view(-1), lut.view(-1)
        for j in range(self.m):
            c = code[:, j].long()
            dist += tflat[(lst * self.m + j) * self.ksub + c]
            dist += qflat[(qi * self.m + j) * self.ksub + c]
            del c
        del code, lst
        # Each query's candidates are contiguous: a row of them, padded with infinity.
        count = lens.sum(1)
        qfirst = count.cumsum(0) - count
        mat = torch.full((qc, widest), math.inf, device=DEV)
        mat[qi, torch.arange(total, device=DEV) - qfirst[qi]] = dist
        del dist, qi
        d, j = mat.topk(min(k * refine, widest), largest=False)
        del mat
        cand = (qfirst[:, None] + j).clamp_(max=total - 1)
        ids = self.ids[pos[cand]]
        del pos, cand, j
        vec = self.store[ids]
        exact = (vec.float() - q[:, None]).pow(2).sum(-1).masked_fill_(d.isinf(), math.inf)
        best = exact.topk(min(k, exact.shape[1]), largest=False).indices
        return ids.gather(1, best)


def _clustered(n, topics, weights, spread=0.35):
    """n vectors near topics drawn by weight (dense and sparse regions, so lists of very
    different sizes)."""
    a = torch.multinomial(weights, n, replacement=True)
    return topics[a] + spread * torch.randn(n, topics.shape[1], device=DEV)


# GPU peak about 6.5 GiB: the fp16 store of 8M vectors of 128 (2 GiB) and, when it grows, its
# 1.5-times copy beside it (3.2 GiB); codes, ids and list numbers (0.3 GiB, twice over while an
# add re-sorts them); a training k-means's distances (65,536 x 4,096 fp32, 1 GiB a chunk); a
# search chunk of up to 8M candidates (positions, list and query numbers, flat table indices:
# int64, 64 MiB each; codes 128 MiB; the padded score rows, 32 MiB); a re-ranking's gathered
# vectors (up to 2,048 x 400 x 128, fp16 and fp32). Time: the build (k-means of 262k into 4,096,
# 16 sub-quantisers, encoding 8M) about 1-2 s; a request scans 0.1M-130M candidates (the seeded
# draws about 3G in all, some 360 chunks; a chunk's 16 rounds of index arithmetic and gathers,
# some 5-10 ms): 40 requests, 5 adds and 5 removals, some 4-10 s.
def ivfpq_ann_search_infer(steps):
    """Approximate nearest-neighbour search with an IVF-PQ index written out in PyTorch, as
    FAISS builds one: 128-d vectors from 1,024 topics of Zipf-like weights; a coarse quantiser of
    4,096 lists (k-means, 8 iterations on 262,144 vectors) and a product quantiser of 16 sub-
    vectors of 8 (256 centroids each, on the residuals); 8M vectors added in chunks of 1M (each
    add encodes the chunk and rebuilds the sorted flat arrays). Each step serves one request of
    64-2,048 queries (log-uniform) with nprobe 8, 16, 32 or 64: the probed lists' candidates
    (a data-dependent count) scanned in chunks of at most 8M through FAISS's precomputed tables,
    the best 400 re-ranked on the fp16 vectors, the best 100 returned. Every 8 steps 262,144
    new vectors are added and as many of the oldest removed (the index rebuilt twice; the store
    grows by half when full)."""
    torch.manual_seed(304)
    d, nlist, m, ksub, n0, add_chunk, train_n, iters, batches, probes, k, refine, budget, \
        every, fresh, topics, chunk = (
            (128, 4096, 16, 256, 8 << 20, 1 << 20, 262_144, 8, (64, 2048), (8, 16, 32, 64), 100,
             4, 8 << 20, 8, 262_144, 1024, 65_536) if CUDA
            else (16, 32, 4, 16, 4096, 1024, 1024, 3, (4, 32), (2, 4, 8), 5, 2, 2048, 2, 512, 16,
                  256))
    gen = _generator(304)
    with torch.inference_mode():
        topic = torch.randn(topics, d, device=DEV)
        weight = 1 / (torch.arange(topics, device=DEV) + 2.0)
        train = _clustered(train_n, topic, weight)
        coarse = _kmeans(train, nlist, iters, chunk)
        resid = train - coarse[_assign(train, coarse, chunk)]
        pq = torch.stack([_kmeans(resid[:, j * d // m:(j + 1) * d // m].contiguous(), ksub, iters,
                                  chunk) for j in range(m)])
        del train, resid
        index = _IvfPq(coarse, pq, n0, chunk)
        for _ in range(0, n0, add_chunk):
            index.add(_clustered(add_chunk, topic, weight))
        oldest = 0
        for step in range(steps):
            nq = int(batches[0] * (batches[1] / batches[0]) ** float(torch.rand(1, generator=gen)))
            q = _clustered(nq, topic, weight)
            index.search(q, _pick(gen, probes), k, refine, budget).cpu()
            del q
            if step % every == every - 1:
                index.add(_clustered(fresh, topic, weight))
                oldest += fresh
                index.remove_below(oldest)


# ------------------------------------------------------ AWD-LSTM, weight-dropped recurrence

def _locked_dropout(x, p, training):
    """Variational dropout: one mask per sequence, shared by every timestep."""
    if not training or p == 0:
        return x
    return x * (x.new_empty(1, *x.shape[1:]).bernoulli_(1 - p) / (1 - p))


class _AwdLstm(nn.Module):
    """AWD-LSTM (Merity et al. 2018): three single-layer LSTMs, DropConnect on each recurrent
    weight (the dropped copy passed to the cuDNN call, which then copies every weight of the
    layer into a buffer of its own), embedding dropout (whole rows of the table dropped: a
    masked copy of the table), variational dropout between layers; the embedding tied to the
    output."""

    def __init__(self, vocab, emb, hidden, layers, drops):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnns = nn.ModuleList(nn.LSTM(emb if i == 0 else hidden,
                                          hidden if i < layers - 1 else emb)
                                  for i in range(layers))
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.drops = drops

    def hidden(self, b):
        return [(torch.zeros(1, b, r.hidden_size, device=DEV),) * 2 for r in self.rnns]

    def forward(self, ids, hidden):
        p = self.drops
        w = self.emb.weight
        if self.training:
            w = w * (w.new_empty(w.shape[0], 1).bernoulli_(1 - p["e"]) / (1 - p["e"]))
        x = _locked_dropout(F.embedding(ids, w), p["i"], self.training)
        new, raw = [], None
        for i, (rnn, (h, c)) in enumerate(zip(self.rnns, hidden)):
            weights = [rnn.weight_ih_l0, F.dropout(rnn.weight_hh_l0, p["w"], self.training),
                       rnn.bias_ih_l0, rnn.bias_hh_l0]
            raw, h, c = torch._VF.lstm(x, (h, c), weights, True, 1, 0.0, self.training, False,
                                       False)
            new.append((h.detach(), c.detach()))
            last = i == len(self.rnns) - 1
            x = _locked_dropout(raw, p["o"] if last else p["h"], self.training)
        return F.linear(x, self.emb.weight, self.bias), new, raw, x


# GPU peak about 3 GiB: 34M parameters (the tied 33,278 x 400 table 53 MiB, with its masked copy
# each step) with gradients and SGD or ASGD state (each parameter's average); each call's copy
# of a layer's weights for cuDNN; up to 85 x 80 tokens: the logits (0.9 GiB fp32), their log-
# softmax and gradients (two or three of that size at once), cuDNN's reserve of three layers.
# Time: three cuDNN LSTMs over about 70 timesteps of 80 (a few ms), the output layer's 0.45
# TFLOP in fp32 (some 10 ms), 20-30 ms a step; 200 steps and 4 evaluations: some 5-8 s.
def awd_lstm_weightdrop_train(steps):
    """AWD-LSTM on a WikiText-2-sized vocabulary (33,278; embedding 400, three LSTM layers of
    1,150, 1,150 and 400, the table tied to the output): batches of 80 streams carried from step
    to step (the states detached), a truncation length drawn each step as AWD-LSTM does (70, or
    35 with probability 0.05, plus normal noise of 5; the learning rate scaled by it).
    DropConnect of 0.5 on every recurrent weight (`torch._VF.lstm` with the dropped weight, the
    weights no longer one cuDNN buffer), embedding dropout 0.1 (whole rows), variational dropout
    0.65 / 0.3 / 0.4, activation and temporal activation regularisation, clipping at 0.25, fp32.
    SGD at learning rate 30, switched to averaged SGD (`torch.optim.ASGD`, an average per
    parameter) half-way, as NT-ASGD switches when validation stalls. Every 50 steps an
    evaluation over 4 windows of 10 streams, with the averages copied into the parameters (the
    weights cloned aside and put back)."""
    torch.manual_seed(305)
    vocab, emb, hidden, layers, batch, bptt, every, eval_b, windows = (
        (33278, 400, 1150, 3, 80, 70, 50, 10, 4) if CUDA else (100, 16, 24, 3, 4, 8, 2, 2, 2))
    drops = dict(e=0.1, i=0.65, h=0.3, o=0.4, w=0.5)
    with torch.device(DEV):
        model = _AwdLstm(vocab, emb, hidden, layers, drops)
    params, lr = list(model.parameters()), 30.0
    opt = torch.optim.SGD(params, lr=lr, weight_decay=1.2e-6)
    switch, averaged = steps // 2, False
    gen = _generator(305)
    state = model.hidden(batch)
    with warnings.catch_warnings():
        # cuDNN warns once that the weights are not one contiguous buffer: they are not meant to.
        warnings.simplefilter("ignore")
        for step in range(steps):
            if step == switch:
                opt, averaged = torch.optim.ASGD(params, lr=lr, t0=0, lambd=0.0,
                                                 weight_decay=1.2e-6), True
            base = bptt if float(torch.rand(1, generator=gen)) < 0.95 else bptt // 2
            seq = max(5, int(base + 5 * float(torch.randn(1, generator=gen))))
            opt.param_groups[0]["lr"] = lr * seq / bptt
            data = torch.randint(0, vocab, (seq + 1, batch), device=DEV)
            logits, state, raw, dropped = model(data[:-1], state)
            loss = F.cross_entropy(logits.view(-1, vocab), data[1:].flatten())
            loss = loss + 2 * dropped.pow(2).mean() + (raw[1:] - raw[:-1]).pow(2).mean()
            del logits, raw, dropped
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 0.25)
            opt.step()
            opt.zero_grad(set_to_none=True)
            del data, loss
            if step % every == every - 1:
                saved = None
                if averaged:
                    saved = [p.data.clone() for p in params]
                    for p in params:
                        p.data = opt.state[p]["ax"].clone()
                model.eval()
                with torch.no_grad():
                    h, total = model.hidden(eval_b), 0.0
                    for _ in range(windows):
                        data = torch.randint(0, vocab, (bptt + 1, eval_b), device=DEV)
                        logits, h, _, _ = model(data[:-1], h)
                        total += float(F.cross_entropy(logits.view(-1, vocab), data[1:].flatten()))
                        del data, logits
                    del h
                model.train()
                if saved is not None:
                    for p, s in zip(params, saved):
                        p.data = s.clone()
                    del saved


# ---------------------------------------- top-k distillation, the teacher on a side stream

# GPU peak about 17 GiB: the fp16 teacher (16 layers of d 1,536, 128,256-token vocabulary: 0.85B
# parameters, 1.7 GiB); the student (8 layers of d 768, untied: 254M parameters, weights,
# gradients and AdamW 4 GiB); the student's 4,096 x 128,256 logits (1 GiB bf16, 2 GiB as fp32),
# their fp32 log-softmax kept (2 GiB), in backward the gradients of the gather and of the label
# loss and of the log-softmax (2 GiB each, two or three at once); on the side stream meanwhile
# a teacher chunk's 2,048 x 128,256 fp16 logits (0.5 GiB), their fp32 copy and log-sum-exp
# temporaries (1-2 GiB). Time: about 5.3 TFLOP of teacher and 3.8 TFLOP of student a step with
# the vocabulary's elementwise passes (40-60 ms); 80 steps and 4 evaluations: some 5-9 s.
def topk_distill_stream_train(steps):
    """Sparse (top-k) logit distillation from a large-vocabulary teacher, as LLM distillation
    pipelines run it: a 16-layer teacher (d 1,536, 12 heads, vocab 128,256, fp16, no grad) and an
    8-layer student (d 768, 12 heads, same vocabulary; bf16 autocast, AdamW, clipping). Each step
    4,096 tokens as 4 x 1,024, 2 x 2,048 or 8 x 512 (drawn each step). The teacher runs one
    batch ahead on a side stream, in chunks of 2,048 tokens: each chunk's full logits, their log-
    sum-exp in fp32 and their top 64, of which only the log-probabilities (fp32) and ids (int64)
    are kept and handed to the main stream (record_stream). The student's fp32 log-softmax over
    the whole vocabulary gives the label loss and, gathered at the teacher's ids, the cross-
    entropy to the teacher's renormalised top-64 distribution (weights 0.5 and 0.5). Every 20
    steps the student is evaluated on 2 x 1,024 held-out tokens."""
    torch.manual_seed(306)
    vocab, td, tl, th, sd, sl, sh, shapes, chunk, k, every, held = (
        (128256, 1536, 16, 12, 768, 8, 12, ((4, 1024), (2, 2048), (8, 512)), 2048, 64, 20,
         (2, 1024)) if CUDA
        else (300, 32, 2, 4, 16, 2, 2, ((2, 16), (1, 32)), 32, 8, 2, (1, 16)))
    ctx = max(t for _, t in shapes)
    with torch.device(DEV):
        teacher = _half(Gpt(vocab, td, tl, th, ctx)).eval().requires_grad_(False)
        student = Gpt(vocab, sd, sl, sh, ctx)
    params = list(student.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1)
    gen, side, amp = _generator(306), _stream(), _amp(torch.bfloat16)
    main = torch.cuda.current_stream() if CUDA else None

    def batch():
        b, t = _pick(gen, shapes)
        return torch.randint(0, vocab, (b, t + 1), device=DEV)

    def soft_targets(ids):
        """On the side stream: the teacher's top-k log-probabilities and ids for ids."""
        if side is not None:
            side.wait_stream(main)
        with _on(side), torch.no_grad():
            b, t = ids.shape
            rows = max(1, chunk // t)
            vals, idx = [], []
            for lo in range(0, b, rows):
                logits = teacher(ids[lo:lo + rows])
                lse = torch.logsumexp(logits.float(), -1, keepdim=True)
                v, i = logits.topk(k, -1)
                vals.append(v.float() - lse)
                idx.append(i)
                del logits, lse, v, i
            return torch.cat(vals), torch.cat(idx)

    ids = batch()
    pending = ids, soft_targets(ids[:, :-1])
    for step in range(steps):
        ids, (tv, ti) = pending
        _hand_over([tv, ti], side)
        if step + 1 < steps:
            nxt = batch()
            pending = nxt, soft_targets(nxt[:, :-1])
            del nxt
        with torch.autocast(**amp):
            logits = student(ids[:, :-1])
        logp = F.log_softmax(logits.float(), -1)
        del logits
        target = (tv - tv.logsumexp(-1, keepdim=True)).exp()
        kd = -(target * logp.gather(-1, ti)).sum(-1).mean()
        ce = F.nll_loss(logp.flatten(0, 1), ids[:, 1:].flatten())
        del logp, target
        _clip_step(opt, params, 0.5 * kd + 0.5 * ce)
        del ids, tv, ti, kd, ce
        if step % every == every - 1:
            student.eval()
            with torch.no_grad(), torch.autocast(**amp):
                h = torch.randint(0, vocab, (held[0], held[1] + 1), device=DEV)
                logits = student(h[:, :-1]).float()
                float(F.cross_entropy(logits.flatten(0, 1), h[:, 1:].flatten()))
                del logits
                del h
            student.train()


# ------------------------------------------ GraphCast, an autoregressive rollout curriculum

def _sphere(n):
    """n points on the unit sphere (a Fibonacci lattice)."""
    i = torch.arange(n, device=DEV, dtype=torch.float32) + 0.5
    z = 1 - 2 * i / n
    r = (1 - z * z).clamp_min(0).sqrt()
    phi = i * math.pi * (3 - math.sqrt(5))
    return torch.stack([r * phi.cos(), r * phi.sin(), z], 1)


def _nearest(src, dst, k, chunk=8192):
    """For every point of dst, its k nearest points of src (indices)."""
    return torch.cat([torch.cdist(dst[i:i + chunk], src).topk(k, largest=False).indices
                      for i in range(0, len(dst), chunk)])


def _edge_feats(pos_s, pos_r, src, dst):
    disp = pos_r[dst] - pos_s[src]
    return torch.cat([disp, disp.norm(dim=1, keepdim=True)], 1)


def _gmlp(i, d, o=None):
    """GraphCast's MLP: a hidden layer with SiLU, then LayerNorm (none on the output head)."""
    if o is not None:
        return nn.Sequential(nn.Linear(i, d), nn.SiLU(), nn.Linear(d, o))
    return nn.Sequential(nn.Linear(i, d), nn.SiLU(), nn.Linear(d, d), nn.LayerNorm(d))


class _Interaction(nn.Module):
    """An interaction network layer: edges updated from [edge, sender, receiver], receivers
    from [node, sum of incoming edges], both residual."""

    def __init__(self, d):
        super().__init__()
        self.edge, self.node = _gmlp(3 * d, d), _gmlp(2 * d, d)

    def forward(self, e, hs, hr, src, dst):
        e = e + self.edge(torch.cat([e, hs[src], hr[dst]], 1))
        agg = torch.zeros(hr.shape[0], e.shape[1], dtype=e.dtype, device=e.device)
        agg.index_add_(0, dst, e)
        return e, hr + self.node(torch.cat([hr, agg.to(hr.dtype)], 1))


class _GraphCast(nn.Module):
    """GraphCast (Lam et al. 2023), smaller: grid nodes encoded onto a multimesh, message passing
    over the mesh, decoded back to the grid as a residual update of the state."""

    def __init__(self, feats, out, d, layers):
        super().__init__()
        self.grid_in, self.mesh_in = _gmlp(feats, d), _gmlp(3, d)
        self.g2m_in, self.mesh_e_in, self.m2g_in = _gmlp(4, d), _gmlp(4, d), _gmlp(4, d)
        self.enc, self.grid_up = _Interaction(d), _gmlp(d, d)
        self.proc = nn.ModuleList(_Interaction(d) for _ in range(layers))
        self.dec, self.out = _Interaction(d), _gmlp(d, d, out)

    def forward(self, x, g):
        hg, hm = self.grid_in(x), self.mesh_in(g["mesh_pos"])
        _, hm = self.enc(self.g2m_in(g["g2m"]), hg, hm, g["g2m_src"], g["g2m_dst"])
        hg = hg + self.grid_up(hg)
        e = self.mesh_e_in(g["mesh"])
        for layer in self.proc:
            e, hm = layer(e, hm, hm, g["m_src"], g["m_dst"])
        _, hg = self.dec(self.m2g_in(g["m2g"]), hm, hg, g["m2g_src"], g["m2g_dst"])
        return self.out(hg)


def _graphcast_graph(nlat, nlon, levels, k_mesh, k_g2m, k_m2g):
    """The grid's and the multimesh's positions and the three edge sets with their features.
    Each coarser mesh is the set of finest nodes nearest a coarser Fibonacci lattice; every
    level joins each node to its k_mesh nearest of that level."""
    lat = torch.linspace(-90, 90, nlat, device=DEV) * math.pi / 180
    lon = torch.arange(nlon, device=DEV) * 2 * math.pi / nlon
    la, lo = torch.meshgrid(lat, lon, indexing="ij")
    grid = torch.stack([la.cos() * lo.cos(), la.cos() * lo.sin(), la.sin()], -1).view(-1, 3)
    mesh = _sphere(levels[-1])
    src, dst = [], []
    for n in levels:
        nodes = torch.unique(_nearest(mesh, _sphere(n), 1)[:, 0])
        nb = _nearest(mesh[nodes], mesh[nodes], k_mesh + 1)[:, 1:]
        src.append(nodes[nb].flatten())
        dst.append(nodes.repeat_interleave(k_mesh))
    g = dict(mesh_pos=mesh, m_src=torch.cat(src), m_dst=torch.cat(dst))
    g["g2m_dst"] = _nearest(mesh, grid, k_g2m).flatten()
    g["g2m_src"] = torch.arange(len(grid), device=DEV).repeat_interleave(k_g2m)
    g["m2g_src"] = _nearest(mesh, grid, k_m2g).flatten()
    g["m2g_dst"] = torch.arange(len(grid), device=DEV).repeat_interleave(k_m2g)
    g["mesh"] = _edge_feats(mesh, mesh, g["m_src"], g["m_dst"])
    g["g2m"] = _edge_feats(grid, mesh, g["g2m_src"], g["g2m_dst"])
    g["m2g"] = _edge_feats(mesh, grid, g["m2g_src"], g["m2g_dst"])
    return g, la.cos().reshape(-1, 1)


# GPU peak about 12 GiB: a rollout step's graph, recomputed in backward one step at a time: the
# grid-to-mesh edges (261k: the concatenated 261k x 768 inputs in fp32 and bf16, the MLP's
# hidden and LayerNorm outputs, some 2.5 GiB), mesh-to-grid (195k, about 2 GiB) and six
# multimesh layers (82k edges, about 0.7 GiB each); the kept rollout inputs (65k x 83 fp32, 21
# MiB each) and the data (24 states, 0.5 GiB). Time: about 0.55 TFLOP a rollout step forward,
# four passes with recomputation and backward, with the gathers and scatter-adds (some 25-40
# ms, about 1k allocations); 1-8 rollout steps (4.5 on average): 24 steps, some 5-9 s.
def graphcast_rollout_train(steps):
    """A GraphCast-style weather model (Lam et al. 2023), smaller: a 1-degree grid (181 x 360,
    83 variables: 6 at 13 levels and 5 at the surface; inputs the last two states, 5 forcings
    and 5 static fields), a multimesh on 10,242 nodes (levels of 42-10,242 nodes, each node
    joined to its 6 nearest of its level: 82k edges), 261k grid-to-mesh and 195k mesh-to-grid
    edges; latent 256, six processor layers of interaction networks, bf16 autocast. Trained
    autoregressively as GraphCast's curriculum does: the rollout length grows from 1 to 8 steps
    over the run, each rollout step checkpointed (its graph recomputed in backward), the loss a
    latitude-weighted MSE averaged over the rollout; AdamW, clipping."""
    torch.manual_seed(307)
    nlat, nlon, levels, nvar, nforce, d, layers, horizon, times = (
        (181, 360, (42, 162, 642, 2562, 10242), 83, 5, 256, 6, 8, 24) if CUDA
        else (10, 20, (12, 42), 5, 2, 16, 2, 2, 8))
    g, coslat = _graphcast_graph(nlat, nlon, levels, 6, 4, 3)
    grid_n = nlat * nlon
    feats = 2 * nvar + nforce + 5
    with torch.device(DEV):
        model = _GraphCast(feats, nvar, d, layers)
        states = torch.randn(times, grid_n, nvar)
        forcing = torch.randn(times, grid_n, nforce)
        static = torch.randn(grid_n, 5)
        weight = (coslat / coslat.mean()) * torch.rand(1, nvar).add_(0.5)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)
    gen, amp = _generator(307), _amp(torch.bfloat16)

    def advance(prev, cur, f):
        with torch.autocast(**amp):
            return cur + model(torch.cat([prev, cur, f, static], 1), g).float()

    for step in range(steps):
        h = 1 + step * horizon // max(1, steps)
        t0 = _randint(gen, 0, times - h - 2)
        prev, cur, loss = states[t0], states[t0 + 1], 0.0
        for s in range(h):
            nxt = checkpoint(advance, prev, cur, forcing[t0 + s + 2], use_reentrant=False)
            loss = loss + ((nxt - states[t0 + s + 2]).pow(2) * weight).mean()
            prev, cur = cur, nxt
        _clip_step(opt, params, loss / h)
        del prev, cur, nxt, loss


# ---------------------------------------------------- DeepCache, cached deep U-Net features

class _ResBlock(nn.Module):
    def __init__(self, i, o, temb):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(32, i), nn.Conv2d(i, o, 3, padding=1)
        self.t = nn.Linear(temb, o)
        self.n2, self.c2 = nn.GroupNorm(32, o), nn.Conv2d(o, o, 3, padding=1)
        self.skip = nn.Conv2d(i, o, 1) if i != o else nn.Identity()

    def forward(self, x, te):
        h = self.c1(F.silu(self.n1(x))) + self.t(te)[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class _SpatialTransformer(nn.Module):
    """Stable Diffusion's transformer over a feature map: self-attention, cross-attention to the
    text, a GEGLU feed-forward layer."""

    def __init__(self, c, ctx, heads):
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(32, c)
        self.proj_in, self.proj_out = nn.Linear(c, c), nn.Linear(c, c)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(c), nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.o1 = nn.Linear(c, 3 * c, bias=False), nn.Linear(c, c)
        self.q2, self.o2 = nn.Linear(c, c, bias=False), nn.Linear(c, c)
        self.kv2 = nn.Linear(ctx, 2 * c, bias=False)
        self.ff1, self.ff2 = nn.Linear(c, 8 * c), nn.Linear(4 * c, c)

    def _attend(self, q, k, v):
        b, n, c = q.shape
        q, k, v = (z.view(b, -1, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c)

    def forward(self, x, te, text):
        b, c, h, w = x.shape
        y = self.proj_in(self.norm(x).flatten(2).transpose(1, 2))
        y = y + self.o1(self._attend(*self.qkv(self.ln1(y)).chunk(3, -1)))
        y = y + self.o2(self._attend(self.q2(self.ln2(y)), *self.kv2(text).chunk(2, -1)))
        a, gate = self.ff1(self.ln3(y)).chunk(2, -1)
        y = y + self.ff2(a * F.gelu(gate))
        return x + self.proj_out(y).transpose(1, 2).reshape(b, c, h, w)


class _Stage(nn.Module):
    """A residual block, then a spatial transformer where the level has attention; `skip`: an
    up-path stage, which takes a skip connection."""

    def __init__(self, i, o, temb, attn, ctx, heads, skip):
        super().__init__()
        self.res = _ResBlock(i, o, temb)
        self.attn = _SpatialTransformer(o, ctx, heads) if attn else None
        self.skip = skip

    def forward(self, x, te, text):
        x = self.res(x, te)
        return self.attn(x, te, text) if self.attn is not None else x


class _Resample(nn.Module):
    def __init__(self, c, up):
        super().__init__()
        self.conv, self.up, self.skip = nn.Conv2d(c, c, 3, 1 if up else 2, 1), up, False

    def forward(self, x, te, text):
        return self.conv(F.interpolate(x, scale_factor=2.0) if self.up else x)


class _CacheUNet(nn.Module):
    """A Stable-Diffusion-1.x-shaped U-Net (two residual stages a level down, three up, spatial
    transformers where `attn` says, a middle block) that can run DeepCache's partial pass: with
    cached deep features, only the input convolution, the first level's two down stages and the
    last level's three up stages run."""

    def __init__(self, chans, attn, ctx, heads):
        super().__init__()
        c0, temb = chans[0], 4 * chans[0]
        self.c0 = c0
        self.temb = nn.Sequential(nn.Linear(c0, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(4, c0, 3, padding=1)
        self.down, self.up, skips, i = nn.ModuleList(), nn.ModuleList(), [c0], c0
        for lvl, c in enumerate(chans):
            for _ in range(2):
                self.down.append(_Stage(i, c, temb, attn[lvl], ctx, heads, False))
                skips.append(c)
                i = c
            if lvl < len(chans) - 1:
                self.down.append(_Resample(c, False))
                skips.append(c)
        self.mid = nn.ModuleList([_Stage(i, i, temb, True, ctx, heads, False),
                                  _Stage(i, i, temb, False, ctx, heads, False)])
        for lvl, c in reversed(list(enumerate(chans))):
            for _ in range(3):
                self.up.append(_Stage(i + skips.pop(), c, temb, attn[lvl], ctx, heads, True))
                i = c
            if lvl > 0:
                self.up.append(_Resample(c, True))
        self.out = nn.Sequential(nn.GroupNorm(32, c0), nn.SiLU(), nn.Conv2d(c0, 4, 3, padding=1))

    def forward(self, x, t, text, cache):
        half = self.c0 // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=x.device) / half)
        ang = t.float()[:, None] * freqs
        te = self.temb(torch.cat([ang.cos(), ang.sin()], 1).to(x.dtype))
        h = self.conv_in(x)
        skips = [h]
        partial = "deep" in cache
        for m in (self.down[:2] if partial else self.down):
            h = m(h, te, text)
            skips.append(h)
        if partial:
            h = cache["deep"]
        else:
            for m in self.mid:
                h = m(h, te, text)
            for m in self.up[:-3]:
                h = m(torch.cat([h, skips.pop()], 1) if m.skip else h, te, text)
            cache["deep"] = h
        for m in self.up[-3:]:
            h = m(torch.cat([h, skips.pop()], 1), te, text)
        return self.out(h)


# GPU peak about 3.5 GiB: the fp16 U-Net (320-1,280 channels, 0.85B parameters, 1.6 GiB);
# a full pass over up to 2 x 4 latents of 128 x 128 (the first level's 8 x 320 x 128 x 128 maps,
# 80 MiB each, the concatenations of the up path 0.25 GiB, the second level's attention over
# 4,096 tokens), freed as it goes in inference mode; the cached deep features (8 x 640 x 128 x
# 128 fp16, 0.16 GiB) kept between full passes. Time: a full pass about 0.4-0.8 TFLOP a latent
# of 64 x 64 (more with size and attention), a partial one some 12% of it; 50 DDIM steps with a
# full pass every 2, 3 or 5 (the seeded draws come to about 1,570 full passes of one 64 x 64
# latent in all), some 700 allocations a full pass and 80 a partial one: 8 requests, some 5-10 s.
def deepcache_unet_sample(steps):
    """DeepCache (Ma et al. 2023) for Stable Diffusion-style sampling: a U-Net of SD 1.x's shape
    (320, 640, 1,280, 1,280 channels; spatial transformers with cross-attention to 77 x 768 text
    states at the second and third levels and the middle; fp16, inference mode), 50 DDIM steps
    with classifier-free guidance (conditional and unconditional halves in one batch, scale 7.5).
    Each step is a request of 1-4 images at a latent of 64 x 64, 64 x 96, 96 x 64, 96 x 96 or 128
    x 128 with a cache interval of 2, 3 or 5 (all drawn per request): at every N-th denoising
    step the whole U-Net runs and the input to its last level's up stages is cached; in between
    only the input convolution, the first level's two down stages and the last level's three up
    stages run, on the cached features."""
    torch.manual_seed(308)
    chans, attn, ctx, heads, tokens, counts, sizes, intervals, denoise, scale = (
        ((320, 640, 1280, 1280), (False, True, True, False), 768, 8, 77, (1, 4),
         ((64, 64), (64, 96), (96, 64), (96, 96), (128, 128)), (2, 3, 5), 50, 7.5) if CUDA
        else ((32, 64), (False, True), 16, 2, 5, (1, 2), ((8, 8), (8, 16)), (2,), 4, 7.5))
    with torch.device(DEV):
        unet = _half(_CacheUNet(chans, attn, ctx, heads)).eval()
    dt = unet.conv_in.weight.dtype
    gen = _generator(308)
    alphas = torch.cos(torch.linspace(0.0, 1.0, 1001, device=DEV) * math.pi / 2).pow(2)
    alphas = alphas.clamp(1e-4, 0.9999)
    times = torch.linspace(999, 0, denoise, device=DEV).long()
    with torch.inference_mode():
        for _ in range(steps):
            n, (hh, ww), every = _randint(gen, *counts), _pick(gen, sizes), _pick(gen, intervals)
            text = torch.cat([torch.randn(n, tokens, ctx, device=DEV),
                              torch.zeros(n, tokens, ctx, device=DEV)]).to(dt)
            x = torch.randn(n, 4, hh, ww, device=DEV)
            cache = {}
            for i, t in enumerate(times.tolist()):
                if i % every == 0:
                    cache.clear()
                eps = unet(torch.cat([x, x]).to(dt), torch.full((2 * n,), t, device=DEV), text,
                           cache).float()
                cond, uncond = eps.chunk(2)
                e = uncond + scale * (cond - uncond)
                a = alphas[t]
                a_prev = alphas[int(times[i + 1])] if i + 1 < denoise else alphas.new_tensor(1.0)
                x0 = (x - (1 - a).sqrt() * e) / a.sqrt()
                x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * e
                del eps, cond, uncond, e, x0
            x.cpu()
            del text, x, cache


WORKLOADS = {
    "slimming_channel_prune_train": (slimming_channel_prune_train, 300),
    "cached_embedding_dlrm_train": (cached_embedding_dlrm_train, 120),
    "fid_reader_train": (fid_reader_train, 40),
    "ivfpq_ann_search_infer": (ivfpq_ann_search_infer, 40),
    "awd_lstm_weightdrop_train": (awd_lstm_weightdrop_train, 200),
    "topk_distill_stream_train": (topk_distill_stream_train, 80),
    "graphcast_rollout_train": (graphcast_rollout_train, 24),
    "deepcache_unet_sample": (deepcache_unet_sample, 8),
}
