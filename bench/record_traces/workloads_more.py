"""The second corpus: ten workloads recorded after the allocator's policy was set, and
replayed through it before any change, to see how it does on requests it was not tuned
on (BENCHMARKS.md, "Ten more workloads, held out"). Same conventions as workloads.py:
`run(steps)` builds its models and data on DEV and runs `steps` steps; random weights;
seeded.

Each differs from the first corpus in how its requests vary: data-dependent sizes
(mixture-of-experts routing, sparse gradients, graphs, detection), a preallocated
cache written in place, an encoder-decoder with two lengths, gradient accumulation with
an EMA copy of the weights, frozen weights with adapters, and a second stream that
allocates the buckets the main stream's gradients are gathered into.
"""
import contextlib
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Gpt


def vit_b16_train_bf16(steps):
    """torchvision ViT-B/16 training, bf16 autocast, AdamW, batch 32 at 224x224."""
    import torchvision
    torch.manual_seed(21)
    model = torchvision.models.vit_b_16(weights=None).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        x = torch.randn(32, 3, 224, 224, device=DEV)
        y = torch.randint(0, 1000, (32,), device=DEV)
        with torch.autocast(DEV.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class Seq2Seq(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.core = nn.Transformer(d_model=d, nhead=8, num_encoder_layers=6,
                                   num_decoder_layers=6, dim_feedforward=4 * d,
                                   batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, src, tgt):
        mask = self.core.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        h = self.core(self.emb(src), self.emb(tgt), tgt_mask=mask, tgt_is_causal=True)
        return self.out(h)


def seq2seq_fp16_varlen(steps):
    """An encoder-decoder transformer (nn.Transformer, d 512, 6+6 layers, vocab 16000)
    training with fp16 autocast and a gradient scaler, Adam, batch 24; source and target
    lengths both change every step."""
    torch.manual_seed(22)
    model = Seq2Seq(16000, 512).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(DEV.type, enabled=DEV.type == "cuda")
    lengths = [(200, 150), (64, 40), (256, 230), (128, 90), (96, 120), (180, 60)]
    for s in range(steps):
        ls, lt = lengths[s % len(lengths)]
        src = torch.randint(0, 16000, (24, ls), device=DEV)
        tgt = torch.randint(0, 16000, (24, lt + 1), device=DEV)
        with torch.autocast(DEV.type, dtype=torch.float16, enabled=DEV.type == "cuda"):
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, 16000), tgt[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


class Moe(nn.Module):
    """A transformer MLP replaced by 8 experts with top-2 routing: each expert gets the
    tokens routed to it (index_select), and its output is added back (index_add_), so
    every step's sizes depend on the router."""

    def __init__(self, d, experts, hidden):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.w1 = nn.ModuleList(nn.Linear(d, hidden) for _ in range(experts))
        self.w2 = nn.ModuleList(nn.Linear(hidden, d) for _ in range(experts))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.gate(flat).softmax(-1).topk(2, dim=-1)
        out = torch.zeros_like(flat)
        for e in range(len(self.w1)):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            h = self.w2[e](F.gelu(self.w1[e](flat.index_select(0, rows))))
            out = out.index_add(0, rows, h * weights[rows, slot].unsqueeze(1))
        return out.view_as(x)


def moe_train(steps):
    """A 4-layer mixture-of-experts model (d 512, 8 experts of 2048, top-2 routing),
    AdamW, batch 16 x 256 tokens; the router's choices change every step."""
    torch.manual_seed(23)
    layers = nn.ModuleList(Moe(512, 8, 2048) for _ in range(4)).to(DEV)
    norms = nn.ModuleList(nn.LayerNorm(512) for _ in range(4)).to(DEV)
    emb = nn.Embedding(8000, 512).to(DEV)
    head = nn.Linear(512, 8000).to(DEV)
    params = [*layers.parameters(), *norms.parameters(), *emb.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-4)
    for _ in range(steps):
        idx = torch.randint(0, 8000, (16, 257), device=DEV)
        x = emb(idx[:, :-1])
        for moe, ln in zip(layers, norms):
            x = x + moe(ln(x))
        loss = F.cross_entropy(head(x).reshape(-1, 8000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def llm_serve_static_cache(steps):
    """Serving with a preallocated key/value cache written in place: a 8-layer GPT
    (d 1024) in fp16; each step takes a new batch of requests (batch and prompt length
    change), prefills, then decodes 48 tokens with top-k sampling."""
    torch.manual_seed(24)
    model = Gpt(vocab=32000, d=1024, layers=8, heads=16, ctx=1024).to(DEV).half().eval()
    heads, hd, max_len, max_batch = 16, 64, 512, 16
    shape = (len(model.blocks), max_batch, heads, max_len, hd)
    cache_k = torch.zeros(shape, device=DEV, dtype=torch.float16)
    cache_v = torch.zeros(shape, device=DEV, dtype=torch.float16)

    def step(idx, pos, b):
        t = idx.shape[1]
        x = model.tok(idx) + model.pos(torch.arange(pos, pos + t, device=DEV))
        for i, blk in enumerate(model.blocks):
            h = blk.ln1(x)
            q, k, v = blk.qkv(h).split(1024, dim=2)
            q, k, v = (z.view(b, t, heads, hd).transpose(1, 2) for z in (q, k, v))
            cache_k[i, :b, :, pos:pos + t] = k
            cache_v[i, :b, :, pos:pos + t] = v
            keys, values = cache_k[i, :b, :, :pos + t], cache_v[i, :b, :, :pos + t]
            y = F.scaled_dot_product_attention(q, keys, values, is_causal=t > 1)
            x = x + blk.proj(y.transpose(1, 2).reshape(b, t, 1024))
            x = x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x))))
        return model.head(model.ln(x[:, -1]))

    waves = [(16, 200), (4, 64), (12, 320), (8, 128), (2, 400), (10, 256)]
    with torch.no_grad():
        for s in range(steps):
            b, prompt_len = waves[s % len(waves)]
            logits = step(torch.randint(0, 32000, (b, prompt_len), device=DEV), 0, b)
            for t in range(48):
                top, which = logits.float().topk(50, dim=-1)
                pick = torch.multinomial(top.softmax(-1), 1)
                logits = step(which.gather(1, pick), prompt_len + t, b)


