"""The fourth corpus: eight workloads recorded on 2026-11-25 (second session) to try a
growth-step rule on requests it was not chosen on (BENCHMARKS.md, "A fourth corpus").
Same conventions as workloads.py: `run(steps)` builds its models and data on DEV and runs
`steps` steps; random weights; seeded.

Each varies its requests in a way the first three corpora do not: a frozen teacher's
logits distilled into a student, a momentum encoder with a queue of negatives, 3-D
convolutions over video clips, point clouds of a different size every batch, layer
weights streamed from host memory on a side stream during inference, one long context
(4,096 tokens) through fused attention, image crops of a different size every step, and
preference optimisation with a frozen reference model on pairs of sequences of random
lengths.
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Gpt, resnet


def kd_distill_train(steps):
    """Knowledge distillation: a 12-layer GPT teacher (d 768) in eval mode under no_grad
    and fp16 autocast gives logits over 8,192 tokens for 16 sequences of 256; a 4-layer
    student (d 512) is trained on the KL divergence to them plus cross-entropy, AdamW."""
    torch.manual_seed(41)
    teacher = Gpt(8192, 768, 12, 12, 256).to(DEV).eval()
    student = Gpt(8192, 512, 4, 8, 256).to(DEV)
    opt = torch.optim.AdamW(student.parameters(), lr=3e-4)
    amp = dict(device_type=DEV.type, dtype=torch.float16, enabled=DEV.type == "cuda")
    for _ in range(steps):
        idx = torch.randint(0, 8192, (16, 256), device=DEV)
        with torch.no_grad(), torch.autocast(**amp):
            soft = teacher(idx).float().log_softmax(-1)
        logits = student(idx[:, :-1])
        loss = F.kl_div(logits.log_softmax(-1), soft[:, :-1], log_target=True,
                        reduction="batchmean") + F.cross_entropy(
            logits.reshape(-1, 8192), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def moco_queue_train(steps):
    """MoCo-style contrastive training: a ResNet-18 query encoder trained with SGD and a
    key encoder updated as its moving average (no grad); 128 images at 96x96 in two
    noisy views; logits against the positive key and a queue of 16,384 negatives
    (128-d, normalised), into which each step's keys are written in place."""
    torch.manual_seed(42)
    query = resnet(18, classes=128).to(DEV)
    key = copy.deepcopy(query).requires_grad_(False)
    opt = torch.optim.SGD(query.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
    queue = F.normalize(torch.randn(16384, 128, device=DEV), dim=1)
    ptr = 0
    for _ in range(steps):
        x = torch.randn(128, 3, 96, 96, device=DEV)
        q = F.normalize(query(x + 0.1 * torch.randn_like(x)), dim=1)
        with torch.no_grad():
            for pk, pq in zip(key.parameters(), query.parameters()):
                pk.mul_(0.999).add_(pq.detach(), alpha=0.001)
            k = F.normalize(key(x + 0.1 * torch.randn_like(x)), dim=1)
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue.t()], dim=1) / 0.07
        loss = F.cross_entropy(logits, torch.zeros(128, dtype=torch.long, device=DEV))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        queue[ptr:ptr + 128] = k
        ptr = (ptr + 128) % 16384


class Video3d(nn.Module):
    """3-D convolutions with batch norm, pooled in time and space, and a linear head."""

    def __init__(self, classes=400, c=48):
        super().__init__()

        def block(i, o, stride):
            return nn.Sequential(nn.Conv3d(i, o, 3, stride=stride, padding=1, bias=False),
                                 nn.BatchNorm3d(o), nn.ReLU(inplace=True))

        self.body = nn.Sequential(block(3, c, (1, 2, 2)), block(c, c, 1),
                                  block(c, 2 * c, 2), block(2 * c, 2 * c, 1),
                                  block(2 * c, 4 * c, 2), block(4 * c, 4 * c, 1),
                                  block(4 * c, 8 * c, 2), nn.AdaptiveAvgPool3d(1),
                                  nn.Flatten())
        self.head = nn.Linear(8 * c, classes)

    def forward(self, x):
        return self.head(self.body(x))


