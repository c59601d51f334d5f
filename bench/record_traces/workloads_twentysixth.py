"""The twenty-sixth corpus: eight workloads written on 2026-11-27, held out from every
change to the allocator until recorded. Same conventions as workloads.py: `run(steps)`
builds its models and data on DEV and runs `steps` steps; random weights; seeded. On the
CPU (RECORD_DEVICE=cpu) the models and data are smaller and the streams are left out.

Each holds memory in a way the first twenty-five corpora do not: a sparse autoencoder trained
on a GPU buffer of a frozen LM's activations that a loader stream refills half at a time (TopK
latents, an embedding-bag decoder, dead latents' auxiliary loss); QLoRA (NF4 weights
dequantised into a transient bf16 copy in every forward, recompute and backward; micro-batches
of new shapes accumulated); Graphormer (shortest paths by a batched Floyd-Warshall, multi-hop
edge encodings, dense padded pair biases of a new size every step); a causal video VAE (videos
encoded and decoded a few frames at a time, every convolution keeping its last two input
frames between chunks, the outputs grown by concatenation); DeltaNet (the chunked delta rule by
triangular solves, a state per chunk, states carried between a document's segments); GaLore
(the optimizer inside backward: each gradient projected to low rank and freed as soon as it is
made, projections refreshed by QR); Mixtral-style decoding with the experts offloaded to the
host (an LRU of experts on the GPU, loads and speculative prefetches on a copy stream); Hyena
(implicit long filters and FFT convolutions over 16k-131k tokens, sequence-length warm-up).

Above each workload, a comment estimates its peak on the GPU (from the sizes; PyTorch's
allocated bytes) and its time on an H100.
"""
import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from workloads import DEV, Gpt
# Earlier corpora's helpers: autocast, generators, choices, streams and hand-over (thirteenth);
# an integer in a closed range, fp16 on the GPU (fourteenth); Llama blocks, RMSNorm, rotary
# embeddings (sixteenth).
from workloads_thirteenth import CUDA, _amp, _generator, _hand_over, _on, _pick, _stream
from workloads_fourteenth import _half, _randint
from workloads_sixteenth import LlamaBlock, RmsNorm, _rope


def _angles(length, head_dim):
    """Rotary angles (length, head_dim / 2) on DEV."""
    freqs = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=DEV).float() / head_dim))
    return torch.outer(torch.arange(length, device=DEV).float(), freqs)


# ------------------------------------- a sparse autoencoder on a buffer of activations

def _harvest(lm, ids, layer):
    """The residual stream after `layer` blocks of `lm` (SAELens's stop_at_layer)."""
    x = lm.tok(ids) + lm.pos.weight[:ids.shape[1]]
    for blk in lm.blocks[:layer]:
        x = blk(x)
    return x


