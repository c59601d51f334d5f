"""The twenty-fourth corpus: eight workloads written on 2026-11-27, held out from every
change to the allocator until recorded. Same conventions as workloads.py: `run(steps)`
builds its models and data on DEV and runs `steps` steps; random weights; seeded. On the
CPU (RECORD_DEVICE=cpu) the models and data are smaller.

Each holds memory in a way the first twenty-three corpora do not: Mamba-2 (the chunked SSD
scan: decay matrices of chunk x chunk per head and chunk, every layer recomputed under
checkpointing, a new length every step); GraphSAGE (a new three-hop subgraph a step sampled on
the host, its features copied on a loader stream a batch ahead); a 3-D U-Net (patches trained,
then whole volumes of new sizes by sliding windows into a volume-sized accumulator); ELECTRA
(a generator and a discriminator sharing embeddings, logits at a varying number of masked
positions); H2O decoding (a key/value cache grown to a budget, then a token evicted per head
every token by gathering); a sparsity sweep (weights pruned by magnitude to CSR at a new level,
cuSPARSE's workspaces); DGCNN (a k-nearest-neighbour graph in feature space rebuilt at every
layer: point x point distances, top-k, gathered edge features); Tacotron 2 (hundreds of
decoder steps with location-sensitive attention kept for backward, free-running synthesis).
"""
import itertools

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from workloads import DEV, Gpt
# Earlier corpora's helpers: autocast, generators, streams and hand-over (thirteenth); an
# integer in a closed range, fp16 on the GPU (fourteenth); RMSNorm (sixteenth); a step.
from workloads_thirteenth import CUDA, _amp, _generator, _hand_over, _on, _stream
from workloads_fourteenth import _half, _randint
from workloads_sixteenth import RmsNorm
from workloads_twentyfirst import _update


# ------------------------------------------------------------- Mamba-2, the SSD chunks

def _segsum_exp(a):
    """exp of every segment sum of `a` (..., t): [i, j] = exp(a[j+1] + ... + a[i]) for
    j <= i, 0 above the diagonal (..., t, t), in fp32."""
    t, s = a.shape[-1], a.float().cumsum(-1)
    keep = torch.ones(t, t, dtype=torch.bool, device=a.device).tril()
    return (s[..., :, None] - s[..., None, :]).masked_fill(~keep, float("-inf")).exp()


class _Mamba2(nn.Module):
    """A Mamba-2 layer (one group of B and C, heads of 64) with the SSD algorithm of
    `ssd_minimal`: intra-chunk products through the decay matrices, chunk states passed on."""

    def __init__(self, d, n, p, k=4):
        super().__init__()
        inner = 2 * d
        self.n, self.p, self.h, self.sizes = n, p, inner // p, [inner, inner + 2 * n, inner // p]
        self.norm, self.gate_norm = RmsNorm(d), RmsNorm(inner)
        self.inp = nn.Linear(d, sum(self.sizes), bias=False)
        self.conv = nn.Conv1d(inner + 2 * n, inner + 2 * n, k, padding=k - 1, groups=inner + 2 * n)
        self.dt_bias = nn.Parameter(torch.rand(self.h) - 4)
        self.a_log = nn.Parameter((1 + 15 * torch.rand(self.h)).log())
        self.skip = nn.Parameter(torch.ones(self.h))
        self.out = nn.Linear(inner, d, bias=False)

    def forward(self, u, chunk):
        (b, s, _), h, c = u.shape, self.h, u.shape[1] // chunk
        z, xbc, dt = self.inp(self.norm(u)).split(self.sizes, -1)
        xbc = F.silu(self.conv(xbc.transpose(1, 2))[..., :s].transpose(1, 2))
        x, bm, cm = xbc.split([self.sizes[0], self.n, self.n], -1)
        dt = F.softplus(dt.float() + self.dt_bias).view(b, c, chunk, h)
        a = (-self.a_log.exp() * dt).permute(0, 3, 1, 2)  # b h c l
        acum = a.cumsum(-1)
        x = x.reshape(b, c, chunk, h, self.p)
        xd = x * dt[..., None]
        bm, cm = bm.reshape(b, c, chunk, self.n), cm.reshape(b, c, chunk, self.n)
        scores = torch.einsum("bcln,bcsn->bcls", cm, bm)[:, None] * _segsum_exp(a)
        y = torch.einsum("bhcls,bcshp->bclhp", scores, xd)
        states = torch.einsum("bcln,bhcl,bclhp->bchpn", bm, (acum[..., -1:] - acum).exp(), xd)
        states = torch.cat([torch.zeros_like(states[:, :1]), states], 1)
        decay = _segsum_exp(F.pad(acum[..., -1], (1, 0)))
        states = torch.einsum("bhzc,bchpn->bzhpn", decay, states)[:, :-1]
        y = y + torch.einsum("bcln,bchpn,bhcl->bclhp", cm, states, acum.exp())
        y = (y + x * self.skip[:, None]).reshape(b, s, -1)
        return u + self.out(self.gate_norm(y * F.silu(z)))