def video_conv3d_train(steps):
    """Action recognition on video: a 3-D CNN over 8 clips of 16 frames at 112x112,
    bf16 autocast, AdamW."""
    torch.manual_seed(43)
    model = Video3d().to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x = torch.randn(8, 3, 16, 112, 112, device=DEV)
        y = torch.randint(0, 400, (8,), device=DEV)
        with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=DEV.type == "cuda"):
            loss = F.cross_entropy(model(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


class PointNet(nn.Module):
    """A shared per-point MLP (1x1 convolutions 3-64-128-1024), max-pooled over the
    points, then a classifier."""

    def __init__(self, classes=40):
        super().__init__()
        self.point = nn.Sequential(nn.Conv1d(3, 64, 1), nn.BatchNorm1d(64), nn.ReLU(),
                                   nn.Conv1d(64, 128, 1), nn.BatchNorm1d(128), nn.ReLU(),
                                   nn.Conv1d(128, 1024, 1), nn.BatchNorm1d(1024), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(1024, 512), nn.BatchNorm1d(512), nn.ReLU(),
                                  nn.Dropout(0.3), nn.Linear(512, classes))

    def forward(self, pts):
        return self.head(self.point(pts).amax(dim=2))


def pointnet_varpoints_train(steps):
    """Point-cloud classification: batches of 32 clouds, each batch with its own number
    of points (1,024 to 8,192, drawn per step), Adam."""
    torch.manual_seed(44)
    model = PointNet().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(45)
    for _ in range(steps):
        n = int(torch.randint(1024, 8193, (1,), generator=g))
        pts = torch.randn(32, 3, n, device=DEV)
        y = torch.randint(0, 40, (32,), device=DEV)
        loss = F.cross_entropy(model(pts), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def offload_layers_infer(steps):
    """Inference with the weights in host memory (as offloading libraries do): 16 MLP
    layers (d 2,048, hidden 8,192, fp16) stay in pinned host memory; each layer's
    weights are copied to the GPU on a side stream one layer ahead of their use, the
    compute stream waits for the copy, and the copied weights are handed to the compute
    stream (`record_stream`) and dropped after the layer. Batches of 8x512 tokens."""
    torch.manual_seed(46)
    d, h, layers = 2048, 8192, 16
    host = [(torch.randn(h, d, dtype=torch.float16) * 0.02,
             torch.randn(d, h, dtype=torch.float16) * 0.02) for _ in range(layers)]
    if DEV.type == "cuda":
        host = [(a.pin_memory(), b.pin_memory()) for a, b in host]
    copy_stream = torch.cuda.Stream() if DEV.type == "cuda" else None

    def fetch(i):
        if copy_stream is None:
            return tuple(w.to(DEV) for w in host[i])
        with torch.cuda.stream(copy_stream):
            return tuple(w.to(DEV, non_blocking=True) for w in host[i])

    with torch.no_grad():
        for _ in range(steps):
            x = torch.randn(8, 512, d, device=DEV, dtype=torch.float16)
            nxt = fetch(0)
            for i in range(layers):
                cur = nxt
                if copy_stream is not None:
                    torch.cuda.current_stream().wait_stream(copy_stream)
                    for w in cur:
                        w.record_stream(torch.cuda.current_stream())
                if i + 1 < layers:
                    nxt = fetch(i + 1)
                x = x + F.linear(F.gelu(F.linear(x, cur[0])), cur[1])
                del cur
            x.float().sum().item()


def long_context_sdpa_train(steps):
    """One long context: a 4-layer GPT (d 1,024, 16 heads) on 2 sequences of 4,096
    tokens, bf16 autocast, fused attention (scaled_dot_product_attention), AdamW with
    gradient clipping."""
    torch.manual_seed(47)
    model = Gpt(16384, 1024, 4, 16, 4096).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
    for _ in range(steps):
        idx = torch.randint(0, 16384, (2, 4097), device=DEV)
        with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=DEV.type == "cuda"):
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, 16384), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


class SuperRes(nn.Module):
    """EDSR-like 2x super-resolution: 16 residual blocks of 64 channels and a pixel
    shuffle."""

    def __init__(self, c=64, blocks=16):
        super().__init__()
        self.head = nn.Conv2d(3, c, 3, padding=1)
        self.body = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU(inplace=True),
                          nn.Conv2d(c, c, 3, padding=1)) for _ in range(blocks))
        self.up = nn.Sequential(nn.Conv2d(c, 4 * c, 3, padding=1), nn.PixelShuffle(2),
                                nn.Conv2d(c, 3, 3, padding=1))

    def forward(self, x):
        y = self.head(x)
        z = y
        for b in self.body:
            z = z + 0.1 * b(z)
        return self.up(z + y)


