"""The ninth corpus: six workloads recorded on 2026-11-25 (fifth session), held out from
every change to the allocator (BENCHMARKS.md, "A ninth corpus, held out"). Same
conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded.

Each moves memory in a way the first eight corpora do not: FFTs whose plans and
workspaces change with the grid (a Fourier neural operator trained at two resolutions),
a double backward pass (a WGAN critic's gradient penalty), second-order meta-learning
whose task graphs all live until the outer backward (MAML), a paged key/value pool
served with chunked prefill (one large block and gathers of every size around it),
dense linear algebra whose size changes every step (a Gaussian process's Cholesky
factor and its backward), and a two-stage pipeline on two streams that hands
activations and gradients across (`record_stream` both ways).
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

from workloads import DEV, Block, dcgan_generator


def _stream():
    return torch.cuda.Stream() if DEV.type == "cuda" else None


def _on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


# ------------------------------------------------------------------ Fourier operator

class SpectralConv2d(nn.Module):
    """Multiplies the lowest `modes` x `modes` Fourier coefficients by learned complex
    weights (rfft2, a mixing einsum, irfft2)."""

    def __init__(self, width, modes):
        super().__init__()
        scale = 1.0 / (width * width)
        self.modes = modes
        self.w1 = nn.Parameter(scale * torch.randn(width, width, modes, modes, dtype=torch.cfloat))
        self.w2 = nn.Parameter(scale * torch.randn(width, width, modes, modes, dtype=torch.cfloat))

    def forward(self, x):
        b, c, h, w = x.shape
        m = self.modes
        xf = torch.fft.rfft2(x)
        out = torch.zeros(b, c, h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :m, :m], self.w1)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -m:, :m], self.w2)
        return torch.fft.irfft2(out, s=(h, w))


class Fno(nn.Module):
    def __init__(self, width=64, modes=16, layers=4):
        super().__init__()
        self.lift = nn.Conv2d(3, width, 1)
        self.spectral = nn.ModuleList(SpectralConv2d(width, modes) for _ in range(layers))
        self.local = nn.ModuleList(nn.Conv2d(width, width, 1) for _ in range(layers))
        self.proj = nn.Sequential(nn.Conv2d(width, 128, 1), nn.GELU(), nn.Conv2d(128, 1, 1))

    def forward(self, a):
        x = self.lift(a)
        for k, (s, c) in enumerate(zip(self.spectral, self.local)):
            x = s(x) + c(x)
            if k + 1 < len(self.spectral):
                x = F.gelu(x)
        return self.proj(x)


def fno_fft_train(steps):
    """A Fourier neural operator (width 64, 16 x 16 modes, 4 layers) trained on 32 fields
    of 128 x 128 (cuFFT plans, complex64 spectra) with Adam; every third step a batch of
    16 at 192 x 192 instead (the operator is resolution-free, so training mixes grids:
    other plans, other workspaces)."""
    torch.manual_seed(91)
    model = Fno().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        n, s = (16, 192) if step % 3 == 2 else (32, 128)
        a = torch.randn(n, 3, s, s, device=DEV)
        u = torch.randn(n, 1, s, s, device=DEV)
        loss = F.mse_loss(model(a), u)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# ------------------------------------------------------------------ WGAN-GP

def wgan_gp_train(steps):
    """A WGAN with gradient penalty at 64 x 64, batch 64: five critic steps per generator
    step, each critic step differentiating the critic's output with respect to an
    interpolated batch (`create_graph=True`) and backpropagating through that gradient
    (a double backward pass). Adam for both; no batch norm in the critic."""
    torch.manual_seed(92)
    z_dim = 128
    gen = dcgan_generator(z_dim).to(DEV)
    critic = nn.Sequential(
        nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(64, 128, 4, 2, 1), nn.LayerNorm([128, 16, 16]), nn.LeakyReLU(0.2),
        nn.Conv2d(128, 256, 4, 2, 1), nn.LayerNorm([256, 8, 8]), nn.LeakyReLU(0.2),
        nn.Conv2d(256, 512, 4, 2, 1), nn.LayerNorm([512, 4, 4]), nn.LeakyReLU(0.2),
        nn.Conv2d(512, 1, 4, 1, 0), nn.Flatten()).to(DEV)
    og = torch.optim.Adam(gen.parameters(), lr=1e-4, betas=(0.0, 0.9))
    oc = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
    for step in range(steps):
        real = torch.randn(64, 3, 64, 64, device=DEV)
        with torch.no_grad():
            fake = gen(torch.randn(64, z_dim, 1, 1, device=DEV))
        eps = torch.rand(64, 1, 1, 1, device=DEV)
        mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
        (grad,) = torch.autograd.grad(critic(mix).sum(), mix, create_graph=True)
        penalty = ((grad.flatten(1).norm(dim=1) - 1) ** 2).mean()
        c_loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
        oc.zero_grad(set_to_none=True)
        c_loss.backward()
        oc.step()
        if step % 5 == 4:
            g_loss = -critic(gen(torch.randn(64, z_dim, 1, 1, device=DEV))).mean()
            og.zero_grad(set_to_none=True)
            g_loss.backward()
            og.step()


# ------------------------------------------------------------------ MAML

def maml_meta_train(steps):
    """Second-order MAML on 5-way 5-shot tasks of 84 x 84 images (a four-layer CNN of 64
    channels): per meta-batch of 8 tasks, five inner SGD steps each with
    `create_graph=True` on the task's 25 support images, then the query loss on 75;
    the meta-batch's eight graphs (every inner step's activations and gradients) all
    live until the outer backward pass. Adam on the meta-parameters."""
    torch.manual_seed(93)

    def block(cin):
        return [nn.Conv2d(cin, 64, 3, padding=1), nn.BatchNorm2d(64, track_running_stats=False),
                nn.ReLU(), nn.MaxPool2d(2)]

    model = nn.Sequential(*block(3), *block(64), *block(64), *block(64), nn.Flatten(),
                          nn.Linear(64 * 5 * 5, 5)).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    names = [n for n, _ in model.named_parameters()]
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        meta_loss = 0.0
        for _task in range(8):
            xs = torch.randn(25, 3, 84, 84, device=DEV)
            ys = torch.arange(5, device=DEV).repeat_interleave(5)
            xq = torch.randn(75, 3, 84, 84, device=DEV)
            yq = torch.arange(5, device=DEV).repeat_interleave(15)
            fast = dict(model.named_parameters())
            for _inner in range(5):
                loss = F.cross_entropy(functional_call(model, fast, (xs,)), ys)
                grads = torch.autograd.grad(loss, list(fast.values()), create_graph=True)
                fast = {n: p - 0.01 * g for n, p, g in zip(names, fast.values(), grads)}
            meta_loss = meta_loss + F.cross_entropy(functional_call(model, fast, (xq,)), yq)
        (meta_loss / 8).backward()
        opt.step()


# ------------------------------------------------------------------ paged KV serving

class PagedLm(nn.Module):
    """A GPT-style decoder (pre-norm blocks of workloads.Block's shape) whose keys and
    values live in one pool of fixed-size pages, as vLLM's paged attention keeps them;
    attention gathers each sequence's pages into a contiguous key/value tensor."""

    def __init__(self, vocab, d, layers, heads, pages, page):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(4096, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.heads, self.page = heads, page
        hd = d // heads
        # [layer, k/v, page, slot, head, head dim]: one allocation for the whole pool.
        self.register_buffer("pool", torch.zeros(layers, 2, pages, page, heads, hd))

    def step(self, seqs):
        """One forward pass over a batch of (tokens, start, page table) chunks; writes the
        chunks' keys and values into their pages and returns each chunk's last logits."""
        outs = []
        for tokens, start, table in seqs:
            t = tokens.shape[0]
            pos = torch.arange(start, start + t, device=tokens.device)
            x = (self.tok(tokens) + self.pos(pos))[None]
            slots = pos  # position p lives in page table[p // page], slot p % page
            pg, sl = table[slots // self.page], slots % self.page
            for i, blk in enumerate(self.blocks):
                b, _, d = x.shape
                q, k, v = blk.qkv(blk.ln1(x)).split(d, dim=2)
                hd = d // self.heads
                self.pool[i, 0, pg, sl] = k[0].view(t, self.heads, hd).to(self.pool.dtype)
                self.pool[i, 1, pg, sl] = v[0].view(t, self.heads, hd).to(self.pool.dtype)
                n = start + t
                used = table[: (n + self.page - 1) // self.page]
                kk = self.pool[i, 0, used].reshape(-1, self.heads, hd)[:n]
                vv = self.pool[i, 1, used].reshape(-1, self.heads, hd)[:n]
                qh = q.view(1, t, self.heads, hd).transpose(1, 2)
                kh, vh = (z.transpose(0, 1)[None].to(q.dtype) for z in (kk, vv))
                mask = (torch.arange(n, device=x.device)[None] <= pos[:, None])[None, None]
                y = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
                x = x + blk.proj(y.transpose(1, 2).reshape(1, t, d))
                x = x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x))))
            outs.append(self.head(self.ln(x[:, -1])))
        return torch.cat(outs)


