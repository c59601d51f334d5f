"""The sixth corpus: four workloads recorded on 2026-11-25 (third session, after the fifth
corpus's comparison), each a way of running a model that the first five corpora do not
have: a model compiled by `torch.compile` (Inductor plans and reuses its buffers),
inference captured once in a CUDA graph and replayed, an inference server whose every
request has its own batch and sequence length, and an embedding table trained with
sparse gradients. Same conventions as workloads.py: `run(steps)` builds its models and
data on DEV and runs `steps` steps; random weights; seeded.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Gpt
from workloads_third import Encoder


def compiled_gpt_train(steps):
    """A 6-layer GPT (d 768, vocab 16,384, context 256) compiled with `torch.compile`
    (Inductor, default mode) and trained on 16 sequences of 256 in bf16 autocast with
    AdamW; the first step compiles."""
    torch.manual_seed(61)
    model = Gpt(16384, 768, 6, 12, 256).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    step_model = torch.compile(model)
    amp = dict(device_type=DEV.type, dtype=torch.bfloat16, enabled=DEV.type == "cuda")
    for _ in range(steps):
        idx = torch.randint(0, 16384, (16, 257), device=DEV)
        with torch.autocast(**amp):
            logits = step_model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, 16384), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def cuda_graph_infer(steps):
    """Inference captured once in a CUDA graph and replayed: a 4-layer GPT (d 1,024,
    fp16) over 8 sequences of 512, warmed up on a side stream, captured with
    `torch.cuda.graph` (its memory from the graph's private pool), then each step copies
    a new batch into the static input, replays the graph 10 times and reads the logits'
    argmax (eager work around the graph)."""
    torch.manual_seed(62)
    dtype = torch.float16 if DEV.type == "cuda" else torch.float32
    model = Gpt(16384, 1024, 4, 16, 512).to(DEV, dtype).eval()
    static = torch.randint(0, 16384, (8, 512), device=DEV)
    with torch.no_grad():
        if DEV.type == "cuda":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    model(static)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = model(static)
        for _ in range(steps):
            static.copy_(torch.randint(0, 16384, (8, 512), device=DEV))
            for _ in range(10):
                if DEV.type == "cuda":
                    graph.replay()
                else:
                    out = model(static)
                top = out[:, -1].float().softmax(-1).argmax(-1)
            top.sum().item()


def encoder_serving_varshape(steps):
    """An inference server for a 6-layer encoder (d 768, vocab 30,522, fp16, no grad):
    each step serves 25 requests, each with its own batch (1-64) and sequence length
    (16-512) drawn at random, padded to its own longest sequence only."""
    torch.manual_seed(63)
    dtype = torch.float16 if DEV.type == "cuda" else torch.float32
    model = Encoder(30522, 768, 6, 512).to(DEV, dtype).eval()
    gen = torch.Generator().manual_seed(9)
    with torch.no_grad():
        for _ in range(steps):
            for _ in range(25):
                b = int(torch.randint(1, 65, (1,), generator=gen))
                t = int(torch.randint(16, 513, (1,), generator=gen))
                idx = torch.randint(0, 30522, (b, t), device=DEV)
                lengths = torch.randint(1, t + 1, (b,), device=DEV)
                pad = torch.arange(t, device=DEV)[None, :] >= lengths[:, None]
                model(idx, pad).argmax(-1).cpu()


class SparseRecommender(nn.Module):
    """Two large embedding tables with sparse gradients, pooled by bag, and an MLP."""

    def __init__(self, users=2_000_000, items=500_000, d=64):
        super().__init__()
        self.user = nn.EmbeddingBag(users, d, mode="mean", sparse=True)
        self.item = nn.EmbeddingBag(items, d, mode="sum", sparse=True)
        self.mlp = nn.Sequential(nn.Linear(2 * d, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, u, u_off, i, i_off):
        return self.mlp(torch.cat([self.user(u, u_off), self.item(i, i_off)], 1))


def sparse_embedding_train(steps):
    """A recommender with two embedding tables (2,000,000 and 500,000 rows of 64) trained
    with sparse gradients (SparseAdam for the tables, Adam for the MLP): batches of
    4,096 examples whose bags hold 1-40 ids each, so every step's sparse gradients have
    a different number of rows."""
    torch.manual_seed(64)
    model = SparseRecommender().to(DEV)
    sparse = [model.user.weight, model.item.weight]
    opt_sparse = torch.optim.SparseAdam(sparse, lr=1e-3)
    opt_dense = torch.optim.Adam(model.mlp.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(10)

    def bags(rows, n):
        sizes = torch.randint(1, 41, (n,), generator=gen)
        ids = torch.randint(0, rows, (int(sizes.sum()),), generator=gen)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)[:-1]])
        return ids.to(DEV), offsets.to(DEV)

    for _ in range(steps):
        u, uo = bags(2_000_000, 4096)
        i, io = bags(500_000, 4096)
        y = torch.rand(4096, 1, device=DEV)
        loss = F.binary_cross_entropy_with_logits(model(u, uo, i, io), y)
        opt_sparse.zero_grad(set_to_none=True)
        opt_dense.zero_grad(set_to_none=True)
        loss.backward()
        opt_sparse.step()
        opt_dense.step()


WORKLOADS = {
    "compiled_gpt_train": (compiled_gpt_train, 6),
    "cuda_graph_infer": (cuda_graph_infer, 6),
    "encoder_serving_varshape": (encoder_serving_varshape, 4),
    "sparse_embedding_train": (sparse_embedding_train, 8),
}