# GPU peak about 21 GiB: the LM 1.1 GiB (536M fp16 parameters); the buffer 8 GiB (two halves
# of 2^20 x 2,048 bf16) and the next half harvested beside it (4 GiB of chunks; at the swap the
# chunks and their concatenation, then it and its shuffled copy, 8 GiB at once); the SAE 4 GiB
# (2 x 134M fp32 weights, their gradients and Adam's moments); a batch's pre-activations 4,096 x
# 65,536 fp32 (1 GiB) kept with the ReLU's, the dead-latent copy and their gradients (about 4
# GiB), beside the harvest's own activations (under 1 GiB). Time: a step is 24
# fp32 SAE batches (about 3.3 TFLOP each, some 70 ms) while 1M tokens go through six fp16 blocks
# on the loader stream (about 0.66 PFLOP, 1.5-2 s, overlapped, slower beside the SAE): 2-3 s a
# step, 6 steps after the first two fills (3-4 s), some 20 s.
def sae_activation_buffer_train(steps):
    """A TopK sparse autoencoder (Gao et al. 2024; 2,048 -> 65,536 latents, k 64) trained as
    EleutherAI's sparsify and SAELens train one, on the residual stream after block 6 of a frozen
    8-layer GPT (d 2,048, fp16, no grad, contexts of 1,024): a GPU buffer of two halves of 1M
    activations (bf16, shuffled); each step a loader stream harvests the next half in chunks of
    16 sequences while the main stream trains on 24 batches of 4,096 drawn from the buffer,
    then the stale half is replaced (chunks handed over with record_stream, concatenated,
    permuted). The decoder is an embedding bag over the top-k latents; latents silent for 8
    batches get the AuxK loss (a masked copy of the pre-activations, its own top-k); decoder
    rows kept at unit norm, their parallel gradient removed. fp32 SAE, Adam."""
    torch.manual_seed(261)
    vocab, d, layers, heads, ctx, layer, latents, k, half, chunk, batch, per = (
        (32000, 2048, 8, 16, 1024, 6, 65536, 64, 1 << 20, 16, 4096, 24) if CUDA
        else (100, 32, 2, 4, 16, 1, 256, 8, 256, 4, 32, 3))
    with torch.device(DEV):
        lm = _half(Gpt(vocab, d, layers, heads, ctx)).eval().requires_grad_(False)
        enc = nn.Linear(d, latents)
        nn.init.zeros_(enc.bias)
        w_dec = nn.Parameter(F.normalize(enc.weight.detach().clone(), dim=1))
        b_dec = nn.Parameter(torch.zeros(d))
        fired = torch.zeros(latents, dtype=torch.long)  # tokens since each latent last fired
    opt = torch.optim.Adam([enc.weight, enc.bias, w_dec, b_dec], lr=2e-4, eps=6.25e-10)
    side, dead_after = _stream(), 8 * batch

    def harvest():  # queued on the loader stream; returns its chunks
        if side is not None:
            side.wait_stream(torch.cuda.current_stream())
        chunks = []
        with _on(side), torch.no_grad():
            for _ in range(half // (chunk * ctx)):
                ids = torch.randint(0, vocab, (chunk, ctx), device=DEV)
                chunks.append(_harvest(lm, ids, layer).flatten(0, 1).to(torch.bfloat16))
        return chunks

    def swap(chunks):  # the main stream takes the chunks over: one shuffled half
        _hand_over(chunks, side)
        new = torch.cat(chunks)
        chunks.clear()
        return new[torch.randperm(len(new), device=DEV)]

    halves = [swap(harvest()), swap(harvest())]
    for step in range(steps):
        pending = harvest()
        for i in range(per):
            x = halves[i % 2][torch.randint(0, half, (batch,), device=DEV)].float()
            pre = F.relu(enc(x - b_dec))
            acts, idx = pre.topk(k, sorted=False)
            e = F.embedding_bag(idx, w_dec, per_sample_weights=acts, mode="sum") + b_dec - x
            total = (x - x.mean(0)).pow(2).sum()
            loss = e.pow(2).sum() / total
            with torch.no_grad():
                fired += batch
                fired[idx.flatten()] = 0
                dead = fired > dead_after
            dead_count = int(dead.sum())
            if dead_count:
                k_aux = min(d // 2, dead_count)
                aux_acts, aux_idx = torch.where(dead, pre, -torch.inf).topk(k_aux, sorted=False)
                e_hat = F.embedding_bag(aux_idx, w_dec, per_sample_weights=aux_acts, mode="sum")
                aux = (e_hat - e.detach()).pow(2).sum() / total
                loss = loss + 1 / 32 * min(dead_count / k_aux, 1.0) * aux
                del aux_acts, aux_idx, e_hat, aux
            loss.backward()
            with torch.no_grad():
                w_dec.grad -= (w_dec.grad * w_dec).sum(1, keepdim=True) * w_dec
            opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                w_dec /= w_dec.norm(dim=1, keepdim=True) + 1e-6
            del x, pre, acts, idx, e, total, loss
        halves[step % 2] = swap(pending)


# ---------------------------------------------------------- QLoRA, NF4 weights

_NF4 = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
        -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
        0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
        0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0)


def _nf4(w, table, block=64):
    """`w` as NF4 (Dettmers et al. 2023): codes packed two a byte, each block's absmax."""
    flat = w.float().view(-1, block)
    absmax = flat.abs().amax(1)
    codes = torch.bucketize(flat / absmax[:, None], (table[1:] + table[:-1]) / 2)
    codes = codes.to(torch.uint8).view(-1, 2)
    return codes[:, 0] << 4 | codes[:, 1], absmax


def _dequant(q, absmax, table, shape, dtype, block=64):
    codes = torch.stack([q >> 4, q & 15], 1).view(-1, block).long()
    return (table[codes] * absmax[:, None]).to(dtype).view(shape)


class _Nf4Matmul(torch.autograd.Function):
    """x W^T with W dequantised from NF4 in forward and again in backward: only the codes are
    saved (bitsandbytes' MatMul4Bit)."""

    @staticmethod
    def forward(ctx, x, q, absmax, table, shape):
        ctx.save_for_backward(q, absmax, table)
        ctx.shape = shape
        return x @ _dequant(q, absmax, table, shape, x.dtype).t()

    @staticmethod
    def backward(ctx, g):
        q, absmax, table = ctx.saved_tensors
        return g @ _dequant(q, absmax, table, ctx.shape, g.dtype), None, None, None, None


class _QLora(nn.Module):
    """A frozen linear layer quantised to NF4 with a trainable low-rank adapter (peft's)."""

    def __init__(self, lin, rank, alpha=16):
        super().__init__()
        table = torch.tensor(_NF4, device=lin.weight.device)
        q, absmax = _nf4(lin.weight.detach(), table)
        self.register_buffer("q", q)
        self.register_buffer("absmax", absmax)
        self.register_buffer("table", table)
        self.shape, self.scale = tuple(lin.weight.shape), alpha / rank
        self.a = nn.Parameter(torch.empty(rank, self.shape[1], device=lin.weight.device))
        self.b = nn.Parameter(torch.zeros(self.shape[0], rank, device=lin.weight.device))
        nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))

    def forward(self, x):
        y = _Nf4Matmul.apply(x, self.q, self.absmax, self.table, self.shape)
        lora = F.linear(F.linear(F.dropout(x, 0.05, self.training), self.a), self.b)
        return y + self.scale * lora