def paged_kv_serve(steps):
    """Continuous batching over a paged KV pool (a 6-layer d-1,024 decoder in fp16, vocab
    32,000; 2,048 pages of 16 tokens): each step admits new requests up to 24 running
    (prompts of 32-1,024 tokens, prefilled in chunks of at most 256), decodes one token
    for every request past its prompt, and retires requests after 4-24 generated
    tokens, returning their pages."""
    torch.manual_seed(94)
    model = PagedLm(32000, 1024, 6, 16, 2048, 16).to(DEV)
    if DEV.type == "cuda":
        model = model.half()
    model.eval()
    gen = torch.Generator().manual_seed(94)
    free_pages = list(range(2048))
    running = []  # [tokens so far (device), prompt length, target, page table list, done prefill]
    with torch.inference_mode():
        for _ in range(steps):
            while len(running) < 24:
                plen = int(torch.randint(32, 1025, (1,), generator=gen))
                target = plen + int(torch.randint(4, 25, (1,), generator=gen))
                need = (target + 15) // 16
                if need > len(free_pages):
                    break
                pages = [free_pages.pop() for _ in range(need)]
                toks = torch.randint(0, 32000, (plen,), device=DEV)
                running.append([toks, plen, target, pages, 0])
            chunks = []
            for r in running:
                toks, plen, _, pages, done = r
                table = torch.tensor(pages, device=DEV)
                if done < plen:
                    t = min(256, plen - done)
                    chunks.append((toks[done:done + t], done, table))
                    r[4] = done + t
                else:
                    chunks.append((toks[-1:], toks.shape[0] - 1, table))
            logits = model.step(chunks)
            nxt = logits.argmax(-1)
            keep = []
            for r, tok in zip(running, nxt):
                if r[4] >= r[1]:
                    r[0] = torch.cat([r[0], tok[None]])
                if r[0].shape[0] >= r[2]:
                    free_pages.extend(r[3])
                else:
                    keep.append(r)
            running = keep