def mamba2_ssd_chunked_train(steps):
    """A 12-layer Mamba-2 language model (d 1,024, inner 2,048, 32 heads of 64, state 128,
    vocab 32,000) trained on 4 sequences of 1,024-4,096 tokens (a new length every step, in
    chunks of 256) with the chunked SSD scan written in einsums: per layer a 4 x 32 x chunks x
    256 x 256 decay matrix and its products, each layer recomputed in backward
    (torch.utils.checkpoint). bf16 autocast, AdamW."""
    torch.manual_seed(241)
    vocab, d, layers, n, p, chunk, batch, chunks = (
        (32000, 1024, 12, 128, 64, 256, 4, (4, 16)) if CUDA else (100, 32, 2, 8, 8, 8, 2, (2, 4)))
    with torch.device(DEV):
        model = nn.ModuleDict(dict(
            embed=nn.Embedding(vocab, d), norm=RmsNorm(d), head=nn.Linear(d, vocab, bias=False),
            layers=nn.ModuleList(_Mamba2(d, n, p) for _ in range(layers))))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    gen = _generator(241)
    for _ in range(steps):
        s = chunk * _randint(gen, *chunks)
        ids = torch.randint(0, vocab, (batch, s + 1), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            h = model["embed"](ids[:, :-1])
            for layer in model["layers"]:
                h = checkpoint(layer, h, chunk, use_reentrant=False)
            logits = model["head"](model["norm"](h))
        _update(opt, F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()))


# -------------------------------------------- GraphSAGE, sampled on the host, prefetched

def _sample_hop(rowptr, col, nodes, fanout, gen):
    """Up to `fanout` neighbours of each of `nodes` (drawn with replacement, on the host):
    the next hop's nodes (unique, the targets among them), where the targets are in it, and
    the edges (target's number in `nodes`, source's in the next hop)."""
    start, deg = rowptr[nodes], rowptr[nodes + 1] - rowptr[nodes]
    take = torch.arange(fanout) < deg[:, None]
    pick = start[:, None] + (torch.rand(len(nodes), fanout, generator=gen) * deg[:, None]).long()
    uniq, inv = torch.unique(torch.cat([nodes, col[pick[take]]]), return_inverse=True)
    return uniq, inv[:len(nodes)], inv[len(nodes):], take.nonzero()[:, 0]