class Recommender(nn.Module):
    def __init__(self, rows, dim, tables):
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
                                    for _ in range(tables))
        self.mlp = nn.Sequential(nn.Linear(dim * tables + 13, 512), nn.ReLU(),
                                 nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense, bags):
        pooled = [t(ids, offsets) for t, (ids, offsets) in zip(self.tables, bags)]
        return self.mlp(torch.cat([dense, *pooled], dim=1)).squeeze(1)


def recsys_sparse_train(steps):
    """A recommender: four 1M x 64 embedding-bag tables with sparse gradients (SparseAdam)
    and an MLP (Adam), batch 4096; every bag has a random length, so the sparse
    gradients' sizes change every step."""
    torch.manual_seed(25)
    model = Recommender(1_000_000, 64, 4).to(DEV)
    sparse = torch.optim.SparseAdam(list(model.tables.parameters()), lr=1e-3)
    dense_opt = torch.optim.Adam(model.mlp.parameters(), lr=1e-3)
    batch = 4096
    for _ in range(steps):
        bags = []
        for _ in model.tables:
            lengths = torch.randint(1, 40, (batch,), device=DEV)
            offsets = torch.cumsum(lengths, 0) - lengths
            ids = torch.randint(0, 1_000_000, (int(lengths.sum()),), device=DEV)
            bags.append((ids, offsets))
        dense = torch.randn(batch, 13, device=DEV)
        label = torch.rand(batch, device=DEV)
        loss = F.binary_cross_entropy_with_logits(model(dense, bags), label)
        sparse.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)
        loss.backward()
        sparse.step()
        dense_opt.step()


