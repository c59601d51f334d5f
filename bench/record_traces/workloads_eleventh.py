"""The eleventh corpus: six workloads recorded on 2026-11-26, held out from every change to
the allocator (BENCHMARKS.md, "An eleventh corpus, held out"). Same conventions as
workloads.py: `run(steps)` builds its models and data on DEV and runs `steps` steps;
random weights; seeded.

Each moves memory in a way the first ten corpora do not: float8 matrix products with
per-tensor scales recomputed every step (`torch._scaled_mm`, Hopper's fp8 path), a
physics-informed network whose loss holds second derivatives through the input
(`autograd.grad` with `create_graph` on a new set of collocation points each step), an
ensemble of eight networks trained as one through `torch.func.vmap` over stacked
parameters, a neural ODE solved by an adaptive Runge-Kutta method (the number of
function evaluations, so of kept activations, changes every step), a second-order
optimizer whose preconditioners are inverse roots from eigendecompositions
(`torch.linalg.eigh`'s workspaces, every few steps), and a language model trained on
packed documents with a block-diagonal attention mask whose packing changes each step.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state

from workloads import DEV, Block

F8 = torch.float8_e4m3fn
F8_MAX = torch.finfo(F8).max


def _generator(seed):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------- float8 MLP

def _to_f8(t):
    """`t` in float8 (e4m3) with a per-tensor scale from its absolute maximum, and the
    inverse scale `_scaled_mm` multiplies back."""
    amax = t.abs().amax().float().clamp(min=1e-12)
    scale = F8_MAX / amax
    return (t.float() * scale).clamp(-F8_MAX, F8_MAX).to(F8), scale.reciprocal()


class Fp8Linear(torch.autograd.Function):
    """y = x wᵀ in float8 (both operands scaled per tensor, bf16 out); the backward pass in
    bf16, as the common fp8 training recipes keep gradients in higher precision."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        xq, xs = _to_f8(x)
        wq, ws = _to_f8(w)
        return torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.to(torch.bfloat16)
        return g @ w.to(torch.bfloat16), (g.t() @ x.to(torch.bfloat16)).float()


class Fp8Mlp(nn.Module):
    def __init__(self, d, hidden, layers):
        super().__init__()
        self.w = nn.ParameterList(
            nn.Parameter(torch.randn(hidden if i % 2 == 0 else d, d if i % 2 == 0 else hidden)
                         * 0.02)
            for i in range(2 * layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))

    def forward(self, x):
        for i, norm in enumerate(self.norms):
            h = Fp8Linear.apply(norm(x).to(torch.bfloat16), self.w[2 * i])
            h = F.gelu(h)
            x = x + Fp8Linear.apply(h, self.w[2 * i + 1]).float()
        return x


