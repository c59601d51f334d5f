"""The eighteenth corpus: four workloads on several streams, written on 2026-11-26
(twelfth session on the allocator), held out from every change to the allocator until
recorded. Same conventions as workloads.py: `run(steps)` builds its models and data on
DEV and runs `steps` steps; random weights; seeded. On the CPU (RECORD_DEVICE=cpu) there
are no side streams and the models and data are smaller.

Streams are where the allocator's warm path costs most (queries of other streams'
work) and where memory freed on one stream must wait for another's; the seventeenth
corpus had none. Each of these hands memory between streams in a way the first
seventeen corpora do not: tensor-parallel-style partial sums reduced on a communication
stream while the compute stream goes on with the next layer's other half; requests
served round-robin on a pool of four streams, each request's output handed to the main
stream; gradients copied into flat buckets on a communication stream from hooks as
backward produces them (DDP's overlap inside backward, not after it); and decoding with
the older part of each layer's key/value cache kept in host memory and brought back on
a copy stream one layer ahead.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block
# The thirteenth corpus's helpers: side streams, hand-overs, autocast, seeded generators.
from workloads_thirteenth import CUDA, _amp, _generator, _hand_over, _on, _stream
# The fourteenth corpus's helper: an integer in a closed range.
from workloads_fourteenth import _randint


# ------------------------------------------------------------- tensor-parallel overlap

def tp_overlap_infer(steps):
    """Inference through 16 MLP layers split as tensor parallelism splits them (d 2,048,
    hidden 8,192 in two halves, fp16), on one GPU: each half's partial output is summed
    with the other on a communication stream (standing in for the all-reduce, a new
    buffer each time) while the compute stream starts the next layer's first half; the
    compute stream waits for the sum before the layer's residual. Batches of 4-16 x 512
    tokens, a new size every step."""
    torch.manual_seed(181)
    if CUDA:
        d, h, layers, tokens, batches = 2048, 8192, 16, 512, (4, 16)
    else:
        d, h, layers, tokens, batches = 32, 64, 2, 8, (1, 3)
    dt = torch.float16 if CUDA else torch.float32
    w1 = [[torch.randn(d, h // 2, device=DEV, dtype=dt) * 0.02 for _ in range(2)]
          for _ in range(layers)]
    w2 = [[torch.randn(h // 2, d, device=DEV, dtype=dt) * 0.02 for _ in range(2)]
          for _ in range(layers)]
    comm = _stream()
    gen = _generator(181)
    for _ in range(steps):
        b = _randint(gen, *batches)
        with torch.no_grad():
            x = torch.randn(b, tokens, d, device=DEV, dtype=dt)
            for i in range(layers):
                parts = [F.gelu(x @ w1[i][k]) @ w2[i][k] for k in range(2)]
                _hand_over(parts, torch.cuda.current_stream() if CUDA else None, comm)
                with _on(comm):
                    reduced = parts[0] + parts[1]
                _hand_over([reduced], comm)
                del parts
                x = x + reduced
                del reduced
            del x


# ------------------------------------------------------------------- a pool of streams

def stream_pool_serving(steps):
    """Requests served round-robin on a pool of four streams, as a server with one
    stream per worker does: each request (1-32 sequences of 32-512 tokens) runs a
    6-layer encoder (d 1,024, fp16) on its stream, and its pooled output is handed to the
    main stream (`record_stream`), which gathers a step's outputs and scores them; 12
    requests a step, of new sizes every time."""
    torch.manual_seed(182)
    if CUDA:
        d, layers, heads, seqs, lens, per_step = 1024, 6, 16, (1, 32), (32, 512), 12
    else:
        d, layers, heads, seqs, lens, per_step = 32, 2, 4, (1, 3), (4, 8), 4
    emb = nn.Embedding(32000, d).to(DEV)
    blocks = nn.ModuleList(Block(d, heads) for _ in range(layers)).to(DEV).eval()
    if CUDA:
        emb, blocks = emb.half(), blocks.half()
    pool = [_stream() for _ in range(4)]
    gen = _generator(182)
    for _ in range(steps):
        outs = []
        with torch.no_grad():
            for r in range(per_step):
                s = pool[r % len(pool)]
                n, t = _randint(gen, *seqs), _randint(gen, *lens)
                tokens = torch.randint(0, 32000, (n, t), generator=gen).to(DEV)
                if s is not None:
                    s.wait_stream(torch.cuda.current_stream())
                    tokens.record_stream(s)
                with _on(s):
                    x = emb(tokens)
                    for blk in blocks:
                        x = blk(x)
                    pooled = x.mean(1)
                    del x
                _hand_over([pooled], s)
                outs.append(pooled)
                del tokens
            scores = torch.cat(outs) @ torch.cat(outs).T
            del outs, scores


# ------------------------------------------------------- gradients bucketed from hooks

def grad_hook_buckets_train(steps):
    """DDP's overlap inside backward, on one GPU: a hook on every parameter
    (`register_post_accumulate_grad_hook`) sends its gradient, as soon as backward has
    made it, to a communication stream that copies it into the current 25 MB flat bucket
    (allocated there) and, when the bucket is full, scales it (standing in for the
    all-reduce) and copies it back into the gradients; the main stream waits before the
    optimizer step. A 12-layer GPT (d 768, vocab 32,000), batch 8 x 512, bf16 autocast,
    AdamW."""
    torch.manual_seed(183)
    from workloads import Gpt
    if CUDA:
        vocab, d, layers, heads, batch, ctx, bucket_bytes = 32000, 768, 12, 12, 8, 512, 25 << 20
    else:
        vocab, d, layers, heads, batch, ctx, bucket_bytes = 300, 32, 2, 4, 2, 16, 16 << 10
    model = Gpt(vocab, d, layers, heads, ctx).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    comm = _stream()
    pending = []  # gradients of the bucket being filled

    def flush():
        if not pending:
            return
        with _on(comm):
            flat = torch.cat([g.reshape(-1) for g in pending]).mul_(0.5)
            offset = 0
            for g in pending:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
            del flat
        pending.clear()

    def hook(p):
        _hand_over([p.grad], torch.cuda.current_stream() if CUDA else None, comm)
        pending.append(p.grad)
        if sum(g.numel() * g.element_size() for g in pending) >= bucket_bytes:
            flush()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)
    for _ in range(steps):
        idx = torch.randint(0, vocab, (batch, ctx + 1), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), idx[:, 1:].reshape(-1))
        loss.backward()
        flush()
        if comm is not None:
            torch.cuda.current_stream().wait_stream(comm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del idx, logits, loss


# ------------------------------------------------------------ KV cache in host memory

def kv_offload_decode(steps):
    """Long-context decoding with the key/value cache mostly in host memory, as KV
    offloading does: a 16-layer GPT (d 1,024, fp16) over 4 sequences whose first 2,048-
    6,144 positions' keys and values (per layer) stay in pinned host memory; every new
    token, each layer's offloaded part is copied to the GPU on a copy stream one layer
    ahead (a new buffer each time), handed to the compute stream, concatenated with the
    recent part kept on the GPU (up to 32 positions, then moved out to the host) and
    dropped after the layer. 64 new tokens a step."""
    torch.manual_seed(184)
    if CUDA:
        d, layers, heads, batch, past, new, recent_max = 1024, 16, 16, 4, (2048, 6144), 64, 32
    else:
        d, layers, heads, batch, past, new, recent_max = 32, 2, 4, 1, (8, 16), 6, 2
    dt = torch.float16 if CUDA else torch.float32
    hd = d // heads
    blocks = nn.ModuleList(Block(d, heads) for _ in range(layers)).to(DEV).eval()
    blocks = blocks.to(dt)
    copy = _stream()
    gen = _generator(184)

    def on_host(t):
        t = t.to("cpu")
        return t.pin_memory() if CUDA else t

    def fetch(kv):
        with _on(copy):
            return [t.to(DEV, non_blocking=True) for t in kv]

    for _ in range(steps):
        p = _randint(gen, *past)
        offloaded = [[on_host(torch.randn(batch, heads, p, hd, generator=gen).to(dt))
                      for _ in range(2)] for _ in range(layers)]
        recent = [[None, None] for _ in range(layers)]
        with torch.no_grad():
            x = torch.randn(batch, 1, d, device=DEV, dtype=dt)
            for _ in range(new):
                ahead = fetch(offloaded[0])
                h = x
                for i, blk in enumerate(blocks):
                    kv = ahead
                    _hand_over(kv, copy)
                    if i + 1 < layers:
                        ahead = fetch(offloaded[i + 1])
                    q, k, v = blk.qkv(blk.ln1(h)).split(d, dim=2)
                    q, k, v = (z.view(batch, 1, heads, hd).transpose(1, 2) for z in (q, k, v))
                    rk, rv = recent[i]
                    rk = k if rk is None else torch.cat([rk, k], 2)
                    rv = v if rv is None else torch.cat([rv, v], 2)
                    if rk.shape[2] > recent_max:
                        offloaded[i] = [torch.cat([offloaded[i][0], on_host(rk)], 2),
                                        torch.cat([offloaded[i][1], on_host(rv)], 2)]
                        rk = rv = None
                    recent[i] = [rk, rv]
                    keys = torch.cat([kv[0]] + ([rk] if rk is not None else []), 2)
                    values = torch.cat([kv[1]] + ([rv] if rv is not None else []), 2)
                    y = F.scaled_dot_product_attention(q, keys, values)
                    h = h + blk.proj(y.transpose(1, 2).reshape(batch, 1, d))
                    h = h + blk.fc2(F.gelu(blk.fc1(blk.ln2(h))))
                    del kv, keys, values, y, q, k, v
                x = h
            del x, h, ahead, recent


WORKLOADS = {
    "tp_overlap_infer": (tp_overlap_infer, 8),
    "stream_pool_serving": (stream_pool_serving, 8),
    "grad_hook_buckets_train": (grad_hook_buckets_train, 8),
    "kv_offload_decode": (kv_offload_decode, 2),
}