def gnn_varsize_train(steps):
    """A 3-layer graph network (mean aggregation with index_add_, hidden 256) trained on
    a different random graph every step (20k to 80k nodes, 10 to 16 edges per node),
    Adam."""
    torch.manual_seed(26)
    lins = nn.ModuleList([nn.Linear(128, 256), nn.Linear(256, 256), nn.Linear(256, 256)])
    self_lins = nn.ModuleList([nn.Linear(128, 256), nn.Linear(256, 256), nn.Linear(256, 256)])
    head = nn.Linear(256, 16)
    mods = nn.ModuleList([lins, self_lins, head]).to(DEV)
    opt = torch.optim.Adam(mods.parameters(), lr=1e-3)
    sizes = [(50_000, 12), (20_000, 16), (80_000, 10), (35_000, 14), (65_000, 11)]
    for s in range(steps):
        n, deg = sizes[s % len(sizes)]
        x = torch.randn(n, 128, device=DEV)
        src = torch.randint(0, n, (n * deg,), device=DEV)
        dst = torch.randint(0, n, (n * deg,), device=DEV)
        count = torch.zeros(n, device=DEV).index_add_(0, dst, torch.ones_like(dst, dtype=torch.float))
        norm = count.clamp(min=1).reciprocal().unsqueeze(1)
        y = torch.randint(0, 16, (n,), device=DEV)
        h = x
        for lin, self_lin in zip(lins, self_lins):
            msg = torch.zeros(n, lin.out_features, device=DEV).index_add(0, dst, lin(h)[src])
            h = F.relu(self_lin(h) + msg * norm)
        loss = F.cross_entropy(head(h), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def convnext_ema_accum_train(steps):
    """torchvision ConvNeXt-Tiny training with gradient accumulation (4 micro-batches of
    16 at 160x160), bf16 autocast, channels-last, gradient clipping, AdamW and an EMA
    copy of the weights updated every step."""
    import torchvision
    torch.manual_seed(27)
    model = torchvision.models.convnext_tiny(weights=None).to(DEV)
    model = model.to(memory_format=torch.channels_last)
    ema = copy.deepcopy(model).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    params = list(model.parameters())
    ema_params = list(ema.parameters())
    for _ in range(steps):
        for _ in range(4):
            x = torch.randn(16, 3, 160, 160, device=DEV).to(memory_format=torch.channels_last)
            y = torch.randint(0, 1000, (16,), device=DEV)
            with torch.autocast(DEV.type, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y) / 4
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            torch._foreach_lerp_(ema_params, params, 0.001)


class LoraLinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update."""

    def __init__(self, base, rank=16):
        super().__init__()
        self.base = base
        self.a = nn.Parameter(torch.randn(rank, base.in_features, device=base.weight.device,
                                          dtype=base.weight.dtype) * 0.01)
        self.b = nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device,
                                          dtype=base.weight.dtype))

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.a), self.b)


def lora_finetune_bf16(steps):
    """Fine-tuning with adapters: a 12-layer GPT (d 1024) with its weights in bf16 and
    frozen, rank-16 bf16 adapters on the attention and MLP input projections (AdamW on
    the adapters only), batch 8, sequence 512 (384 every other step)."""
    torch.manual_seed(28)
    model = Gpt(vocab=32000, d=1024, layers=12, heads=16, ctx=1024).to(DEV).to(torch.bfloat16)
    for p in model.parameters():
        p.requires_grad_(False)
    for blk in model.blocks:
        blk.qkv = LoraLinear(blk.qkv)
        blk.fc1 = LoraLinear(blk.fc1)
    adapters = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(adapters, lr=1e-4)
    for s in range(steps):
        t = 512 if s % 2 == 0 else 384
        idx = torch.randint(0, 32000, (8, t + 1), device=DEV)
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, 32000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def comm_stream_buckets_train(steps):
    """Gradients gathered on a second stream, as data-parallel training does around its
    all-reduce: after backward, a communication stream waits for the main one, flattens
    the gradients into 25 MB buckets it allocates (each gradient `record_stream`ed on
    it), scales them in place (standing in for the all-reduce), and the main stream
    copies them back (each bucket `record_stream`ed on main) before the optimizer. A
    GPT (d 768, 8 layers), AdamW, batch 8 x 512."""
    torch.manual_seed(29)
    model = Gpt(vocab=32000, d=768, layers=8, heads=12, ctx=512).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    params = [p for p in model.parameters()]
    buckets, cur, size = [], [], 0
    for p in reversed(params):
        cur.append(p)
        size += p.numel() * 4
        if size >= 25 << 20:
            buckets.append(cur)
            cur, size = [], 0
    if cur:
        buckets.append(cur)
    cuda = DEV.type == "cuda"
    comm = torch.cuda.Stream() if cuda else None
    main = torch.cuda.current_stream() if cuda else None
    for _ in range(steps):
        idx = torch.randint(0, 32000, (8, 513), device=DEV)
        loss = F.cross_entropy(model(idx[:, :-1]).view(-1, 32000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        flats = []
        if cuda:
            comm.wait_stream(main)
        for group in buckets:
            with torch.cuda.stream(comm) if cuda else contextlib.nullcontext():
                for p in group:
                    if cuda:
                        p.grad.record_stream(comm)
                flat = torch.cat([p.grad.reshape(-1) for p in group])
                flat.mul_(0.5)
            flats.append(flat)
        if cuda:
            main.wait_stream(comm)
        for group, flat in zip(buckets, flats):
            if cuda:
                flat.record_stream(main)
            offset = 0
            for p in group:
                n = p.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                offset += n
        del flats, flat
        opt.step()


def detection_varsize_infer(steps):
    """torchvision Faster R-CNN (MobileNet-V3 FPN backbone, random weights) inference on
    batches of 4 images whose size changes every step; proposals and detections are
    data-dependent."""
    import torchvision
    torch.manual_seed(30)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None, num_classes=91).to(DEV).eval()
    sizes = [(480, 640), (600, 800), (320, 480), (720, 960), (512, 512), (400, 700)]
    with torch.no_grad():
        for s in range(steps):
            h, w = sizes[s % len(sizes)]
            images = [torch.rand(3, h, w, device=DEV) for _ in range(4)]
            model(images)


# name -> (function, steps)
WORKLOADS = {
    "vit_b16_train_bf16": (vit_b16_train_bf16, 5),
    "seq2seq_fp16_varlen": (seq2seq_fp16_varlen, 6),
    "moe_train": (moe_train, 6),
    "llm_serve_static_cache": (llm_serve_static_cache, 6),
    "recsys_sparse_train": (recsys_sparse_train, 8),
    "gnn_varsize_train": (gnn_varsize_train, 10),
    "convnext_ema_accum_train": (convnext_ema_accum_train, 4),
    "lora_finetune_bf16": (lora_finetune_bf16, 6),
    "comm_stream_buckets_train": (comm_stream_buckets_train, 6),
    "detection_varsize_infer": (detection_varsize_infer, 12),
}