def fp8_scaled_mm_train(steps):
    """A residual MLP (8 blocks, d 2,048, hidden 8,192) whose matrix products run in float8
    with scales recomputed from each operand every step (`torch._scaled_mm`), bf16
    gradients, fp32 master weights and AdamW; batches of 2,048-8,192 rows (multiples of
    16, as the fp8 kernels ask)."""
    torch.manual_seed(111)
    model = Fp8Mlp(2048, 8192, 8).to(DEV)
    head = nn.Linear(2048, 1000).to(DEV)
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-4)
    gen = _generator(11)
    for _ in range(steps):
        rows = 16 * int(torch.randint(128, 513, (1,), generator=gen))
        x = torch.randn(rows, 2048, device=DEV)
        y = torch.randint(0, 1000, (rows,), device=DEV)
        loss = F.cross_entropy(head(model(x)), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# ------------------------------------------------------------ physics-informed net

def pinn_heat_train(steps):
    """A physics-informed network for the 2-D heat equation u_t = a (u_xx + u_yy): an MLP
    u(x, y, t) (6 layers of 512, tanh) whose loss holds u_t and the second derivatives
    through the input (`autograd.grad` with `create_graph`, then backward through them),
    on 20,000-60,000 collocation points drawn anew every step, plus boundary and initial
    points; Adam."""
    torch.manual_seed(112)
    layers = [nn.Linear(3, 512), nn.Tanh()]
    for _ in range(5):
        layers += [nn.Linear(512, 512), nn.Tanh()]
    net = nn.Sequential(*layers, nn.Linear(512, 1)).to(DEV)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    gen = _generator(12)
    for _ in range(steps):
        n = int(torch.randint(20_000, 60_001, (1,), generator=gen))
        pts = torch.rand(n, 3, device=DEV).requires_grad_(True)
        u = net(pts)
        (du,) = torch.autograd.grad(u.sum(), pts, create_graph=True)
        u_t = du[:, 2]
        lap = 0
        for axis in (0, 1):
            (d2,) = torch.autograd.grad(du[:, axis].sum(), pts, create_graph=True)
            lap = lap + d2[:, axis]
        residual = u_t - 0.1 * lap
        edge = torch.rand(n // 10, 3, device=DEV)
        edge[:, 0] = edge[:, 0].round()
        start = torch.rand(n // 10, 3, device=DEV)
        start[:, 2] = 0
        target = torch.sin(torch.pi * start[:, 0]) * torch.sin(torch.pi * start[:, 1])
        loss = (residual.square().mean() + net(edge).square().mean()
                + (net(start).squeeze(1) - target).square().mean())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# ------------------------------------------------------------------- vmap ensemble

def _ensemble_member():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def ensemble_vmap_train(steps):
    """Eight small CNNs trained as one: their parameters stacked
    (`torch.func.stack_module_state`) and the forward pass vmapped over the ensemble
    (`functional_call`), each member on its own bootstrap batch of 256 32x32 images;
    one backward, SGD with momentum on the stacked leaves; every third step an
    evaluation of the ensemble's averaged prediction on a shared batch of 1,024."""
    torch.manual_seed(113)
    members = [_ensemble_member().to(DEV) for _ in range(8)]
    params, buffers = stack_module_state(members)
    base = _ensemble_member().to("meta")
    leaves = [p.requires_grad_(True) for p in params.values()]
    opt = torch.optim.SGD(leaves, lr=0.05, momentum=0.9)

    def one(p, b, x):
        return functional_call(base, (p, b), (x,))

    forward = torch.vmap(one)
    for step in range(steps):
        x = torch.randn(8, 256, 3, 32, 32, device=DEV)
        y = torch.randint(0, 10, (8, 256), device=DEV)
        logits = forward(params, buffers, x)
        loss = F.cross_entropy(logits.reshape(-1, 10), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 3 == 2:
            with torch.no_grad():
                shared = torch.randn(1024, 3, 32, 32, device=DEV).expand(8, -1, -1, -1, -1)
                forward(params, buffers, shared).softmax(-1).mean(0).argmax(-1)


# ------------------------------------------------------------ adaptive neural ODE

class OdeFunc(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d + 1, 1024), nn.SiLU(), nn.Linear(1024, 1024),
                                 nn.SiLU(), nn.Linear(1024, d))

    def forward(self, t, z):
        return self.net(torch.cat([z, t.expand(z.shape[0], 1)], 1))


# Dormand-Prince 5(4) tableau.
_DP_C = [0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1]
_DP_A = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
         [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
         [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
         [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]]
_DP_B = [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]
_DP_E = [71 / 57600, 0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40]


def dopri5(f, z, t1, tol):
    """Integrates dz/dt = f(t, z) from 0 to t1 with adaptive Dormand-Prince steps, every
    evaluation kept for backpropagation; the step size follows the error estimate (the
    decision is taken on the host, as torchdiffeq does)."""
    t, h = 0.0, t1 / 4
    while t < t1 - 1e-9:
        h = min(h, t1 - t)
        ks = []
        for c, a in zip(_DP_C, _DP_A):
            zi = z + h * sum(ai * k for ai, k in zip(a, ks)) if ks else z
            ks.append(f(torch.tensor([[t + c * h]], device=z.device), zi))
        new = z + h * sum(b * k for b, k in zip(_DP_B, ks) if b)
        err = (h * sum(e * k for e, k in zip(_DP_E, ks) if e)).abs().max().item()
        if err <= tol or h < 1e-3:
            z, t = new, t + h
        h = h * min(4.0, max(0.2, 0.9 * (tol / max(err, 1e-12)) ** 0.2))
    return z


def neural_ode_adaptive_train(steps):
    """A continuous-depth classifier: an encoder to d 256, a neural ODE (an MLP of 1,024
    with time as input) integrated by adaptive Dormand-Prince steps whose count follows
    the error estimate, so each step keeps a different number of activations, and a
    head; batches of 512-2,048, Adam, tolerance tightened as training goes."""
    torch.manual_seed(114)
    enc = nn.Linear(784, 256).to(DEV)
    func = OdeFunc(256).to(DEV)
    head = nn.Linear(256, 10).to(DEV)
    opt = torch.optim.Adam([*enc.parameters(), *func.parameters(), *head.parameters()],
                           lr=1e-3)
    gen = _generator(14)
    for step in range(steps):
        b = int(torch.randint(512, 2049, (1,), generator=gen))
        x = torch.randn(b, 784, device=DEV)
        y = torch.randint(0, 10, (b,), device=DEV)
        z = dopri5(func, enc(x), 1.0, tol=1e-2 / (1 + step))
        loss = F.cross_entropy(head(z), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


# ------------------------------------------------------------ Shampoo-like optimizer

class Shampoo:
    """A simplified Shampoo: for each weight matrix, left and right second-moment
    statistics; every `every` steps their inverse fourth roots from `torch.linalg.eigh`;
    the update is L^-1/4 G R^-1/4 with the gradient's norm (grafting), momentum; vectors
    take Adagrad's diagonal."""

    def __init__(self, params, lr=1e-3, every=3, eps=1e-6):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.every, self.eps, self.t = lr, every, eps, 0
        self.state = {}
        for p in self.params:
            if p.ndim == 2:
                m, n = p.shape
                self.state[p] = dict(L=eps * torch.eye(m, device=p.device),
                                     R=eps * torch.eye(n, device=p.device),
                                     Li=torch.eye(m, device=p.device),
                                     Ri=torch.eye(n, device=p.device),
                                     mom=torch.zeros_like(p))
            else:
                self.state[p] = dict(acc=torch.zeros_like(p), mom=torch.zeros_like(p))

    def _root(self, s):
        vals, vecs = torch.linalg.eigh(s)
        return vecs @ torch.diag(vals.clamp(min=self.eps).pow(-0.25)) @ vecs.t()

    @torch.no_grad()
    def step(self):
        self.t += 1
        for p in self.params:
            g, st = p.grad, self.state[p]
            if p.ndim == 2:
                st["L"].add_(g @ g.t())
                st["R"].add_(g.t() @ g)
                if self.t % self.every == 1:
                    st["Li"] = self._root(st["L"])
                    st["Ri"] = self._root(st["R"])
                u = st["Li"] @ g @ st["Ri"]
                u.mul_(g.norm() / u.norm().clamp(min=1e-12))
            else:
                st["acc"].addcmul_(g, g)
                u = g / st["acc"].sqrt().add(self.eps)
            st["mom"].mul_(0.9).add_(u)
            p.add_(st["mom"], alpha=-self.lr)

    def zero_grad(self):
        for p in self.params:
            p.grad = None


def shampoo_precond_train(steps):
    """A 4-layer transformer (d 768, vocab 8,192, context 256, batch 16) trained with the
    Shampoo-like optimizer above: every third step the inverse fourth roots of 34
    statistics (768x768 to 3,072x3,072) from eigendecompositions (cuSOLVER's workspaces
    and eigenvectors, allocated and freed inside the optimizer step)."""
    torch.manual_seed(115)
    emb = nn.Embedding(8192, 768).to(DEV)
    blocks = nn.ModuleList(Block(768, 12) for _ in range(4)).to(DEV)
    head = nn.Linear(768, 8192).to(DEV)
    params = [*emb.parameters(), *blocks.parameters(), *head.parameters()]
    opt = Shampoo(params)
    for _ in range(steps):
        idx = torch.randint(0, 8192, (16, 257), device=DEV)
        x = emb(idx[:, :-1])
        for blk in blocks:
            x = blk(x)
        loss = F.cross_entropy(head(x).reshape(-1, 8192), idx[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()


# ------------------------------------------------------------- packed documents

class PackedBlock(nn.Module):
    """A pre-norm transformer block whose attention takes a boolean mask."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _pack(gen, rows, length, budget):
    """Document ids of `rows` rows of `length` tokens filled with documents of 16-`budget`
    tokens (the last one cut), as a data loader that packs documents does."""
    ids = torch.empty(rows, length, dtype=torch.long)
    for r in range(rows):
        pos, doc = 0, 0
        while pos < length:
            n = int(torch.randint(16, budget + 1, (1,), generator=gen))
            ids[r, pos:pos + n] = doc
            pos, doc = pos + n, doc + 1
    return ids


def packed_docs_lm_train(steps):
    """A 6-layer GPT (d 768, vocab 32,000) trained on packed documents: rows of 1,024
    tokens (8-16 rows a step, the last batch of a shard shorter) holding documents of
    16-512 tokens, attention restricted to each document and causal (a block-diagonal
    boolean mask built every step, on the mask path of scaled_dot_product_attention),
    bf16 autocast, AdamW."""
    torch.manual_seed(116)
    emb = nn.Embedding(32000, 768).to(DEV)
    pos = nn.Parameter(torch.zeros(1024, 768, device=DEV))
    blocks = nn.ModuleList(PackedBlock(768, 12) for _ in range(6)).to(DEV)
    head = nn.Linear(768, 32000).to(DEV)
    opt = torch.optim.AdamW([*emb.parameters(), pos, *blocks.parameters(),
                             *head.parameters()], lr=3e-4)
    gen = _generator(16)
    causal = torch.ones(1024, 1024, dtype=torch.bool, device=DEV).tril()
    amp = dict(device_type=DEV.type, dtype=torch.bfloat16)
    for _ in range(steps):
        rows = int(torch.randint(8, 17, (1,), generator=gen))
        doc = _pack(gen, rows, 1024, 512).to(DEV)
        mask = (doc[:, :, None] == doc[:, None, :]) & causal
        idx = torch.randint(0, 32000, (rows, 1025), device=DEV)
        with torch.autocast(**amp):
            x = emb(idx[:, :-1]) + pos
            for blk in blocks:
                x = blk(x, mask[:, None])
            logits = head(x)
        loss = F.cross_entropy(logits.float().reshape(-1, 32000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


WORKLOADS = {
    "fp8_scaled_mm_train": (fp8_scaled_mm_train, 10),
    "pinn_heat_train": (pinn_heat_train, 12),
    "ensemble_vmap_train": (ensemble_vmap_train, 12),
    "neural_ode_adaptive_train": (neural_ode_adaptive_train, 8),
    "shampoo_precond_train": (shampoo_precond_train, 7),
    "packed_docs_lm_train": (packed_docs_lm_train, 8),
}
