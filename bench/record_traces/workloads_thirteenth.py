"""The thirteenth corpus: six workloads on several streams, written on 2026-11-26 (seventh
session), held out from every change to the allocator (BENCHMARKS.md, "A thirteenth
corpus, held out: streams"). Same conventions as workloads.py: `run(steps)` builds its
models and data on DEV and runs `steps` steps; random weights; seeded. On the CPU
(RECORD_DEVICE=cpu) the streams are left out.

Multi-stream programs are where the allocator's warm path does the most (a stream query
per batch of `record_stream` frees), and the first twelve corpora hold nine of them.
Each of these hands memory between streams in a way those do not: inference in three
stages on three streams (copy in, compute, copy out) with three chunks of varying size
in flight; two models served at once, each on its own stream; speculative decoding whose
draft model runs on a side stream while the target verifies on the main one; an EMA of
the weights and an evaluation of it on a side stream, overlapping the next step; a data
loader that augments on the GPU (crops, flips, jitter, mixup) two batches ahead on its
stream; and checkpoints staged asynchronously (the model and optimizer state cloned on
the GPU and copied to pinned host memory on a side stream while training goes on).
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

from workloads import DEV, Block, Gpt, resnet

CUDA = DEV.type == "cuda"


def _stream():
    return torch.cuda.Stream() if CUDA else None


def _on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def _hand_over(tensors, producer, consumer=None):
    """`consumer` (the current stream by default) waits for `producer`, and each tensor
    is recorded as used on it (nothing on the CPU)."""
    if producer is None:
        return
    consumer = consumer or torch.cuda.current_stream()
    consumer.wait_stream(producer)
    for t in tensors:
        t.record_stream(consumer)


def _amp(dtype):
    return dict(device_type=DEV.type, dtype=dtype, enabled=CUDA)


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def _pick(gen, choices):
    return choices[int(torch.randint(0, len(choices), (1,), generator=gen))]


# ------------------------------------------------------- three stages, three streams

def three_stage_stream_infer(steps):
    """Streaming inference in three stages on three streams, as a throughput-bound service
    overlaps transfers with compute: chunks of 2,048-16,384 rows (a new size per chunk)
    are copied in from pinned memory on a copy stream, go through a 6-layer MLP (d 1,024,
    hidden 4,096, fp16) on the compute stream, and their outputs are copied out to pinned
    memory on a third stream; three chunks are in flight, each hand-over waits on the
    producer and records the tensor on the consumer. 24 chunks a step."""
    torch.manual_seed(131)
    d = 1024
    layers = []
    for _ in range(6):
        layers += [nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)]
    model = nn.Sequential(*layers).to(DEV).half().eval()
    copy_in, compute, copy_out = _stream(), _stream(), _stream()
    rows = (2048, 4096, 8192, 16384) if CUDA else (8, 16)
    host_in = {r: torch.randn(r, d, dtype=torch.half) for r in rows}
    host_out = {r: torch.empty(r, d, dtype=torch.half) for r in rows}
    if CUDA:
        host_in = {r: t.pin_memory() for r, t in host_in.items()}
        host_out = {r: t.pin_memory() for r, t in host_out.items()}
    gen = _generator(131)
    with torch.inference_mode():
        for _ in range(steps):
            loaded, computed = [], []
            for chunk in range(24 + 2):
                if chunk >= 2:
                    y, r = computed.pop(0)
                    _hand_over([y], compute, copy_out)
                    with _on(copy_out):
                        host_out[r].copy_(y, non_blocking=True)
                    del y
                if 1 <= chunk <= 24:
                    x, r = loaded.pop(0)
                    _hand_over([x], copy_in, compute)
                    with _on(compute):
                        computed.append((model(x), r))
                    del x
                if chunk < 24:
                    r = _pick(gen, rows)
                    with _on(copy_in):
                        loaded.append((host_in[r].to(DEV, non_blocking=True), r))
            if CUDA:
                copy_out.synchronize()


# --------------------------------------------------------- two models, two streams

def _encode(stream, embed, blocks, x):
    """The mean-pooled, normalised output of `blocks` over `embed(x)`, on `stream`."""
    with _on(stream):
        h = embed(x)
        for blk in blocks:
            h = blk(h)
        return F.normalize(h.mean(dim=1), dim=-1)


def two_stream_serving(steps):
    """Two models served at once, each on its own stream: a 12-layer text encoder (d 768,
    fp16) over 8-64 sequences of 64-256 tokens and a ViT-like image encoder (12 blocks,
    d 768, 196 patches, fp16) over 8-96 images, a new batch size for each every step;
    the pooled embeddings are handed to the main stream (record_stream), which scores
    every text against every image. 4 rounds a step."""
    torch.manual_seed(132)
    d = 768
    text_emb = nn.Embedding(30000, d).to(DEV).half()
    text = nn.ModuleList(Block(d, 12) for _ in range(12)).to(DEV).half().eval()
    patch = nn.Linear(3 * 16 * 16, d).to(DEV).half()
    image = nn.ModuleList(Block(d, 12) for _ in range(12)).to(DEV).half().eval()
    s_text, s_image = _stream(), _stream()
    gen = _generator(132)
    main = torch.cuda.current_stream() if CUDA else None
    with torch.inference_mode():
        for _ in range(steps):
            for _ in range(4):
                nt = _pick(gen, (8, 16, 32, 64))
                lt = _pick(gen, (64, 128, 192, 256))
                ni = _pick(gen, (8, 24, 48, 96))
                tokens = torch.randint(0, 30000, (nt, lt), device=DEV)
                pixels = torch.randn(ni, 196, 3 * 16 * 16, device=DEV, dtype=torch.half)
                for s in (s_text, s_image):
                    if s is not None:
                        s.wait_stream(main)
                t_vec = _encode(s_text, text_emb, text, tokens)
                i_vec = _encode(s_image, patch, image, pixels)
                if CUDA:
                    tokens.record_stream(s_text)
                    pixels.record_stream(s_image)
                _hand_over([t_vec], s_text)
                _hand_over([i_vec], s_image)
                scores = t_vec @ i_vec.t()
                scores.argmax(dim=1).sum().item()


# ------------------------------------------------------- a draft model on a side stream

def draft_stream_speculative_decode(steps):
    """Speculative decoding with the draft model on a side stream: a 2-layer draft GPT
    (d 512) proposes 4 tokens at a time for 8 sequences on its stream, with its own
    growing key/value cache there, while the main stream's 8-layer target GPT (d 1,024,
    fp16) verifies the previous proposal over its own cache; proposals and accepted
    prefixes cross the streams with record_stream; 48 tokens a step from a new 64-token
    prompt every 2 steps."""
    torch.manual_seed(133)
    vocab = 16000
    target = Gpt(vocab, 1024, 8, 16, 1024).to(DEV).half().eval()
    draft = Gpt(vocab, 512, 2, 8, 1024).to(DEV).half().eval()
    side = _stream()
    with torch.no_grad():
        for s in range(steps):
            if s % 2 == 0:
                t_cache = [dict() for _ in target.blocks]
                d_cache = [dict() for _ in draft.blocks]
                prompt = torch.randint(0, vocab, (8, 64), device=DEV)
                with _on(side):
                    if side is not None:
                        side.wait_stream(torch.cuda.current_stream())
                    draft(prompt, d_cache, 0)
                if side is not None:
                    prompt.record_stream(side)
                last = target(prompt, t_cache, 0)[:, -1:].argmax(-1)
                t_pos = d_pos = 64
            produced = 0
            while produced < 48:
                if side is not None:
                    side.wait_stream(torch.cuda.current_stream())
                    last.record_stream(side)
                with _on(side):
                    tok, proposal = last, []
                    for _ in range(4):
                        tok = draft(tok, d_cache, d_pos)[:, -1:].argmax(-1)
                        d_pos += 1
                        proposal.append(tok)
                    proposal = torch.cat(proposal, dim=1)
                _hand_over([proposal], side)
                logits = target(torch.cat([last, proposal[:, :-1]], dim=1), t_cache, t_pos)
                agree = (logits.argmax(-1) == proposal).all(dim=0).long().cumprod(0).sum()
                accepted = int(agree) + 1
                t_pos += 4
                last = logits[:, accepted - 1:accepted].argmax(-1)
                produced += accepted
                # Both caches keep every position (rolled back in a real decoder); the
                # positions stay aligned by advancing the draft's too.
                d_pos = t_pos


# ---------------------------------------------------- EMA and evaluation on a side stream

def ema_eval_side_stream_train(steps):
    """A 12-layer GPT (d 768, vocab 32,000, context 512) trained on 8 sequences of 512 in
    bf16 autocast with AdamW, while a side stream keeps an EMA of its weights (updated
    after each optimizer step with `torch._foreach_lerp_`) and evaluates the EMA model on
    a held-out batch every other step; the side stream waits for the step, the next
    step's forward and backward run meanwhile (its optimizer step waits for the side
    stream), and the evaluation's input, made on the main stream, is recorded on the side
    stream."""
    torch.manual_seed(134)
    model = Gpt(32000, 768, 12, 12, 512).to(DEV)
    ema = Gpt(32000, 768, 12, 12, 512).to(DEV).eval().requires_grad_(False)
    ema.load_state_dict(model.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    side = _stream()
    params, ema_params = list(model.parameters()), list(ema.parameters())
    for s in range(steps):
        idx = torch.randint(0, 32000, (8, 513), device=DEV)
        with torch.autocast(**_amp(torch.bfloat16)):
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, 32000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        # The EMA update of the last step read the parameters this step changes in place.
        if side is not None:
            torch.cuda.current_stream().wait_stream(side)
        opt.step()
        del logits, loss
        held_out = torch.randint(0, 32000, (4, 513), device=DEV) if s % 2 == 0 else None
        if side is not None:
            side.wait_stream(torch.cuda.current_stream())
        with _on(side), torch.no_grad():
            torch._foreach_lerp_(ema_params, [p.detach() for p in params], 0.001)
            if held_out is not None:
                with torch.autocast(**_amp(torch.bfloat16)):
                    ev = ema(held_out[:, :-1])
                ev_loss = F.cross_entropy(ev.float().view(-1, 32000), held_out[:, 1:].reshape(-1))
                del ev, ev_loss
        if held_out is not None and side is not None:
            held_out.record_stream(side)


# ------------------------------------------------ augmentation on the loader's stream

def _augment(raw, gen_seed, size):
    """Random resized crops (one per image), flips, brightness and contrast jitter and
    mixup of a uint8 batch (B, 3, H, W), to float (B, 3, size, size) in channels-last."""
    g = torch.Generator(device=raw.device).manual_seed(gen_seed)
    b, _, h, w = raw.shape
    crops = []
    for i in range(b):
        ch = int(torch.randint(h // 2, h + 1, (1,), device=raw.device, generator=g))
        cw = int(torch.randint(w // 2, w + 1, (1,), device=raw.device, generator=g))
        y0 = int(torch.randint(0, h - ch + 1, (1,), device=raw.device, generator=g))
        x0 = int(torch.randint(0, w - cw + 1, (1,), device=raw.device, generator=g))
        crop = raw[i:i + 1, :, y0:y0 + ch, x0:x0 + cw].float() / 255
        crops.append(F.interpolate(crop, size=(size, size), mode="bilinear", antialias=True))
    x = torch.cat(crops)
    flip = torch.rand(b, 1, 1, 1, device=raw.device, generator=g) < 0.5
    x = torch.where(flip, x.flip(3), x)
    x = x * (0.8 + 0.4 * torch.rand(b, 1, 1, 1, device=raw.device, generator=g))
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * (0.8 + 0.4 * torch.rand(b, 1, 1, 1, device=raw.device, generator=g)) + mean
    lam = float(torch.rand(1, device=raw.device, generator=g))
    x = lam * x + (1 - lam) * x.roll(1, dims=0)
    return x.contiguous(memory_format=torch.channels_last), lam


def gpu_augment_loader_train(steps):
    """torchvision ResNet-18 (channels-last, bf16 autocast, SGD) trained on batches that a
    loader stream prepares two ahead: uint8 images of 256-320 pixels copied from pinned
    memory, augmented on the GPU (a random resized crop per image to 192, flips,
    brightness and contrast jitter, mixup), handed to the main stream with
    record_stream; batches of 64-128."""
    torch.manual_seed(135)
    model = resnet(18, 100).to(DEV, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = _stream()
    gen = _generator(135)
    size = 192 if CUDA else 32
    sides = (256, 288, 320) if CUDA else (40, 48)
    batches = (64, 96, 128) if CUDA else (4, 6)
    host = {(b, s): torch.randint(0, 256, (b, 3, s, s), dtype=torch.uint8)
            for b in batches for s in sides}
    if CUDA:
        host = {k: v.pin_memory() for k, v in host.items()}

    def load(i):
        key = (_pick(gen, batches), _pick(gen, sides))
        labels = torch.randint(0, 100, (key[0],), generator=gen)
        with _on(loader):
            raw = host[key].to(DEV, non_blocking=True)
            x, lam = _augment(raw, 1000 + i, size)
            y = labels.to(DEV, non_blocking=True)
            del raw
        return x, y, lam

    queue = [load(0), load(1)]
    for s in range(steps):
        x, y, lam = queue.pop(0)
        _hand_over([x, y], loader)
        queue.append(load(s + 2))
        with torch.autocast(**_amp(torch.bfloat16)):
            out = model(x)
        loss = lam * F.cross_entropy(out.float(), y) + (1 - lam) * F.cross_entropy(
            out.float(), y.roll(1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del x, y, out, loss
    if loader is not None:
        torch.cuda.current_stream().wait_stream(loader)


# ------------------------------------------------------ checkpoints staged asynchronously

def async_checkpoint_train(steps):
    """A 16-layer GPT (d 1,024, vocab 32,000, context 256) trained on 8 sequences of 256
    with AdamW; every third step a checkpoint is staged asynchronously, as
    `torch.distributed.checkpoint.async_save` stages one: the parameters and both Adam
    moments are cloned on the GPU (about 3 GiB in blocks of every parameter's size), the
    clones copied to pinned host memory on a side stream, and freed there (record_stream)
    while the next steps train."""
    torch.manual_seed(136)
    model = Gpt(32000, 1024, 16, 16, 256).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    side = _stream()
    host = None
    for s in range(steps):
        idx = torch.randint(0, 32000, (8, 257), device=DEV)
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.view(-1, 32000), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del logits, loss
        if s % 3 != 1:
            continue
        with torch.no_grad():
            state = [p.detach() for p in model.parameters()]
            state += [v for st in opt.state.values() for k, v in st.items() if k != "step"]
            clones = [t.clone() for t in state]
        if host is None:
            host = [torch.empty(t.shape, dtype=t.dtype, pin_memory=CUDA) for t in clones]
        if side is not None:
            side.wait_stream(torch.cuda.current_stream())
        with _on(side):
            for h, c in zip(host, clones):
                h.copy_(c, non_blocking=True)
        if side is not None:
            for c in clones:
                c.record_stream(side)
        del clones, state
    if side is not None:
        side.synchronize()


WORKLOADS = {
    "three_stage_stream_infer": (three_stage_stream_infer, 8),
    "two_stream_serving": (two_stream_serving, 8),
    "draft_stream_speculative_decode": (draft_stream_speculative_decode, 6),
    "ema_eval_side_stream_train": (ema_eval_side_stream_train, 8),
    "gpu_augment_loader_train": (gpu_augment_loader_train, 10),
    "async_checkpoint_train": (async_checkpoint_train, 9),
}