def superres_randcrop_train(steps):
    """Super-resolution training on random crops whose size changes every step (48,
    64, 96 or 128 pixels, batch 16), L1 loss, Adam."""
    torch.manual_seed(48)
    model = SuperRes().to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(49)
    sizes = [48, 64, 96, 128]
    for _ in range(steps):
        s = sizes[int(torch.randint(0, 4, (1,), generator=g))]
        hr = torch.rand(16, 3, 2 * s, 2 * s, device=DEV)
        lr = F.avg_pool2d(hr, 2)
        loss = F.l1_loss(model(lr), hr)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def dpo_policy_ref_train(steps):
    """Direct preference optimisation: a 6-layer GPT policy (d 768) trained and a frozen
    copy as reference (eval, no_grad); each step 8 prompts with a chosen and a rejected
    answer, padded to the longest of the 16 (64 to 512 tokens, drawn per step); the
    sequences' log-probabilities are gathered from the logits; bf16 autocast, AdamW."""
    torch.manual_seed(50)
    policy = Gpt(16384, 768, 6, 12, 512).to(DEV)
    ref = copy.deepcopy(policy).eval().requires_grad_(False)
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-5)
    g = torch.Generator().manual_seed(51)
    amp = dict(device_type=DEV.type, dtype=torch.bfloat16, enabled=DEV.type == "cuda")

    def seq_logp(model, idx, mask):
        logits = model(idx[:, :-1]).float()
        logp = logits.log_softmax(-1).gather(2, idx[:, 1:, None]).squeeze(2)
        return (logp * mask[:, 1:]).sum(1)

    for _ in range(steps):
        lengths = torch.randint(64, 513, (16,), generator=g)
        t = int(lengths.max())
        idx = torch.randint(0, 16384, (16, t), device=DEV)
        mask = (torch.arange(t)[None, :] < lengths[:, None]).float().to(DEV)
        with torch.autocast(**amp):
            with torch.no_grad():
                ref_lp = seq_logp(ref, idx, mask)
            pol_lp = seq_logp(policy, idx, mask)
        margin = (pol_lp[:8] - ref_lp[:8]) - (pol_lp[8:] - ref_lp[8:])
        loss = -F.logsigmoid(0.1 * margin).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


WORKLOADS = {
    "kd_distill_train": (kd_distill_train, 6),
    "moco_queue_train": (moco_queue_train, 6),
    "video_conv3d_train": (video_conv3d_train, 6),
    "pointnet_varpoints_train": (pointnet_varpoints_train, 8),
    "offload_layers_infer": (offload_layers_infer, 4),
    "long_context_sdpa_train": (long_context_sdpa_train, 6),
    "superres_randcrop_train": (superres_randcrop_train, 8),
    "dpo_policy_ref_train": (dpo_policy_ref_train, 6),
}