# ------------------------------------------------------------------ Gaussian process

class ExactGp(nn.Module):
    """An exact Gaussian process with an RBF kernel on a learned 32-d feature map."""

    def __init__(self, d_in=64):
        super().__init__()
        self.feat = nn.Sequential(nn.Linear(d_in, 256), nn.ReLU(), nn.Linear(256, 32))
        self.log_ls = nn.Parameter(torch.zeros(()))
        self.log_noise = nn.Parameter(torch.tensor(-2.0))

    def nll(self, x, y):
        z = self.feat(x) / self.log_ls.exp()
        k = torch.exp(-0.5 * torch.cdist(z, z).pow(2))
        k = k + (self.log_noise.exp() + 1e-4) * torch.eye(x.shape[0], device=x.device)
        chol = torch.linalg.cholesky(k)
        alpha = torch.cholesky_solve(y[:, None], chol)
        return 0.5 * (y[:, None] * alpha).sum() + chol.diagonal().log().sum()


def gp_cholesky_varn_train(steps):
    """Deep-kernel Gaussian process regression trained on a random subset of 1,024 to
    6,144 points each step (an n x n kernel in fp64, its Cholesky factor, a solve, and
    the backward pass through both: cuSOLVER and cuBLAS workspaces of a new size every
    step), Adam."""
    torch.manual_seed(95)
    model = ExactGp().to(DEV).double()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data_x = torch.randn(8192, 64, device=DEV, dtype=torch.float64)
    data_y = torch.randn(8192, device=DEV, dtype=torch.float64)
    gen = torch.Generator().manual_seed(95)
    for _ in range(steps):
        n = int(torch.randint(1024, 6145, (1,), generator=gen))
        idx = torch.randperm(8192, device=DEV)[:n]
        loss = model.nll(data_x[idx], data_y[idx]) / n
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# ------------------------------------------------------------------ two-stage pipeline