def graphsage_sampled_prefetch_train(steps):
    """GraphSAGE (3 layers, hidden 256, 47 classes) trained by neighbour sampling as PyG's
    NeighborLoader does, on a graph of 1M nodes (power-law degrees, about 18M edges, CSR on the
    host) whose 128-d fp16 features stay in host memory: each step 1,024 seeds, three hops of
    15, 10, 5 neighbours sampled and renumbered on the host (a new subgraph of some 10^5 nodes
    every step); its features gathered into pinned memory and copied with the edges on a loader
    stream one batch ahead, handed to the main stream (record_stream). Mean aggregation by
    index_add_, Adam. fp32 on the GPU."""
    torch.manual_seed(242)
    nodes, feat, hidden, classes, batch, fanouts, degs = (
        (1_000_000, 128, 256, 47, 1024, (15, 10, 5), (4, 512)) if CUDA
        else (2000, 16, 16, 5, 32, (4, 3, 2), (1, 20)))
    gen = _generator(242)
    deg = (degs[0] * torch.rand(nodes, generator=gen).pow(-0.8)).long().clamp(max=degs[1])
    rowptr = F.pad(deg.cumsum(0), (1, 0))
    col = torch.randint(0, nodes, (int(rowptr[-1]),), generator=gen)
    feats = torch.randn(nodes, feat, generator=gen).half()
    labels = torch.randint(0, classes, (nodes,), generator=gen)
    dims = (feat,) + (hidden,) * (len(fanouts) - 1)
    model = nn.ModuleList(nn.Linear(2 * i, o) for i, o in zip(dims, dims[1:] + (classes,))).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    side, pin = _stream(), (lambda t: t.pin_memory()) if CUDA else (lambda t: t)

    def load():
        seeds = torch.randint(0, nodes, (batch,), generator=gen)
        hops, sizes, frontier = [], [], seeds
        for f in fanouts:
            uniq, *edges = _sample_hop(rowptr, col, frontier, f, gen)
            hops += edges
            sizes.append(len(frontier))
            frontier = uniq
        x = torch.empty((len(frontier), feat), dtype=feats.dtype, pin_memory=CUDA)
        torch.index_select(feats, 0, frontier, out=x)
        with _on(side):  # the loader stream allocates the batch
            return [t.to(DEV, non_blocking=True) for t in [x, pin(labels[seeds])] + [
                pin(t) for t in hops]], sizes

    nxt = load()
    for _ in range(steps):
        (x, y, *hops), sizes = nxt
        _hand_over(nxt[0], side)
        h = x.float()
        for i, lin in enumerate(model):  # the outermost hop first
            here, src, tgt = hops[3 * (len(model) - 1 - i):][:3]
            n = sizes[len(model) - 1 - i]
            agg = torch.zeros(n, h.shape[1], device=DEV).index_add_(0, tgt, h[src])
            agg = agg / torch.bincount(tgt, minlength=n).clamp(min=1)[:, None]
            h = lin(torch.cat([h[here], agg], 1))
            if i < len(model) - 1:
                h = F.dropout(F.relu(h), 0.5)
        _update(opt, F.cross_entropy(h, y))
        nxt = load()  # sampled on the host while the GPU runs the step
        del x, y, hops, h, agg
    if CUDA:
        torch.cuda.current_stream().wait_stream(side)
    del nxt


# ------------------------------------------------ 3-D U-Net, sliding-window inference

def _conv3(i, o, stride=1):
    return nn.Sequential(nn.Conv3d(i, o, 3, stride, 1), nn.InstanceNorm3d(o, affine=True),
                         nn.LeakyReLU(0.01, inplace=True))


class _UNet3d(nn.Module):
    """nnU-Net's 3-D U-Net: two convolutions a level, strided down, transposed up."""

    def __init__(self, widths, classes):
        super().__init__()
        self.down = nn.ModuleList(nn.Sequential(_conv3(i, o, 2 if k else 1), _conv3(o, o))
                                  for k, (i, o) in enumerate(zip((1,) + widths, widths)))
        self.up = nn.ModuleList(nn.ConvTranspose3d(o, i, 2, 2) for i, o in zip(widths, widths[1:]))
        self.dec = nn.ModuleList(nn.Sequential(_conv3(2 * i, i), _conv3(i, i)) for i in widths[:-1])
        self.out = nn.Conv3d(widths[0], classes, 1)

    def forward(self, x):
        skips = []
        for blk in self.down:
            skips.append(x := blk(x))
        x = skips.pop()
        for up, dec in reversed(list(zip(self.up, self.dec))):
            x = dec(torch.cat([up(x), skips.pop()], 1))
        return self.out(x)


