"""The MLP of examples/train.rs in PyTorch eager, step for step, for the step-time
comparison in BENCHMARKS.md. Same widths, batch, dtype (f32), optimizer (AdamW, lr 3e-3),
GELU (tanh), cross-entropy, batch upload from host memory each step, and the same two
read-backs per step (the loss, and the logits for the running accuracy).

Usage (GPU machine): python3 bench/torch_mlp.py [--hidden 256] [--batch-size 128]
    [--samples 10000] [--epochs 8]
"""
import argparse
import time

import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=256)
p.add_argument("--batch-size", type=int, default=128)
p.add_argument("--samples", type=int, default=10000)
p.add_argument("--epochs", type=int, default=8)
a = p.parse_args()

classes = 10
rng = np.random.default_rng(7)
centers = rng.normal(0, 4, size=(classes, 2)).astype(np.float32)
y_all = rng.integers(0, classes, size=a.samples)
x_all = (centers[y_all] + rng.normal(0, 1.0, size=(a.samples, 2))).astype(np.float32)
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(2, a.hidden), torch.nn.GELU(approximate="tanh"),
    torch.nn.Linear(a.hidden, a.hidden), torch.nn.GELU(approximate="tanh"),
    torch.nn.Linear(a.hidden, classes),
).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
steps = 0
t_train = 0.0
for epoch in range(a.epochs):
    order = rng.permutation(a.samples)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in range(0, a.samples - a.batch_size + 1, a.batch_size):
        idx = order[s:s + a.batch_size]
        x = torch.from_numpy(x_all[idx]).to(dev)
        y = torch.from_numpy(y_all[idx]).to(dev)
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        hits = (logits.detach().cpu().argmax(1) == y.cpu()).sum().item()
        loss_value = loss.item()
        steps += 1
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if epoch > 0:  # the first epoch warms up (cuBLAS handles, kernels, allocator)
        t_train += dt
    print(f"epoch {epoch + 1}: loss {loss_value:.4f}, {dt * 1e3 / (a.samples // a.batch_size):.3f} ms/step")
warm_steps = (a.epochs - 1) * (a.samples // a.batch_size)
print(f"torch {torch.__version__}: {warm_steps} warm steps of batch {a.batch_size}, hidden {a.hidden}: "
      f"{t_train * 1e3 / warm_steps:.3f} ms/step")