def pipeline_two_stream_train(steps):
    """A 16-layer GPT (d 1,024, vocab 32,000, context 256) split into two stages of 8
    blocks run on two streams of one GPU, GPipe style: per step 4 micro-batches of 8
    sequences go forward through stage 0 on one stream and stage 1 on the other (each
    hand-over waits on the producer and calls `record_stream` on the consumer), then
    backward in reverse, the gradients at the cut handed back the same way; bf16
    autocast, AdamW."""
    torch.manual_seed(96)
    d, vocab = 1024, 32000
    tok = nn.Embedding(vocab, d).to(DEV)
    pos = nn.Embedding(256, d).to(DEV)
    stage0 = nn.Sequential(*(Block(d, 16) for _ in range(8))).to(DEV)
    stage1 = nn.Sequential(*(Block(d, 16) for _ in range(8)), nn.LayerNorm(d),
                           nn.Linear(d, vocab, bias=False)).to(DEV)
    params = [*tok.parameters(), *pos.parameters(), *stage0.parameters(), *stage1.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-4)
    s0, s1 = _stream(), _stream()
    amp = dict(device_type=DEV.type, dtype=torch.bfloat16, enabled=DEV.type == "cuda")

    def hand(x, frm, to):
        if to is not None:
            to.wait_stream(frm)
            x.record_stream(to)
        return x

    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        acts, outs = [], []
        for _mb in range(4):
            with _on(s0), torch.autocast(**amp):
                idx = torch.randint(0, vocab, (8, 257), device=DEV)
                h = stage0(tok(idx[:, :-1]) + pos(torch.arange(256, device=DEV)))
            cut = hand(h.detach(), s0, s1).requires_grad_(True)
            tgt = hand(idx[:, 1:], s0, s1)
            with _on(s1), torch.autocast(**amp):
                logits = stage1(cut)
                loss = F.cross_entropy(logits.float().reshape(-1, vocab),
                                       tgt.reshape(-1)) / 4
            acts.append((h, cut))
            outs.append(loss)
        for (h, cut), loss in zip(reversed(acts), reversed(outs)):
            with _on(s1):
                loss.backward()
            g = hand(cut.grad, s1, s0)
            with _on(s0):
                h.backward(g)
        del acts, outs, h, cut, g, loss
        if s0 is not None:
            torch.cuda.current_stream().wait_stream(s0)
            torch.cuda.current_stream().wait_stream(s1)
        opt.step()


WORKLOADS = {
    "fno_fft_train": (fno_fft_train, 9),
    "wgan_gp_train": (wgan_gp_train, 15),
    "maml_meta_train": (maml_meta_train, 2),
    "paged_kv_serve": (paged_kv_serve, 16),
    "gp_cholesky_varn_train": (gp_cholesky_varn_train, 10),
    "pipeline_two_stream_train": (pipeline_two_stream_train, 4),
}