def unet3d_sliding_window_train(steps):
    """3-D segmentation as nnU-Net trains and infers: a 5-level U-Net (32-320 channels,
    instance norm, 4 classes) trained on 2 random patches of 128^3 (cross-entropy plus soft
    Dice, fp16 autocast with a gradient scaler, SGD with Nesterov momentum); every fourth step
    from the second, a whole volume of 128-256 voxels a side (a new shape each time) segmented
    by sliding windows of 128^3 at half overlap, 2 windows a batch, Gaussian-weighted into
    volume-sized class and weight accumulators (no_grad)."""
    torch.manual_seed(243)
    widths, classes, batch, patch, unit, sides, sw = (
        ((32, 64, 128, 256, 320), 4, 2, 128, 16, (8, 16), 2) if CUDA
        else ((4, 8, 16), 3, 1, 16, 8, (2, 4), 2))
    model = _UNet3d(widths, classes).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.99, nesterov=True)
    scaler = torch.amp.GradScaler("cuda", enabled=CUDA)
    amp, gen = _amp(torch.float16), _generator(243)
    g = torch.exp(-0.5 * ((torch.arange(patch) - (patch - 1) / 2) / (patch / 8)) ** 2)
    importance = (g[:, None, None] * g[:, None] * g).clamp_min(1e-3).to(DEV)
    for step in range(steps):
        x = torch.randn(batch, 1, patch, patch, patch, device=DEV)
        y = torch.randint(0, classes, (batch, patch, patch, patch), device=DEV)
        with torch.autocast(**amp):
            logits = model(x)
        prob, onehot = logits.float().softmax(1), F.one_hot(y, classes).permute(0, 4, 1, 2, 3)
        inter, total = (prob * onehot).sum((2, 3, 4)), (prob + onehot).sum((2, 3, 4))
        loss = F.cross_entropy(logits.float(), y) + 1 - ((2 * inter + 1) / (total + 1)).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        del x, y, logits, prob, onehot, loss
        if step % 4 == 1:
            shape = [unit * _randint(gen, *sides) for _ in range(3)]
            vol = torch.randn(1, 1, *shape, device=DEV)
            acc = torch.zeros(1, classes, *shape, device=DEV)
            weight = torch.zeros(1, 1, *shape, device=DEV)
            starts = [sorted(set(range(0, s - patch, patch // 2)) | {s - patch}) for s in shape]
            corners = list(itertools.product(*starts))
            model.eval()
            with torch.no_grad():
                for i in range(0, len(corners), sw):
                    group = [tuple(slice(c, c + patch) for c in cs) for cs in corners[i:i + sw]]
                    crops = torch.cat([vol[(..., *sl)] for sl in group])
                    with torch.autocast(**amp):
                        p = model(crops).float().softmax(1) * importance
                    for k, sl in enumerate(group):
                        acc[(..., *sl)] += p[k]
                        weight[(..., *sl)] += importance
                (acc / weight).argmax(1).to(torch.uint8).cpu()
            model.train()
            del vol, acc, weight, crops, p


# ---------------------------------------------- ELECTRA, a generator and a discriminator

def electra_gen_disc_train(steps):
    """ELECTRA-base pre-training: a generator (12 layers, d 256) and a discriminator (12
    layers, d 768) sharing the token embeddings (30,522 x 768); 32 sequences of 64-512 tokens
    (new lengths, padded to the longest rounded up to 8, key padding masks), 15% masked; the
    generator's logits only at the masked positions (a new count every step), replacements
    sampled from them; the discriminator tells replaced tokens on every real one. bf16
    autocast, AdamW over both."""
    torch.manual_seed(244)
    vocab, dd, dg, hd, hg, layers, batch, lens = (
        (30522, 768, 256, 12, 4, 12, 32, (64, 512)) if CUDA else (200, 32, 16, 4, 2, 2, 4, (8, 16)))

    def encoder(d, heads):
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, 0.1, "gelu", batch_first=True)
        return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    with torch.device(DEV):
        model = nn.ModuleDict(dict(
            tok=nn.Embedding(vocab, dd), pos=nn.Embedding(lens[1], dd), ln=nn.LayerNorm(dd),
            gen_in=nn.Linear(dd, dg), gen=encoder(dg, hg), disc=encoder(dd, hd),
            gen_out=nn.Sequential(nn.Linear(dg, dg), nn.GELU(), nn.LayerNorm(dg),
                                  nn.Linear(dg, dd)),
            disc_out=nn.Sequential(nn.Linear(dd, dd), nn.GELU(), nn.Linear(dd, 1))))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    amp, gen = _amp(torch.bfloat16), _generator(244)
    for _ in range(steps):
        n = torch.randint(lens[0], lens[1] + 1, (batch,), generator=gen)
        t = -(-int(n.max()) // 8) * 8  # padded to a multiple of 8, as collators do
        pad = (torch.arange(t) >= n[:, None]).to(DEV)
        ids = torch.randint(5, vocab, (batch, t), device=DEV)
        masked = (torch.rand(batch, t, device=DEV) < 0.15) & ~pad
        masked[:, 0] = True

        def embed(tokens):
            return model["ln"](model["tok"](tokens) + model["pos"].weight[:t])

        with torch.autocast(**amp):
            g = model["gen"](model["gen_in"](embed(ids.masked_fill(masked, 4))),
                             src_key_padding_mask=pad)
            logits = (model["gen_out"](g[masked]) @ model["tok"].weight.t()).float()
            mlm = F.cross_entropy(logits, ids[masked])
            with torch.no_grad():
                sampled = torch.multinomial(logits.softmax(-1), 1)[:, 0]
                corrupt = ids.masked_scatter(masked, sampled)
            h = model["disc"](embed(corrupt), src_key_padding_mask=pad)
            d_logits = model["disc_out"](h)[..., 0].float()
        real = ~pad
        disc = F.binary_cross_entropy_with_logits(d_logits[real], (corrupt != ids)[real].float())
        _update(opt, mlm + 50 * disc)


# ------------------------------------------------ H2O, heavy hitters kept in the cache

def _h2o_attend(blk, x, cache, budget, recent):
    """A block's attention with the scores written out, so that every key's accumulated
    attention is known: beyond `budget` keys, the heavy hitters and the last `recent` kept."""
    b, t, d = x.shape
    q, k, v = (z.view(b, t, blk.heads, -1).transpose(1, 2) for z in blk.qkv(blk.ln1(x)).split(d, 2))
    if cache:
        k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
    att = (q @ k.transpose(-2, -1)) * (d // blk.heads) ** -0.5
    if t > 1:
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool, device=DEV).triu(1), float("-inf"))
    att = att.float().softmax(-1)
    y = blk.proj((att.to(v.dtype) @ v).transpose(1, 2).reshape(b, t, d))
    score, n = att.sum(2), k.shape[2]
    if cache:
        score = score + F.pad(cache["score"], (0, 1))
    if n > budget:
        if t > 1:  # after the prompt: the heaviest keys before the recent window, then it
            keep = score[..., :n - recent].topk(budget - recent, -1).indices.sort(-1).values
            window = torch.arange(n - recent, n, device=DEV).expand(b, blk.heads, -1)
            keep = torch.cat([keep, window], -1)
        else:  # one key evicted per head: the lightest before the recent window
            drop = score[..., :n - recent].argmin(-1, keepdim=True)
            keep = torch.arange(n - 1, device=DEV).expand(b, blk.heads, -1)
            keep = keep + (keep >= drop)
        k, v = (z.gather(2, keep[..., None].expand(-1, -1, -1, z.shape[-1])) for z in (k, v))
        score = score.gather(2, keep)
    cache.update(k=k, v=v, score=score)
    return y


def h2o_kv_evict_decode(steps):
    """Generation with H2O's heavy-hitter cache: a 12-layer GPT (d 1,024, 16 heads, vocab
    32,000, fp16, inference mode); each round 2-8 prompts of 512-2,048 tokens (new sizes every
    round) prefilled with the attention probabilities written out (b x 16 x t x t in fp32),
    each layer's cache cut per head to a budget of a fifth of the prompt (the heaviest keys by
    accumulated attention, then the most recent half); 64-128 tokens decoded greedily, every
    token's keys concatenated on and one key per head evicted by gathering."""
    torch.manual_seed(245)
    vocab, d, layers, heads, batches, plens, news = (
        (32000, 1024, 12, 16, (2, 8), (8, 32), (64, 128)) if CUDA
        else (100, 32, 2, 4, (1, 2), (4, 6), (4, 6)))
    with torch.device(DEV):
        model = _half(Gpt(vocab, d, layers, heads, 64 * plens[1] + news[1])).eval()
    gen = _generator(245)

    def forward(idx, caches, start, budget, recent):
        x = model.tok(idx) + model.pos(torch.arange(start, start + idx.shape[1], device=DEV))
        for blk, cache in zip(model.blocks, caches):
            x = x + _h2o_attend(blk, x, cache, budget, recent)
            x = x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x))))
        return model.head(model.ln(x[:, -1])).argmax(-1, keepdim=True)

    with torch.inference_mode():
        for _ in range(steps):
            b, p, new = _randint(gen, *batches), 64 * _randint(gen, *plens), _randint(gen, *news)
            if not CUDA:
                p //= 16
            budget = p // 5
            caches = [{} for _ in range(layers)]
            out = [forward(torch.randint(0, vocab, (b, p), device=DEV), caches, 0, budget,
                           budget // 2)]
            for i in range(new - 1):
                out.append(forward(out[-1], caches, p + i, budget, budget // 2))
            torch.cat(out, 1).cpu()
            del caches, out


# ------------------------------------------------- a sparsity sweep in CSR, cuSPARSE

def _sparse_linear(weights, lin, x):
    """`lin` applied to `x` with its weight in CSR (weights[lin]): W @ x^T, transposed back."""
    y = torch.sparse.mm(weights[lin], x.reshape(-1, x.shape[-1]).t()).t()
    return y.reshape(*x.shape[:-1], -1) + lin.bias


def sparse_csr_prune_sweep_infer(steps):
    """A pruning study's sweep: a 12-layer encoder (BERT-base sizes: d 768, 12 heads,
    feed-forward 3,072, vocab 30,522; fp32, inference mode) whose 48 linear layers are pruned
    by magnitude (kthvalue of |W|) to 70, 80, 90 or 95% sparsity and stored in CSR, a new
    level every 4 steps (every CSR weight made again, a new size); each step 4 requests of 1-16
    sequences of 32-256 tokens, every projection a sparse-dense product (cuSPARSE SpMM and its
    workspace), attention dense."""
    torch.manual_seed(246)
    vocab, d, layers, heads, batches, lens, levels, per = (
        (30522, 768, 12, 12, (1, 16), (32, 256), (0.7, 0.9, 0.8, 0.95), 4) if CUDA
        else (100, 32, 2, 4, (1, 3), (4, 8), (0.5, 0.8), 1))
    with torch.device(DEV):
        blocks = nn.ModuleList(nn.ModuleDict(dict(
            ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), proj=nn.Linear(d, d), ln2=nn.LayerNorm(d),
            fc1=nn.Linear(d, 4 * d), fc2=nn.Linear(4 * d, d))) for _ in range(layers))
        tok, pos, ln = nn.Embedding(vocab, d), nn.Embedding(lens[1], d), nn.LayerNorm(d)
    linears = [m for m in blocks.modules() if isinstance(m, nn.Linear)]
    gen, weights = _generator(246), {}
    with torch.inference_mode():
        for step in range(steps):
            if step % per == 0:  # the next level: the old CSR weights dropped, new ones made
                level, weights = levels[step // per % len(levels)], {}
                for m in linears:
                    cut = m.weight.abs().flatten().kthvalue(int(level * m.weight.numel())).values
                    weights[m] = m.weight.masked_fill(m.weight.abs() <= cut, 0).to_sparse_csr()
            for _ in range(4):
                b, t = _randint(gen, *batches), _randint(gen, *lens)
                ids = torch.randint(0, vocab, (b, t), device=DEV)
                x = ln(tok(ids) + pos.weight[:t])
                for blk in blocks:
                    qkv = _sparse_linear(weights, blk["qkv"], blk["ln1"](x))
                    q, k, v = qkv.view(b, t, 3, heads, -1).permute(2, 0, 3, 1, 4)
                    y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
                    x = x + _sparse_linear(weights, blk["proj"], y)
                    h = F.gelu(_sparse_linear(weights, blk["fc1"], blk["ln2"](x)))
                    x = x + _sparse_linear(weights, blk["fc2"], h)
                x[:, 0].cpu()


# ------------------------------------------- DGCNN, a k-NN graph rebuilt at every layer

def _edge_features(x, k):
    """DGCNN's edge features of `x` (b, c, n): for each point its k nearest in feature space
    (fp32 distances, top-k), [neighbour - point, point] as (b, 2c, n, k), channels last."""
    b, c, n = x.shape
    with torch.autocast(DEV.type, enabled=False):
        f = x.float()
        sq = f.pow(2).sum(1)
        idx = (2 * f.transpose(1, 2) @ f - sq[:, :, None] - sq[:, None]).topk(k, -1).indices
    pts = x.transpose(1, 2).reshape(b * n, c)
    nbr = pts[(idx + torch.arange(b, device=DEV)[:, None, None] * n).flatten()].view(b, n, k, c)
    centre = pts.view(b, n, 1, c).expand(-1, -1, k, -1)
    return torch.cat([nbr - centre, centre], 3).permute(0, 3, 1, 2)


def dgcnn_knn_graph_train(steps):
    """DGCNN point-cloud classification (40 classes): four EdgeConvs (64, 64, 128, 256), each
    on a k-nearest-neighbour graph (k 20) rebuilt from the previous layer's features (a 32 x
    N x N distance matrix, top-k, gathered 32 x 2C x N x 20 edge features), a 1,024-channel
    fusion, max and mean pooling, an MLP; 32 clouds of 1,024-2,048 points (a new count every
    step), scaled and shifted at random. bf16 autocast, SGD, label smoothing."""
    torch.manual_seed(247)
    widths, emb, k, batch, counts = (((64, 64, 128, 256), 1024, 20, 32, (8, 16)) if CUDA
                                     else ((8, 8, 16, 16), 32, 4, 2, (1, 2)))
    act = nn.LeakyReLU(0.2)
    model = nn.ModuleDict(dict(
        edges=nn.ModuleList(nn.Sequential(nn.Conv2d(2 * i, o, 1, bias=False), nn.BatchNorm2d(o),
                                          act) for i, o in zip((3,) + widths, widths)),
        fuse=nn.Sequential(nn.Conv1d(sum(widths), emb, 1, bias=False), nn.BatchNorm1d(emb), act),
        head=nn.Sequential(nn.Linear(2 * emb, 512, bias=False), nn.BatchNorm1d(512), act,
                           nn.Dropout(0.5), nn.Linear(512, 256), nn.BatchNorm1d(256), act,
                           nn.Dropout(0.5), nn.Linear(256, 40)))).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    gen = _generator(247)
    for _ in range(steps):
        n = 128 * _randint(gen, *counts) if CUDA else 32 * _randint(gen, *counts)
        x = torch.rand(batch, 3, n, device=DEV) * torch.empty(batch, 3, 1, device=DEV).uniform_(
            2 / 3, 3 / 2) + torch.empty(batch, 3, 1, device=DEV).uniform_(-0.2, 0.2)
        with torch.autocast(**_amp(torch.bfloat16)):
            feats = []
            for conv in model["edges"]:
                feats.append(x := conv(_edge_features(x, k)).amax(-1))
            f = model["fuse"](torch.cat(feats, 1))
            logits = model["head"](torch.cat([f.amax(-1), f.mean(-1)], 1))
        y = torch.randint(0, 40, (batch,), device=DEV)
        _update(opt, F.cross_entropy(logits.float(), y, label_smoothing=0.2))


# ---------------------------------------------- Tacotron 2, location-sensitive attention

class _Tacotron2(nn.Module):
    """Tacotron 2 as NVIDIA's: a conv + BiLSTM encoder, a prenet, an attention LSTM with
    location-sensitive attention, a decoder LSTM, r frames a step, a postnet."""

    def __init__(self, vocab, d, rnn, att, mels, r):
        super().__init__()
        self.r, self.mels = r, mels
        self.embed = nn.Embedding(vocab, d)
        self.convs = nn.Sequential(*[nn.Sequential(nn.Conv1d(d, d, 5, padding=2), nn.BatchNorm1d(d),
                                                   nn.ReLU(), nn.Dropout(0.5)) for _ in range(3)])
        self.blstm = nn.LSTM(d, d // 2, batch_first=True, bidirectional=True)
        self.prenet = nn.Sequential(nn.Linear(mels * r, 256), nn.ReLU(), nn.Linear(256, 256),
                                    nn.ReLU())
        self.att_rnn, self.dec_rnn = nn.LSTMCell(256 + d, rnn), nn.LSTMCell(rnn + d, rnn)
        self.query, self.memory = nn.Linear(rnn, att, bias=False), nn.Linear(d, att, bias=False)
        self.loc = nn.Conv1d(2, 32, 31, padding=15, bias=False)
        self.loc_dense, self.v = nn.Linear(32, att, bias=False), nn.Linear(att, 1, bias=False)
        self.proj, self.gate = nn.Linear(rnn + d, mels * r), nn.Linear(rnn + d, r)
        nn.init.constant_(self.gate.bias, -3.0)
        chans = [mels] + [512] * 4 + [mels]
        self.postnet = nn.Sequential(*[nn.Sequential(
            nn.Conv1d(i, o, 5, padding=2), nn.BatchNorm1d(o),
            nn.Tanh() if o != mels else nn.Identity()) for i, o in zip(chans, chans[1:])])

    def encode(self, text, lengths):
        x = self.convs(self.embed(text).transpose(1, 2)).transpose(1, 2)
        x = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        x, _ = self.blstm(x)
        return nn.utils.rnn.pad_packed_sequence(x, batch_first=True)[0]

    def step(self, p, state, memory, processed, mask):
        ah, ac, dh, dc, ctx, w, wcum = state
        ah, ac = self.att_rnn(torch.cat([p, ctx], -1), (ah, ac))
        loc = self.loc_dense(self.loc(torch.stack([w, wcum], 1)).transpose(1, 2))
        e = self.v(torch.tanh(self.query(ah)[:, None] + processed + loc))[..., 0]
        w = e.masked_fill(mask, float("-inf")).softmax(-1)
        ctx = (w[:, None] @ memory)[:, 0]
        dh, dc = self.dec_rnn(torch.cat([ah, ctx], -1), (dh, dc))
        out = F.dropout(torch.cat([dh, ctx], -1), 0.1, self.training)
        return self.proj(out), self.gate(out), (ah, ac, dh, dc, ctx, w, wcum + w)

    def decode(self, memory, mask, frames=None, limit=0):
        """Teacher-forced over `frames` (b, steps, mels * r), or free-running to `limit`."""
        b, t, _ = memory.shape
        processed, rnn = self.memory(memory), self.att_rnn.hidden_size
        zeros = [memory.new_zeros(b, s) for s in (rnn, rnn, rnn, rnn, memory.shape[2], t, t)]
        state, outs, gates = tuple(zeros), [], []
        go = memory.new_zeros(b, 1, self.mels * self.r)
        pre = (None if frames is None
               else F.dropout(self.prenet(torch.cat([go, frames[:, :-1]], 1)), 0.5))
        prev, done = go[:, 0], torch.zeros(b, dtype=torch.bool, device=memory.device)
        for i in range(frames.shape[1] if frames is not None else limit):
            p = pre[:, i] if pre is not None else F.dropout(self.prenet(prev), 0.5)
            prev, gate, state = self.step(p, state, memory, processed, mask)
            outs.append(prev)
            gates.append(gate)
            if frames is None:
                done |= (gate.sigmoid() > 0.5).any(-1)
                if i % 16 == 15 and bool(done.all()):
                    break
        mel = torch.stack(outs, 1).view(b, -1, self.mels)
        return mel, mel + self.postnet(mel.transpose(1, 2)).transpose(1, 2), torch.stack(gates, 1)


def tacotron2_location_attn_train(steps):
    """Tacotron 2 (encoder d 512, attention and decoder LSTMs of 1,024, attention 128, 80 mel
    bins, 2 frames a decoder step) trained teacher-forced on 32 texts of 40-160 symbols with
    1.5-2.5 decoder steps a symbol (up to 400 steps, new lengths every step): every decoder
    step's attention energies (32 x text x 128) and LSTM states kept for backward; mel and
    gate losses masked, gradients clipped, Adam. Every fifth step from the second, 8 texts
    synthesised free-running (no_grad) until every gate fires or 2.5 steps a symbol. fp32."""
    torch.manual_seed(248)
    vocab, d, rnn, att, mels, r, batch, lens = ((148, 512, 1024, 128, 80, 2, 32, (40, 160)) if CUDA
                                                else (30, 16, 16, 8, 8, 2, 2, (4, 8)))
    model = _Tacotron2(vocab, d, rnn, att, mels, r).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-6)
    gen = _generator(248)
    for step in range(steps):
        tl = torch.randint(lens[0], lens[1] + 1, (batch,), generator=gen)
        dl = (tl * (1.5 + torch.rand(batch, generator=gen))).long()
        text = torch.randint(1, vocab, (batch, int(tl.max())), device=DEV)
        mask = (torch.arange(int(tl.max())) >= tl[:, None]).to(DEV)
        valid = (torch.arange(int(dl.max()) * r) < r * dl[:, None]).to(DEV)
        target = torch.randn(batch, int(dl.max()), mels * r, device=DEV)
        mel, post, gate = model.decode(model.encode(text, tl), mask, target)
        target, m = target.view(batch, -1, mels), valid[..., None].float()
        gate_target = (torch.arange(valid.shape[1]) >= r * dl[:, None] - 1).float().to(DEV)
        loss = (((mel - target) ** 2 + (post - target) ** 2) * m).sum() / (m.sum() * mels)
        loss = loss + F.binary_cross_entropy_with_logits(gate.flatten(1)[valid], gate_target[valid])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del mel, post, gate, loss
        if step % 5 == 1:
            model.eval()
            tl = torch.randint(lens[0], lens[1] + 1, (8,), generator=gen)
            text = torch.randint(1, vocab, (8, int(tl.max())), device=DEV)
            mask = (torch.arange(int(tl.max())) >= tl[:, None]).to(DEV)
            with torch.no_grad():
                _, post, _ = model.decode(model.encode(text, tl), mask, limit=int(2.5 * tl.max()))
                post.cpu()
            model.train()


WORKLOADS = {
    "mamba2_ssd_chunked_train": (mamba2_ssd_chunked_train, 20),
    "graphsage_sampled_prefetch_train": (graphsage_sampled_prefetch_train, 40),
    "unet3d_sliding_window_train": (unet3d_sliding_window_train, 16),
    "electra_gen_disc_train": (electra_gen_disc_train, 24),
    "h2o_kv_evict_decode": (h2o_kv_evict_decode, 8),
    "sparse_csr_prune_sweep_infer": (sparse_csr_prune_sweep_infer, 16),
    "dgcnn_knn_graph_train": (dgcnn_knn_graph_train, 30),
    "tacotron2_location_attn_train": (tacotron2_location_attn_train, 8),
}