# GPU peak about 22 GiB: NF4 codes of 2.8B weights 1.4 GiB with absmax 0.2 GiB; bf16 embedding
# and head 1.6 GiB (128,256 x 3,072 each); rank-64 adapters 92M fp32 parameters with gradients
# and AdamW 1.5 GiB; 28 checkpointed block inputs of 8,192 x 3,072 bf16 1.4 GiB; one block
# recomputed about 1 GiB; the logits of 8,192 tokens over 128,256 in fp32 (4 GiB), kept by the
# log-softmax, and their two gradients, about 13 GiB at once. Time: about 20 GFLOP a token
# (forward, recompute, backward for the inputs) x 32k tokens a step, with 500 dequantisations a
# micro-batch: about 3 s a step, 6 steps, some 20 s.
def qlora_nf4_accum_train(steps):
    """QLoRA fine-tuning (Dettmers et al. 2023) of a Llama-3.2-3B-shaped model (d 3,072, 28
    blocks, 24 heads sharing 8 key/value heads, SwiGLU 8,192, vocab 128,256): every block's
    weights quantised to NF4 at load (blocks made one at a time, quantised, the bf16 weights
    dropped), rank-64 adapters on all seven projections (k and v one fused layer; fp32, dropout
    0.05), each forward, recompute and backward dequantising its weight into a transient bf16
    copy; every block checkpointed; bf16 autocast; 4 micro-batches a step of padded SFT
    examples, each with its own length (256-2,048) and as many rows as 8,192 tokens allow,
    gradients accumulated, clipped to 0.3, AdamW."""
    torch.manual_seed(262)
    vocab, d, depth, heads, kv, hidden, rank, budget, micro, lengths = (
        (128256, 3072, 28, 24, 8, 8192, 64, 8192, 4, (256, 512, 768, 1024, 1536, 2048))
        if CUDA else (100, 32, 2, 4, 2, 64, 4, 48, 2, (8, 12, 16)))
    dt, gen = (torch.bfloat16 if CUDA else torch.float32), _generator(262)
    with torch.device(DEV):
        emb = nn.Embedding(vocab, d).to(dt).requires_grad_(False)
        blocks = nn.ModuleList()
        for _ in range(depth):
            blk = LlamaBlock(d, heads, kv, hidden).to(dt).requires_grad_(False)
            for name in ("q", "kv", "o", "gate", "up", "down"):
                setattr(blk, name, _QLora(getattr(blk, name), rank))
            blocks.append(blk)
        norm = RmsNorm(d).to(dt).requires_grad_(False)
        head = nn.Linear(d, vocab, bias=False).to(dt).requires_grad_(False)
    params = [p for p in blocks.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.0)
    angles, amp = _angles(lengths[-1], d // heads), _amp(torch.bfloat16)
    for _ in range(steps):
        for _ in range(micro):
            t = _pick(gen, lengths)
            b = max(1, budget // t)
            ids = torch.randint(0, vocab, (b, t + 1), device=DEV)
            ends = torch.randint(t // 4, t + 1, (b,), generator=gen)
            ends[0] = t  # padded to the longest
            labels = ids[:, 1:].masked_fill(torch.arange(t, device=DEV) >= ends.to(DEV)[:, None],
                                            -100)
            cos, sin = angles[:t].cos(), angles[:t].sin()
            with torch.autocast(**amp):
                x = emb(ids[:, :-1])
                for blk in blocks:
                    x = checkpoint(blk, x, cos, sin, use_reentrant=False)
                logits = head(norm(x)).float()
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten()) / micro
            loss.backward()
            del ids, labels, x, logits, loss
        nn.utils.clip_grad_norm_(params, 0.3)
        opt.step()
        opt.zero_grad(set_to_none=True)


# ------------------------------------------- Graphormer, shortest-path attention biases

def _molecules(gen, batch, sizes, atom_feats=9, bond_feats=3):
    """Random molecule-like graphs (chains with branches and five-rings), padded: node counts,
    adjacency (B, N, N), bond codes (B, N, N, 3), atom codes (B, N, 9); codes from 1, 0 pads."""
    n = torch.randint(sizes[0], sizes[1] + 1, (batch,), generator=gen)
    top = int(n.max())
    adj = torch.zeros(batch, top, top, dtype=torch.bool)
    bonds = torch.zeros(batch, top, top, bond_feats, dtype=torch.long)
    atoms = torch.zeros(batch, top, atom_feats, dtype=torch.long)
    for m, k in enumerate(n.tolist()):
        i = torch.arange(1, k)
        j = i - 1 - (torch.rand(k - 1, generator=gen) * i.clamp(max=4)).long()
        ring = torch.randint(5, k, (k // 8,), generator=gen)
        src, dst = torch.cat([i, ring]), torch.cat([j, ring - 5])
        adj[m, src, dst] = adj[m, dst, src] = True
        codes = torch.randint(1, 6, (len(src), bond_feats), generator=gen) + 8 * torch.arange(
            bond_feats)
        bonds[m, src, dst] = bonds[m, dst, src] = codes
        atoms[m, :k] = torch.randint(1, 40, (k, atom_feats), generator=gen) + 64 * torch.arange(
            atom_feats)
    return n, adj, bonds, atoms


def _floyd_warshall(adj):
    """Shortest path lengths (unreachable: N + 1) and next hops (-1: none) of a padded batch of
    graphs, by Floyd-Warshall over the whole batch (N steps of B x N x N)."""
    b, n, _ = adj.shape
    dist = torch.where(adj, 1, n + 1)
    dist.diagonal(dim1=1, dim2=2).fill_(0)
    nxt = torch.where(adj, torch.arange(n, device=adj.device).expand(b, n, n), -1)
    for k in range(n):
        via = dist[:, :, k:k + 1] + dist[:, k:k + 1]
        better = via < dist
        dist = torch.where(better, via, dist)
        nxt = torch.where(better, nxt[:, :, k:k + 1], nxt)
    return dist, nxt


def _path_bonds(nxt, dist, bonds, hops):
    """The bond codes of each pair's first `hops` bonds along its shortest path
    (B, N, N, hops, 3), zero past the path's end."""
    b, n, _ = nxt.shape
    cur = torch.arange(n, device=nxt.device).view(1, n, 1).expand(b, n, n)
    flat, out = bonds.view(b, n * n, -1), []
    for h in range(hops):
        step = nxt.gather(1, cur).clamp_min(0)  # nxt[b, cur[b, i, j], j]
        at = (cur * n + step).view(b, -1, 1).expand(-1, -1, flat.shape[-1])
        on = (dist > h) & (dist <= n)
        out.append(flat.gather(1, at).view(b, n, n, -1).masked_fill(~on[..., None], 0))
        cur = step
    return torch.stack(out, 3)


class _GraphormerLayer(nn.Module):
    """A pre-norm layer whose attention adds a per-head pair bias (written out, as Graphormer's
    own multi-head attention)."""

    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))

    def forward(self, x, bias):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = (q @ k.mT) * q.shape[-1] ** -0.5 + bias
        y = F.dropout(a.softmax(-1), 0.1, self.training) @ v
        x = x + F.dropout(self.o(y.transpose(1, 2).reshape(b, t, d)), 0.1, self.training)
        return x + self.ff(self.ln2(x))


# GPU peak about 13 GiB, at the largest batches (256 molecules padded to 96 atoms, 97 tokens
# with the graph token): each of 12 layers keeps a 256 x 32 x 97 x 97 score in bf16, the biased
# scores, the softmax and the dropout in fp32 (77M elements, about 1 GiB a layer); the edge
# encoding is transient, 4.5 GiB of fp32 embeddings (256 x 96 x 96 x 5 hops x 3 codes x 32
# heads) before their mean, and again in its backward. Time: a few hundred small kernels and 96
# Floyd-Warshall steps a step, about 0.2 s; 20 steps, some 4 s.
def graphormer_spd_bias_train(steps):
    """Graphormer-base (Ying et al. 2021; 12 layers, d 768, 32 heads, feed-forward 768) regressing
    a molecular property (L1) on batches of 256 molecules of 10 to 32-96 atoms (a new largest
    size drawn every step, the batch padded to it): atoms' nine codes and degrees embedded, a
    graph token; the spatial encoding from shortest-path lengths found on the GPU by a batched
    Floyd-Warshall; the edge encoding from the bonds along each pair's path (next hops walked, 5
    hops, each hop's bond embeddings averaged and mixed by a per-hop matrix); the per-head
    biases of every padded pair (padded keys -inf) added to attention written out. bf16
    autocast, AdamW, clipping."""
    torch.manual_seed(263)
    d, depth, heads, ffn, batch, least, tops, hops = (
        (768, 12, 32, 768, 256, 10, (32, 48, 64, 80, 96), 5) if CUDA
        else (32, 2, 4, 32, 4, 6, (8, 12), 3))
    m = nn.ModuleDict(dict(
        atom=nn.Embedding(64 * 9 + 1, d, padding_idx=0), degree=nn.Embedding(64, d),
        token=nn.Embedding(1, d), spatial=nn.Embedding(512, heads),
        edge=nn.Embedding(8 * 3 + 1, heads, padding_idx=0), hop=nn.Embedding(hops, heads * heads),
        virtual=nn.Embedding(1, heads),
        layers=nn.ModuleList(_GraphormerLayer(d, heads, ffn) for _ in range(depth)),
        ln=nn.LayerNorm(d), out=nn.Linear(d, 1))).to(DEV)
    opt = torch.optim.AdamW(m.parameters(), lr=2e-4, weight_decay=0.01)
    amp, gen = _amp(torch.bfloat16), _generator(263)
    for _ in range(steps):
        graphs = _molecules(gen, batch, (least, _pick(gen, tops)))
        n, adj, bonds, atoms = (z.to(DEV) for z in graphs)
        b, top = adj.shape[:2]
        dist, nxt = _floyd_warshall(adj)
        path = _path_bonds(nxt, dist, bonds, hops)
        reach = dist <= top
        with torch.autocast(**amp):
            e = m["edge"](path).mean(-2).permute(3, 0, 1, 2, 4).reshape(hops, -1, heads)
            e = torch.bmm(e, m["hop"].weight.view(hops, heads, heads))
            e = e.view(hops, b, top, top, heads)
            e = e.sum(0) / dist.clamp(1, hops)[..., None]
            spatial = m["spatial"](torch.where(reach, dist.clamp(max=510), 511))
            bias = (spatial + e).permute(0, 3, 1, 2)
            t = m["virtual"].weight.view(1, heads, 1, 1)
            bias = torch.cat([t.expand(b, -1, 1, top), bias.float()], 2)
            bias = torch.cat([t.expand(b, -1, top + 1, 1), bias], 3)
            pad = torch.arange(top + 1, device=DEV)[None] > n[:, None]
            bias = bias.masked_fill(pad[:, None, None], -torch.inf)
            x = m["atom"](atoms).sum(2) + m["degree"](adj.sum(2).clamp(max=63))
            x = torch.cat([m["token"].weight.expand(b, 1, d), x], 1)
            for layer in m["layers"]:
                x = layer(x, bias)
            pred = m["out"](m["ln"](x[:, 0])).float()
        loss = F.l1_loss(pred[:, 0], torch.rand(b, device=DEV) * 10)
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 5.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del graphs, n, adj, bonds, atoms, dist, nxt, path, reach, e, spatial, bias, x, pred, loss


# ------------------------------------------------ a causal video VAE, chunk by chunk

def _rms(x, g):
    """Wan's RMS_norm over the channels of (B, C, T, H, W)."""
    return F.normalize(x, dim=1) * x.shape[1] ** 0.5 * g.view(-1, 1, 1, 1)


class _CausalConv3d(nn.Conv3d):
    """A 3x3x3 convolution causal in time: the chunk is preceded by the last two input frames of
    the previous chunk (zeros before the first), cached per layer as Wan's VAE does."""

    def __init__(self, i, o):
        super().__init__(i, o, 3, padding=(0, 1, 1))

    def forward(self, x, cache):
        prev = cache.get(self)
        h = F.pad(x, (0, 0, 0, 0, 2, 0)) if prev is None else torch.cat([prev, x], 2)
        cache[self] = h[:, :, -2:].clone()
        return super().forward(h)


class _CausalRes(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.g1, self.g2 = nn.Parameter(torch.ones(i)), nn.Parameter(torch.ones(o))
        self.c1, self.c2 = _CausalConv3d(i, o), _CausalConv3d(o, o)
        self.skip = nn.Conv3d(i, o, 1) if i != o else nn.Identity()

    def forward(self, x, cache):
        h = self.c1(F.silu(_rms(x, self.g1)), cache)
        return self.skip(x) + self.c2(F.silu(_rms(h, self.g2)), cache)


def _per_frame(layer, x):
    """A 2-D layer applied to every frame of (B, C, T, H, W)."""
    b, t = x.shape[0], x.shape[2]
    return layer(x.transpose(1, 2).flatten(0, 1)).unflatten(0, (b, t)).transpose(1, 2)


class _CausalVideoVae(nn.Module):
    """A Wan-2.1-like video VAE (8x spatial, 4x temporal compression, 16 latent channels): two
    residual blocks a level down, three up; time halved after the second and third levels (pairs
    of frames averaged) and doubled before the last two (frames repeated), the first frame of a
    video on its own."""

    def __init__(self, c=96, z=16):
        super().__init__()
        ch = (c, 2 * c, 4 * c, 4 * c)
        self.e_in = _CausalConv3d(3, c)
        self.e_res = nn.ModuleList(nn.ModuleList([_CausalRes(ch[max(i - 1, 0)], ch[i]),
                                                  _CausalRes(ch[i], ch[i])]) for i in range(4))
        self.e_down = nn.ModuleList(nn.Conv2d(ch[i], ch[i], 3, 2, 1) for i in range(3))
        self.e_mid = nn.ModuleList([_CausalRes(ch[3], ch[3]), _CausalRes(ch[3], ch[3])])
        self.e_g, self.e_out = nn.Parameter(torch.ones(ch[3])), _CausalConv3d(ch[3], 2 * z)
        up = (4 * c, 4 * c, 2 * c, c)
        self.d_in = _CausalConv3d(z, up[0])
        self.d_mid = nn.ModuleList([_CausalRes(up[0], up[0]), _CausalRes(up[0], up[0])])
        self.d_res = nn.ModuleList(nn.ModuleList([_CausalRes(up[max(i - 1, 0)], up[i])]
                                                 + [_CausalRes(up[i], up[i]) for _ in range(2)])
                                   for i in range(4))
        self.d_up = nn.ModuleList(nn.Sequential(nn.Upsample(scale_factor=2.0),
                                                nn.Conv2d(up[i], up[i], 3, 1, 1))
                                  for i in range(3))
        self.d_g, self.d_out = nn.Parameter(torch.ones(c)), _CausalConv3d(c, 3)

    def encode(self, x, cache):
        h = self.e_in(x, cache)
        for i, res in enumerate(self.e_res):
            for r in res:
                h = r(h, cache)
            if i < 3:
                h = _per_frame(self.e_down[i], h)
                if i > 0 and h.shape[2] > 1:
                    h = F.avg_pool3d(h, (2, 1, 1))
        for r in self.e_mid:
            h = r(h, cache)
        return self.e_out(F.silu(_rms(h, self.e_g)), cache).chunk(2, 1)[0]

    def decode(self, z, cache, first):
        h = self.d_in(z, cache)
        for r in self.d_mid:
            h = r(h, cache)
        for i, res in enumerate(self.d_res):
            for r in res:
                h = r(h, cache)
            if i < 3:
                if i < 2 and not first:
                    h = h.repeat_interleave(2, dim=2)
                h = _per_frame(self.d_up[i], h)
        return self.d_out(F.silu(_rms(h, self.d_g)), cache)


# GPU peak about 6.5 GiB, on a 544 x 960 video: the decoder's last level works on 4 frames of
# 96-192 channels at full size (0.4-0.8 GiB each in bf16, 1.2 GiB with the two cached frames
# before it), a residual block holding three or four such at once (about 3.5 GiB); the decoder's
# per-convolution caches (two frames each) about 2.5 GiB; the video grown by concatenation to 3 x
# 49 x 544 x 960 bf16 (0.15 GiB, twice at each cat). Time: about 0.37 PFLOP of 3-D convolution for
# the largest video (544 x 960 x 49; 2-4 s), 0.17 PFLOP on average (1-2 s): 8 videos, some 12 s.
def causal_video_vae_chunked_infer(steps):
    """Video tokenisation and reconstruction as Wan 2.1's VAE runs them (bf16, inference mode),
    a video a step: 17-49 frames of 480 x 480 to 544 x 960 (drawn each step; uint8 frames made on
    the GPU, as a hardware decoder leaves them, and scaled), encoded a chunk at a time (the first
    frame alone, then 4 frames) and decoded a latent frame at a time (4 frames out, 1 for the
    first), every causal convolution keeping its input's last two frames for the next chunk (a
    cache of the encoder's, then of the decoder's), the latents and the video grown by
    concatenation as Wan's loops do; the video copied back to the host as uint8."""
    torch.manual_seed(264)
    c, sizes, frames = ((96, ((480, 832), (544, 960), (480, 480), (832, 480)), (17, 25, 33, 49))
                        if CUDA else (8, ((16, 24), (24, 16)), (5, 9)))
    vae = _CausalVideoVae(c).to(DEV).eval()
    if CUDA:
        vae = vae.to(torch.bfloat16)
    dt, gen = next(vae.parameters()).dtype, _generator(264)
    with torch.inference_mode():
        for _ in range(steps):
            (hh, ww), t = _pick(gen, sizes), _pick(gen, frames)
            video = torch.randint(0, 256, (1, 3, t, hh, ww), dtype=torch.uint8, device=DEV)
            x = (video.to(dt) / 127.5 - 1)
            del video
            cache, z = {}, None
            for s in range(0, t, 4):
                a, e = (0, 1) if s == 0 else (s - 3, s + 1)
                out = vae.encode(x[:, :, a:e], cache)
                z = out if z is None else torch.cat([z, out], 2)
            del x, cache, out
            cache, y = {}, None
            for i in range(z.shape[2]):
                out = vae.decode(z[:, :, i:i + 1], cache, first=i == 0)
                y = out if y is None else torch.cat([y, out], 2)
            del cache, out, z
            y.clamp_(-1, 1).mul_(127.5).add_(127.5).to(torch.uint8).cpu()
            del y


# ----------------------------------------------- DeltaNet, the chunked delta rule

def _delta_rule(q, k, v, beta, state, chunk):
    """The delta rule (Yang et al. 2024) over chunks, in fp32: each chunk's WY factors u and w
    by a unit lower-triangular solve, then a recurrence over the chunks from `state`
    (B, H, dk, dv). q, k: (B, H, T, dk), L2-normalised; v: (B, H, T, dv); beta: (B, H, T)."""
    b, h, t, dk = q.shape
    n = t // chunk
    q, k, v = (z.reshape(b, h, n, chunk, -1) for z in (q * dk ** -0.5, k, v))
    beta = beta.reshape(b, h, n, chunk, 1)
    kb = k * beta
    uw = torch.linalg.solve_triangular(torch.tril(kb @ k.mT, -1), torch.cat([v * beta, kb], -1),
                                       upper=False, unitriangular=True)
    u, w = uw.split([v.shape[-1], dk], -1)
    inner = torch.tril(q @ k.mT)
    outs = []
    for i in range(n):
        u_i = u[:, :, i] - w[:, :, i] @ state
        outs.append(q[:, :, i] @ state + inner[:, :, i] @ u_i)
        state = state + k[:, :, i].mT @ u_i
    return torch.stack(outs, 2).reshape(b, h, t, -1), state


class _DeltaNetBlock(nn.Module):
    """A DeltaNet layer as flash-linear-attention's: q, k, v through a short causal depthwise
    convolution (its last inputs carried between segments) and SiLU, q and k L2-normalised, a
    sigmoid beta per head, the delta rule, a per-head RMSNorm gated by SiLU; a SwiGLU MLP."""

    def __init__(self, d, heads, hidden, conv=4):
        super().__init__()
        self.heads, self.conv_len = heads, conv
        self.norm1, self.norm2, self.onorm = RmsNorm(d), RmsNorm(d), RmsNorm(d // heads)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.conv = nn.Conv1d(3 * d, 3 * d, conv, groups=3 * d, bias=False)
        self.beta, self.gate = nn.Linear(d, heads, bias=False), nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.up, self.up_gate = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x, state, tail, chunk):
        b, t, d = x.shape
        h = self.norm1(x)
        c = self.qkv(h).mT
        c = torch.cat([tail.to(c.dtype), c], 2)
        new_tail = c[:, :, -(self.conv_len - 1):].clone()
        q, k, v = (z.reshape(b, t, self.heads, -1).float().transpose(1, 2)
                   for z in F.silu(self.conv(c)).mT.split(d, -1))
        beta = torch.sigmoid(self.beta(h).float()).transpose(1, 2)
        with torch.autocast(DEV.type, enabled=False):
            y, state = _delta_rule(F.normalize(q, dim=-1), F.normalize(k, dim=-1), v, beta, state,
                                   chunk)
        y = self.onorm(y.transpose(1, 2)) * F.silu(self.gate(h)).view(b, t, self.heads, -1)
        x = x + self.o(y.reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.up_gate(h)) * self.up(h)), state, new_tail


# GPU peak about 19 GiB: 589M fp32 parameters with gradients and AdamW 9.4 GiB; 16 checkpointed
# block inputs of 8 x 2,048 x 1,536 fp32 1.6 GiB; a block recomputed in backward about 3.5 GiB
# (fp32 q, k, v and their WY factors, 32 chunks' states and outputs kept by the recurrence); the
# logits of 16,384 tokens over 32,000 in fp32 and their gradients about 7 GiB. Time: about 75
# TFLOP a segment (0.25 s) and some 18,000 kernels (the chunk loop forward, recomputed and
# backward), about 0.6 s a segment; 6 documents of 2-3 segments, some 12 s.
def deltanet_chunked_state_train(steps):
    """A DeltaNet language model (Yang et al. 2024; 16 layers, d 1,536, 12 heads of 128, SwiGLU
    4,096, vocab 32,000) trained as a recurrent model over long documents: 8 documents of
    2,560-6,144 tokens a step (a new length each step) in segments of 2,048 (the last one
    shorter), each segment starting from the states the previous one left (detached: the delta
    rule's 128 x 128 state per head and the short convolutions' last inputs), an optimizer step
    per segment. The delta rule in chunks of 64 in fp32 (triangular solves for the WY factors, a
    loop over chunks), each layer checkpointed, the rest in bf16 autocast; AdamW."""
    torch.manual_seed(265)
    vocab, d, depth, heads, hidden, batch, seg, chunk, lengths = (
        (32000, 1536, 16, 12, 4096, 8, 2048, 64, (10, 24)) if CUDA
        else (100, 32, 2, 4, 64, 2, 16, 4, (3, 6)))
    unit, hd = 256 if CUDA else 4, d // heads
    with torch.device(DEV):
        emb, norm, head = nn.Embedding(vocab, d), RmsNorm(d), nn.Linear(d, vocab, bias=False)
        blocks = nn.ModuleList(_DeltaNetBlock(d, heads, hidden) for _ in range(depth))
    model = nn.ModuleList([emb, blocks, norm, head])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    amp, gen = _amp(torch.bfloat16), _generator(265)
    for _ in range(steps):
        length = _randint(gen, *lengths) * unit
        ids = torch.randint(0, vocab, (batch, length + 1), device=DEV)
        carry = [(torch.zeros(batch, heads, hd, hd, device=DEV),
                  torch.zeros(batch, 3 * d, 3, device=DEV)) for _ in blocks]
        for s in range(0, length, seg):
            t, nxt = min(seg, length - s), []
            with torch.autocast(**amp):
                x = emb(ids[:, s:s + t])
                for blk, (state, tail) in zip(blocks, carry):
                    x, state, tail = checkpoint(blk, x, state, tail, chunk, use_reentrant=False)
                    nxt.append((state.detach(), tail.detach()))
                logits = head(norm(x)).float()
            loss = F.cross_entropy(logits.flatten(0, 1), ids[:, s + 1:s + t + 1].flatten())
            del x, logits
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            carry = nxt
            del loss, nxt, state, tail


# ---------------------------------------------- GaLore, optimizer steps in backward

def _range_basis(g, rank, left):
    """An orthonormal basis (m x rank) of the top left (right if not `left`) singular subspace
    of g, by randomised SVD's range finder: a Gaussian sketch, one power iteration, QR."""
    a = g if left else g.mT
    y = a @ (a.mT @ (a @ torch.randn(a.shape[1], rank, device=g.device)))
    return torch.linalg.qr(y).Q


# GPU peak about 31 GiB: 1.34B bf16 parameters 2.7 GiB; GaLore's fp32 projections and low-rank
# moments about 3 GiB (rank 512), AdamW's for the embedding and head 1 GiB; no gradient is kept
# past its hook (one at a time, at most 5,461 x 2,048 fp32 with its projection); the
# activations of 8 x 1,024 tokens through 24 blocks in bf16, about 0.85 GiB a block (20 GiB);
# the logits and loss in fp32 with their gradients about 4.5 GiB. Time: about 66 TFLOP a step
# (0.3 s), 195 hooks of some 15 kernels; three refreshes of 144 projections (QR of up to 5,461 x
# 512, about 1 s each): 12 steps, some 8 s.
def galore_layerwise_train(steps):
    """GaLore (Zhao et al. 2024) pre-training of its LLaMA-1B (24 blocks, d 2,048, 32 heads,
    SwiGLU 5,461, vocab 32,000) in pure bf16 on 8 x 1,024 tokens, with the per-layer optimizer of
    its repository: a post-accumulate-grad hook on every parameter steps it as soon as backward
    makes its gradient and frees that gradient. The blocks' matrices take GaLore's AdamW: the
    gradient projected to rank 512 on its shorter side, the moments kept at that rank, the
    update projected back and scaled by 0.25; the projections refreshed every 5 steps (a
    randomised range finder and QR in place of a full SVD). Embeddings, norms and head: AdamW."""
    torch.manual_seed(266)
    vocab, d, depth, heads, hidden, batch, t, rank, gap = (
        (32000, 2048, 24, 32, 5461, 8, 1024, 512, 5) if CUDA
        else (100, 32, 2, 4, 48, 2, 16, 8, 1))
    with torch.device(DEV):
        emb, norm, head = nn.Embedding(vocab, d), RmsNorm(d), nn.Linear(d, vocab, bias=False)
        blocks = nn.ModuleList(LlamaBlock(d, heads, heads, hidden) for _ in range(depth))
    model = nn.ModuleList([emb, blocks, norm, head])
    if CUDA:
        model = model.to(torch.bfloat16)
    low = {id(p) for p in blocks.parameters() if p.dim() == 2}
    lr, (b1, b2), eps, wd, scale = 1e-2, (0.9, 0.999), 1e-8, 0.0, 0.25
    state, clock = {}, [0]

    def hook(p):
        with torch.no_grad():
            g, st = p.grad.float(), state.setdefault(id(p), {})
            p.grad = None
            if id(p) in low:
                left = p.shape[0] <= p.shape[1]
                if clock[0] % gap == 0:
                    st["P"] = _range_basis(g, rank, left)
                g = st["P"].mT @ g if left else g @ st["P"]
            if "m" not in st:
                st["m"], st["v"] = torch.zeros_like(g), torch.zeros_like(g)
            st["m"].lerp_(g, 1 - b1)
            st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
            n = clock[0] + 1
            upd = (st["m"] / (1 - b1 ** n)) / (st["v"] / (1 - b2 ** n)).sqrt_().add_(eps)
            if id(p) in low:
                upd = (st["P"] @ upd if left else upd @ st["P"].mT) * scale
            p.mul_(1 - lr * wd).add_(upd.to(p.dtype), alpha=-lr)

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)
    angles = _angles(t, d // heads)
    cos, sin = angles.cos(), angles.sin()
    for _ in range(steps):
        ids = torch.randint(0, vocab, (batch, t + 1), device=DEV)
        x = emb(ids[:, :-1])
        for blk in blocks:
            x = blk(x, cos.to(x.dtype), sin.to(x.dtype))
        loss = F.cross_entropy(head(norm(x)).float().flatten(0, 1), ids[:, 1:].flatten())
        del x
        loss.backward()
        clock[0] += 1
        del ids, loss


# ------------------------------------------- MoE decoding with experts on the host

class _MoeLayer(nn.Module):
    """A Mixtral layer's resident part: grouped-query attention with a cache grown by
    concatenation, the router, two RMSNorms (the experts live elsewhere)."""

    def __init__(self, d, heads, kv, experts):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv, d // heads
        self.norm1, self.norm2 = RmsNorm(d), RmsNorm(d)
        self.q, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, 2 * kv * self.hd, bias=False)
        self.router = nn.Linear(d, experts, bias=False)

    def attend(self, x, cache, cos, sin):
        b, t, d = x.shape
        h = self.norm1(x)
        q = _rope(self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2), cos, sin)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.hd).permute(2, 0, 3, 1, 4)
        k = _rope(k, cos, sin)
        if cache:
            k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
        cache.update(k=k, v=v)
        rep = self.heads // self.kv_heads
        y = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1),
                                           v.repeat_interleave(rep, 1), is_causal=t > 1)
        return x + self.o(y.transpose(1, 2).reshape(b, t, d))

    def route(self, x, top=2):
        w, sel = self.router(self.norm2(x)).float().softmax(-1).topk(top, -1)
        return w / w.sum(-1, keepdim=True), sel


