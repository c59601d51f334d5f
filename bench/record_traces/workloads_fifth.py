"""The fifth corpus: eight workloads recorded on 2026-11-25 (third session), held out
from every change to the allocator so far (BENCHMARKS.md, "A fifth corpus, held out").
Same conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded.

Each stresses something the first four corpora do not: logits over a 131,072-token
vocabulary (single requests of 1-2 GiB), a model whose two branches run on two streams
of their own while a third stream loads the batches, reinforcement learning rollouts
(thousands of requests of a few KiB), a selective state-space scan stepped token by
token (its states, saved for the backward pass, all in the small pool), speech frames
and transcripts of different lengths through an encoder-decoder, image generation with
classifier-free guidance at four resolutions, gradients kept between steps with a fused
optimizer over micro-batches of varying size, and speculative decoding (a draft model's
and a target model's key/value caches that grow and are cut back).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Gpt, UNet


def _amp(dtype):
    return dict(device_type=DEV.type, dtype=dtype, enabled=DEV.type == "cuda")


def large_vocab_lm_train(steps):
    """A 4-layer GPT (d 768) over a 131,072-token vocabulary: 8 sequences of 512, bf16
    autocast, AdamW; the logits (4,096 x 131,072) and their fp32 loss are each one
    request of 1-2 GiB."""
    torch.manual_seed(51)
    vocab = 131072
    model = Gpt(vocab, 768, 4, 12, 512).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(steps):
        idx = torch.randint(0, vocab, (8, 513), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class TwoTower(nn.Module):
    """Two MLP towers over two inputs, each on a stream of its own, joined by a head."""

    def __init__(self, d=1024, hidden=4096, depth=4):
        super().__init__()

        def tower():
            layers = []
            for _ in range(depth):
                layers += [nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d), nn.LayerNorm(d)]
            return nn.Sequential(*layers)

        self.a, self.b = tower(), tower()
        self.head = nn.Linear(2 * d, 1)
        self.streams = (torch.cuda.Stream(), torch.cuda.Stream()) if DEV.type == "cuda" else None

    def forward(self, xa, xb):
        if self.streams is None:
            return self.head(torch.cat([self.a(xa), self.b(xb)], 1))
        main = torch.cuda.current_stream()
        outs = []
        for tower, x, s in ((self.a, xa, self.streams[0]), (self.b, xb, self.streams[1])):
            s.wait_stream(main)
            with torch.cuda.stream(s):
                y = tower(x)
            outs.append(y)
        for s, y in zip(self.streams, outs):
            main.wait_stream(s)
            y.record_stream(main)
        return self.head(torch.cat(outs, 1))


def branch_streams_train(steps):
    """A two-tower model (d 1,024, four MLP blocks a tower) whose towers run forward and
    backward on two streams of their own, the main stream joining them; the batches
    (2 x 2,048 rows) are copied from pinned memory on a third stream one step ahead and
    handed over with record_stream. Adam. Four streams in all."""
    torch.manual_seed(52)
    model = TwoTower().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = torch.cuda.Stream() if DEV.type == "cuda" else None
    host = [torch.randn(2048, 1024) for _ in range(4)]
    if loader is not None:
        host = [h.pin_memory() for h in host]

    def load(i):
        if loader is None:
            return host[i % 4].to(DEV), host[(i + 1) % 4].to(DEV)
        with torch.cuda.stream(loader):
            return (host[i % 4].to(DEV, non_blocking=True),
                    host[(i + 1) % 4].to(DEV, non_blocking=True))

    nxt = load(0)
    for s in range(steps):
        if loader is not None:
            torch.cuda.current_stream().wait_stream(loader)
            for t in nxt:
                t.record_stream(torch.cuda.current_stream())
        xa, xb = nxt
        nxt = load(s + 1)
        target = (xa.mean(1, keepdim=True) > xb.mean(1, keepdim=True)).float()
        loss = F.binary_cross_entropy_with_logits(model(xa, xb), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del xa, xb
    if loader is not None:
        torch.cuda.current_stream().wait_stream(loader)
    del nxt


def ppo_rollout_train(steps):
    """PPO on a toy environment simulated on the GPU: 512 environments stepped 128 times
    by a small actor-critic MLP (observations of 64, 8 actions), rollouts written into
    preallocated buffers, advantages by GAE stepped backwards in time, then 4 epochs of 8
    minibatches of the clipped objective with Adam. Thousands of requests of a few KiB
    each."""
    torch.manual_seed(53)
    envs, horizon, obs_dim, actions = 512, 128, 64, 8
    body = nn.Sequential(nn.Linear(obs_dim, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh()).to(DEV)
    pi, vf = nn.Linear(256, actions).to(DEV), nn.Linear(256, 1).to(DEV)
    params = [*body.parameters(), *pi.parameters(), *vf.parameters()]
    opt = torch.optim.Adam(params, lr=3e-4)
    dynamics = torch.randn(actions, obs_dim, obs_dim, device=DEV) * 0.1
    buf_obs = torch.zeros(horizon, envs, obs_dim, device=DEV)
    buf_act = torch.zeros(horizon, envs, dtype=torch.long, device=DEV)
    buf_logp = torch.zeros(horizon, envs, device=DEV)
    buf_val = torch.zeros(horizon + 1, envs, device=DEV)
    buf_rew = torch.zeros(horizon, envs, device=DEV)
    obs = torch.randn(envs, obs_dim, device=DEV)
    for _ in range(steps):
        with torch.no_grad():
            for t in range(horizon):
                h = body(obs)
                dist = torch.distributions.Categorical(logits=pi(h))
                a = dist.sample()
                buf_obs[t], buf_act[t], buf_logp[t] = obs, a, dist.log_prob(a)
                buf_val[t] = vf(h).squeeze(1)
                obs = torch.tanh(torch.bmm(dynamics[a], obs.unsqueeze(2)).squeeze(2)
                                 + 0.1 * torch.randn_like(obs))
                buf_rew[t] = obs[:, 0] - 0.01 * a.float()
            buf_val[horizon] = vf(body(obs)).squeeze(1)
            adv = torch.zeros(horizon, envs, device=DEV)
            last = torch.zeros(envs, device=DEV)
            for t in reversed(range(horizon)):
                delta = buf_rew[t] + 0.99 * buf_val[t + 1] - buf_val[t]
                last = delta + 0.99 * 0.95 * last
                adv[t] = last
            ret = adv + buf_val[:horizon]
        flat = horizon * envs
        for _ in range(4):
            perm = torch.randperm(flat, device=DEV)
            for mb in perm.view(8, -1):
                o = buf_obs.view(flat, obs_dim)[mb]
                h = body(o)
                dist = torch.distributions.Categorical(logits=pi(h))
                logp = dist.log_prob(buf_act.view(flat)[mb])
                ratio = (logp - buf_logp.view(flat)[mb]).exp()
                a_mb = adv.view(flat)[mb]
                a_mb = (a_mb - a_mb.mean()) / (a_mb.std() + 1e-8)
                loss = -torch.min(ratio * a_mb, ratio.clamp(0.8, 1.2) * a_mb).mean() \
                    + 0.5 * (vf(h).squeeze(1) - ret.view(flat)[mb]).pow(2).mean() \
                    - 0.01 * dist.entropy().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()


class SelectiveScan(nn.Module):
    """A Mamba-style block in plain PyTorch: input-dependent step sizes and B, C; the
    recurrence h = exp(dt A) h + dt B x stepped token by token."""

    def __init__(self, d=512, expand=2, state=16):
        super().__init__()
        inner = expand * d
        self.inp = nn.Linear(d, 2 * inner)
        self.conv = nn.Conv1d(inner, inner, 4, groups=inner, padding=3)
        self.dt = nn.Linear(inner, inner)
        self.bc = nn.Linear(inner, 2 * state)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, state + 1).float()).repeat(inner, 1))
        self.out = nn.Linear(inner, d)
        self.norm = nn.LayerNorm(d)
        self.state = state

    def forward(self, x):
        b, t, _ = x.shape
        u, z = self.inp(self.norm(x)).chunk(2, dim=2)
        u = F.silu(self.conv(u.transpose(1, 2))[..., :t].transpose(1, 2))
        dt = F.softplus(self.dt(u))
        bm, cm = self.bc(u).split(self.state, dim=2)
        a = -self.a_log.exp()
        h = u.new_zeros(b, u.shape[2], self.state)
        ys = []
        for i in range(t):
            h = torch.exp(dt[:, i, :, None] * a) * h + (dt[:, i] * u[:, i])[..., None] * bm[:, i, None, :]
            ys.append((h * cm[:, i, None, :]).sum(-1))
        y = torch.stack(ys, 1) * F.silu(z)
        return x + self.out(y)


def ssm_scan_train(steps):
    """A 2-layer selective state-space model (d 512, inner 1,024, state 16) trained on 4
    sequences of 256 (128 every other step), AdamW, fp32; every token's state (4 x 1,024
    x 16 floats) is kept for the backward pass."""
    torch.manual_seed(54)
    model = nn.Sequential(nn.Embedding(4096, 512), SelectiveScan(), SelectiveScan(),
                          nn.LayerNorm(512), nn.Linear(512, 4096)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for s in range(steps):
        t = 256 if s % 2 == 0 else 128
        idx = torch.randint(0, 4096, (4, t + 1), device=DEV)
        loss = F.cross_entropy(model(idx[:, :-1]).reshape(-1, 4096), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class SpeechSeq2Seq(nn.Module):
    """Two strided 1-D convolutions over log-mel frames, a transformer encoder, and a
    causal transformer decoder over the transcript."""

    def __init__(self, vocab=8000, d=512, layers=4, heads=8):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(80, d, 3, padding=1), nn.GELU(),
                                   nn.Conv1d(d, d, 3, stride=2, padding=1), nn.GELU())
        self.enc = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, norm_first=True), layers,
            enable_nested_tensor=False)
        self.emb = nn.Embedding(vocab, d)
        self.dec = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d, heads, 4 * d, batch_first=True, norm_first=True), layers)
        self.out = nn.Linear(d, vocab)

    def forward(self, mel, text):
        memory = self.enc(self.front(mel).transpose(1, 2))
        t = text.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=text.device), 1)
        return self.out(self.dec(self.emb(text), memory, tgt_mask=mask))


def audio_seq2seq_varlen_train(steps):
    """Speech-to-text training: batches of 16 utterances of 800-3,000 log-mel frames and
    transcripts of 20-200 tokens (both different every step), fp16 autocast with a
    gradient scaler, AdamW."""
    torch.manual_seed(55)
    model = SpeechSeq2Seq().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler(enabled=DEV.type == "cuda")
    gen = torch.Generator().manual_seed(5)
    for _ in range(steps):
        frames = int(torch.randint(800, 3001, (1,), generator=gen))
        words = int(torch.randint(20, 201, (1,), generator=gen))
        mel = torch.randn(16, 80, frames, device=DEV)
        text = torch.randint(0, 8000, (16, words + 1), device=DEV)
        with torch.autocast(**_amp(torch.float16)):
            logits = model(mel, text[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, 8000), text[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


def unet_cfg_varres_infer(steps):
    """Image generation with classifier-free guidance: a U-Net (64 base channels, fp16,
    inference mode) denoises 4 images (doubled to 8 for the guided and unguided halves)
    over 10 steps, one request per resolution in turn: 256, 384, 512, 320 pixels."""
    torch.manual_seed(56)
    model = UNet(64).to(DEV).eval()
    if DEV.type == "cuda":
        model = model.half()
    dtype = torch.float16 if DEV.type == "cuda" else torch.float32
    sizes = [256, 384, 512, 320]
    with torch.inference_mode():
        for s in range(steps):
            side = sizes[s % len(sizes)]
            x = torch.randn(4, 3, side, side, device=DEV, dtype=dtype)
            for k in range(10):
                both = model(torch.cat([x, x], 0))
                cond, uncond = both.chunk(2)
                x = x - 0.1 * (uncond + 7.5 * (cond - uncond))
            x.float().clamp(-1, 1).mean().item()


def fused_adam_accum_train(steps):
    """A 6-layer GPT (d 1,024, vocab 16,384, context 256) trained with 4 micro-batches of
    4-16 sequences (a different size each), gradients accumulated and kept between steps
    (zero_grad(set_to_none=False)), norm clipping, and the fused AdamW."""
    torch.manual_seed(57)
    model = Gpt(16384, 1024, 6, 16, 256).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=DEV.type == "cuda")
    gen = torch.Generator().manual_seed(7)
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        for _ in range(4):
            b = int(torch.randint(4, 17, (1,), generator=gen))
            idx = torch.randint(0, 16384, (b, 257), device=DEV)
            with torch.autocast(**_amp(torch.bfloat16)):
                logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, 16384), idx[:, 1:].reshape(-1)) / 4
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


def _cut(caches, n):
    """Cuts every key/value cache back to its first `n` positions (views, no copy)."""
    for c in caches:
        if c.get("k") is not None:
            c["k"], c["v"] = c["k"][:, :, :n], c["v"][:, :, :n]


def speculative_decode_infer(steps):
    """Speculative decoding: a 2-layer draft GPT (d 512) proposes 4 tokens at a time with
    its own key/value cache, a 12-layer target GPT (d 1,024) checks them in one forward
    pass; both caches grow by concatenation and are cut back to the accepted prefix. fp16,
    batch 1, a 128-token prompt, 96 new tokens per request."""
    torch.manual_seed(58)
    dtype = torch.float16 if DEV.type == "cuda" else torch.float32
    target = Gpt(32000, 1024, 12, 16, 1024).to(DEV, dtype).eval()
    draft = Gpt(32000, 512, 2, 8, 1024).to(DEV, dtype).eval()
    gen = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for _ in range(steps):
            seq = torch.randint(0, 32000, (1, 128), device=DEV)
            tc = [dict() for _ in target.blocks]
            dc = [dict() for _ in draft.blocks]
            target(seq[:, :-1], tc)
            draft(seq[:, :-1], dc)
            n = seq.shape[1] - 1  # positions in both caches
            while seq.shape[1] < 128 + 96:
                proposal = [seq[:, -1:]]
                for k in range(4):
                    nxt = draft(proposal[-1], dc, start=n + k)[:, -1].argmax(-1, keepdim=True)
                    proposal.append(nxt)
                block = torch.cat(proposal, 1)
                checked = target(block, tc, start=n).argmax(-1)
                # Random weights rarely agree; accept a random prefix as a trained pair would.
                accepted = int(torch.randint(0, 5, (1,), generator=gen))
                keep = torch.cat([block[:, 1:1 + accepted], checked[:, accepted:accepted + 1]], 1)
                seq = torch.cat([seq, keep], 1)
                n += accepted + 1
                _cut(tc, n)
                _cut(dc, n)
            seq.sum().item()


WORKLOADS = {
    "large_vocab_lm_train": (large_vocab_lm_train, 5),
    "branch_streams_train": (branch_streams_train, 10),
    "ppo_rollout_train": (ppo_rollout_train, 3),
    "ssm_scan_train": (ssm_scan_train, 4),
    "audio_seq2seq_varlen_train": (audio_seq2seq_varlen_train, 8),
    "unet_cfg_varres_infer": (unet_cfg_varres_infer, 4),
    "fused_adam_accum_train": (fused_adam_accum_train, 5),
    "speculative_decode_infer": (speculative_decode_infer, 3),
}