# GPU peak about 6 GiB: at most 4 experts a layer kept past the layer, 16 x 4 x 69 MiB (4.4
# GiB), with up to 4 more loaded for a prefill and a layer's speculative prefetches in flight;
# attention, routers, embedding and head 0.65 GiB; caches and activations of 2 x 560 tokens
# under 0.2 GiB. Time: decoding moves 1-2 experts a layer a token from pinned memory, about 2
# GiB a token at 25-50 GB/s (40-90 ms); 16-48 tokens and a prefill a step: about 2.5 s, 6
# steps, some 15 s.
def moe_expert_offload_lru_decode(steps):
    """Mixtral-style decoding with the experts offloaded (Eliseev and Mazur's mixtral-offloading):
    16 layers (d 2,048, 16 heads sharing 4 key/value heads, vocab 32,000; fp16, inference mode)
    of 8 SwiGLU experts (5,632 wide, 69 MiB each) in pinned host memory, top-2 routing. Each
    layer keeps its most recently used 4 experts on the GPU; a missing one is copied on a copy
    stream (the main stream waits on its event and records the weights as used) and the least
    recently used freed. While decoding, the next layer's router applied to the current hidden
    state picks experts to prefetch on the copy stream. A request a step: 1-2 prompts of 64-512
    tokens prefilled (every expert of every layer needed), then 16-48 tokens decoded greedily."""
    torch.manual_seed(267)
    vocab, d, layers, heads, kv, hidden, experts, keep, distinct, prompts, news = (
        (32000, 2048, 16, 16, 4, 5632, 8, 4, 12, (64, 512), (16, 48)) if CUDA
        else (100, 32, 2, 4, 2, 48, 4, 2, 3, (4, 8), (2, 4)))
    with torch.device(DEV):
        emb, norm = _half(nn.Embedding(vocab, d)), _half(RmsNorm(d))
        head = _half(nn.Linear(d, vocab, bias=False))
        mods = _half(nn.ModuleList(_MoeLayer(d, heads, kv, experts) for _ in range(layers)))
    dt = emb.weight.dtype
    # The host copies: `distinct` random experts, shared round-robin by the 128 (the copies
    # and the trace are those of 128 different ones).
    pool = []
    for _ in range(distinct):
        ws = [torch.randn(s) * d ** -0.5 for s in ((hidden, d), (hidden, d), (d, hidden))]
        pool.append(tuple(w.to(dt).pin_memory() if CUDA else w.to(dt) for w in ws))
    copy, gen = _stream(), _generator(267)
    cache = [OrderedDict() for _ in range(layers)]  # expert -> [weights, copy's event]

    def fetch(i, e):
        if e in cache[i]:
            cache[i].move_to_end(e)
            return
        with _on(copy):
            ws = tuple(w.to(DEV, non_blocking=True) for w in pool[(i * experts + e) % distinct])
        event = None
        if copy is not None:
            event = torch.cuda.Event()
            event.record(copy)
        cache[i][e] = [ws, event]

    def ready(i, e):
        entry = cache[i][e]
        if entry[1] is not None:
            main = torch.cuda.current_stream()
            main.wait_event(entry[1])
            for w in entry[0]:
                w.record_stream(main)
            entry[1] = None
        return entry[0]

    def trim(i):
        while len(cache[i]) > keep:
            cache[i].popitem(last=False)

    angles = _angles(prompts[1] + news[1], d // heads)
    with torch.inference_mode():
        for _ in range(steps):
            b, t, new = _randint(gen, 1, 2), _randint(gen, *prompts), _randint(gen, *news)
            caches, tok, pos = [{} for _ in mods], torch.randint(0, vocab, (b, t), device=DEV), 0
            for _ in range(new):
                n = tok.shape[1]
                cos, sin = (f.to(dt) for f in (angles[pos:pos + n].cos(),
                                               angles[pos:pos + n].sin()))
                x = emb(tok)
                for i, layer in enumerate(mods):
                    x = layer.attend(x, caches[i], cos, sin)
                    if n == 1 and i + 1 < layers:  # speculative: the next layer's guess
                        for e in mods[i + 1].route(x)[1].unique().tolist():
                            fetch(i + 1, e)
                        trim(i + 1)
                    w, sel = layer.route(x)
                    h, out = layer.norm2(x).view(-1, d), torch.zeros_like(x).view(-1, d)
                    w, sel = w.view(-1, 2), sel.view(-1, 2)
                    needed = sel.unique().tolist()
                    for e in needed:
                        fetch(i, e)
                    for e in needed:
                        w1, w3, w2 = ready(i, e)
                        rows, slot = (sel == e).nonzero(as_tuple=True)
                        xe = h[rows]
                        y = F.linear(F.silu(F.linear(xe, w1)) * F.linear(xe, w3), w2)
                        out.index_add_(0, rows, y * w[rows, slot, None].to(y.dtype))
                    x = x + out.view_as(x)
                    trim(i)
                tok = head(norm(x[:, -1:])).argmax(-1)
                pos += n
            del caches, tok, x, h, out


# -------------------------------------------------- Hyena, long FFT convolutions

class _Sin(nn.Module):
    def __init__(self, width, w=10.0):
        super().__init__()
        self.freq = nn.Parameter(w * torch.ones(1, width))

    def forward(self, x):
        return torch.sin(self.freq * x)


class _HyenaFilter(nn.Module):
    """Hyena's implicit long filter (HyenaDNA's HyenaFilter): an MLP with sine activations over
    positional features, times an exponentially decaying window, one filter a channel."""

    def __init__(self, d, emb=5, width=64, fast=0.3, slow=1.5):
        super().__init__()
        self.bands = (emb - 1) // 2
        self.mlp = nn.Sequential(nn.Linear(emb, width), _Sin(width), nn.Linear(width, width),
                                 _Sin(width), nn.Linear(width, d, bias=False))
        self.register_buffer("deltas", torch.linspace(math.log(1e-2) / fast,
                                                      math.log(1e-2) / slow, d).abs())
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, length):
        t = torch.linspace(0, 1, length, device=self.deltas.device)[:, None]
        w = 2 * math.pi * torch.arange(length, device=t.device)[:, None] / length
        f = torch.linspace(1e-4, self.bands - 1, self.bands, device=t.device)[None]
        z = torch.cat([t, torch.cos(f * w), -torch.sin(f * w)], -1)
        return (self.mlp(z) * torch.exp(-t * self.deltas)).mT


def _fftconv(u, k, bias):
    """The causal convolution of u (B, D, L) with filters k (D, L) by FFTs of 2L, plus u * bias
    (HyenaDNA's fftconv)."""
    n = 2 * u.shape[-1]
    y = torch.fft.irfft(torch.fft.rfft(u, n=n) * (torch.fft.rfft(k, n=n) / n), n=n, norm="forward")
    return y[..., :u.shape[-1]] + u * bias[:, None]


class _HyenaBlock(nn.Module):
    """A Hyena operator of order 2 (a short depthwise convolution, gating, one long implicit
    convolution, gating) and an MLP."""

    def __init__(self, d, hidden):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.inp, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.short = nn.Conv1d(3 * d, 3 * d, 3, padding=2, groups=3 * d)
        self.filt = _HyenaFilter(d)
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        b, length, d = x.shape
        x0, x1, v = self.short(self.inp(self.ln1(x)).mT)[..., :length].split(d, 1)
        with torch.autocast(DEV.type, enabled=False):
            v = _fftconv((v * x1).float(), self.filt(length), self.filt.bias)
        x = x + self.out((v * x0).mT)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


# GPU peak about 22 GiB, at 131,072 tokens in one sequence: a block keeps about 2.4 GiB (its
# LayerNorms' fp32 inputs, the projection and short convolution in bf16, the fp32 input of the
# long convolution and its 2L-point complex spectrum, 268 MiB, the filters' spectrum, 268 MiB,
# the gated output, the MLP's 4,096-wide bf16 activations), 8 blocks about 19 GiB; the filter
# MLPs at 131,072 positions and the transient products and inverse transforms add 2-3 GiB.
# Time: about 100 FFTs of 0.3-0.5 GiB and 5 TFLOP of projections a step, some 0.3 s; 16 steps,
# some 5 s with the cuFFT plans of four lengths.
def hyena_fft_longconv_train(steps):
    """A HyenaDNA-style long-range model (8 Hyena blocks of d 256 with MLPs of 1,024, 12-token
    nucleotide vocabulary) trained by next-token prediction with HyenaDNA's sequence-length
    warm-up: 131,072 tokens a step as 8 x 16,384, then 4 x 32,768, 2 x 65,536 and 1 x 131,072 (a
    quarter of the steps each). Every block regenerates its 256 implicit filters at the
    sequence's length and convolves by FFTs of twice that length in fp32 (complex spectra of
    the input and the filters kept for backward); the rest in bf16 autocast; AdamW, clipping."""
    torch.manual_seed(268)
    vocab, d, depth, hidden, plan = (
        (12, 256, 8, 1024, ((16384, 8), (32768, 4), (65536, 2), (131072, 1))) if CUDA
        else (12, 16, 2, 64, ((64, 4), (128, 2))))
    with torch.device(DEV):
        emb, ln, head = nn.Embedding(vocab, d), nn.LayerNorm(d), nn.Linear(d, vocab)
        blocks = nn.ModuleList(_HyenaBlock(d, hidden) for _ in range(depth))
    model = nn.ModuleList([emb, blocks, ln, head])
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    amp = _amp(torch.bfloat16)
    for step in range(steps):
        length, b = plan[min(step * len(plan) // steps, len(plan) - 1)]
        ids = torch.randint(0, vocab, (b, length + 1), device=DEV)
        with torch.autocast(**amp):
            x = emb(ids[:, :-1])
            for blk in blocks:
                x = blk(x)
            logits = head(ln(x)).float()
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        del x, logits
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del ids, loss


WORKLOADS = {
    "sae_activation_buffer_train": (sae_activation_buffer_train, 6),
    "qlora_nf4_accum_train": (qlora_nf4_accum_train, 6),
    "graphormer_spd_bias_train": (graphormer_spd_bias_train, 20),
    "causal_video_vae_chunked_infer": (causal_video_vae_chunked_infer, 8),
    "deltanet_chunked_state_train": (deltanet_chunked_state_train, 6),
    "galore_layerwise_train": (galore_layerwise_train, 12),
    "moe_expert_offload_lru_decode": (moe_expert_offload_lru_decode, 6),
    "hyena_fft_longconv_train": (hyena_fft_longconv_train, 16),
}
