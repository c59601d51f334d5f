#!/usr/bin/env python3
"""Writes PyTorch-format memory snapshot pickles for gpuscope's tests, without torch.

The structure is the one `torch.cuda.memory._dump_snapshot()` pickles: the dict that
`torch.cuda.memory._snapshot()` returns, built in C++ by `_memory_snapshot_pickled`
(torch/csrc/cuda/memory_snapshot.cpp) and written with Python's `pickle.dump`:

  {"segments": [{"device", "address", "total_size", "allocated_size", "active_size",
                 "requested_size", "stream", "segment_type" ("small"|"large"),
                 "segment_pool_id" (tuple), "is_expandable", "frames",
                 "blocks": [{"address", "size", "requested_size",
                             "state" ("active_allocated"|"active_pending_free"|"inactive"),
                             "frames": [{"filename", "line", "name"}]}]}],
   "device_traces": [[{"action" ("alloc"|"free_requested"|"free_completed"|
                                  "segment_alloc"|"segment_free"|"segment_map"|
                                  "segment_unmap"|"snapshot"|"oom"),
                       "addr", "size", "stream", "frames", "time_us"}]],
   "allocator_settings": {...}}

two_devices.pickle is a process that used two GPUs (`two_devices()`): the segments of
both in one list, each with its `device`, and one trace per device.

Frames are shared between entries (as the C++ code shares them), so the pickle uses
memo references, as real ones do. Real snapshots made on a GPU go in this folder too;
the tests read every *.pickle here.

Usage: python3 make_test_snapshots.py   (writes into this script's folder)
       python3 make_test_snapshots.py two_devices   (writes two_devices.pickle only)
       python3 make_test_snapshots.py other_encodings   (writes other-encodings/: a
           real snapshot as JSON, a synthetic one with pickle protocol 0)
"""

import json
import os
import pickle
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def frame(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


# Stacks, innermost first, as PyTorch records them.
TORCH = frame("/usr/lib/python3/site-packages/torch/nn/functional.py", 2380, "linear")
SITES = {
    "embed": [frame("/usr/lib/python3/site-packages/torch/nn/modules/sparse.py", 190, "forward"),
              frame("/home/user/train.py", 41, "forward")],
    "mlp": [TORCH, frame("/home/user/model.py", 88, "mlp")],
    "attn": [frame("/home/user/model.py", 120, "attention")],
    "grad": [frame("??", 0, "torch::autograd::Engine::evaluate_function")],
    "opt": [frame("/usr/lib/python3/site-packages/torch/optim/adamw.py", 512, "_multi_tensor_adamw"),
            frame("/home/user/train.py", 77, "step")],
}


class Allocator:
    """Just enough of a caching allocator to make a consistent trace and snapshot."""

    def __init__(self, stream, t0, base=0x7F0000000000):
        self.stream = stream
        self.t = t0
        self.trace = []
        self.segments = []  # [address, size, type, blocks: {offset: [size, requested, state, frames]}]
        self.next_base = base

    def tick(self):
        self.t += random.randint(1, 40)
        return self.t

    def event(self, action, addr, size, frames=None):
        e = {"action": action, "addr": addr, "size": size, "stream": self.stream, "time_us": self.tick()}
        e["frames"] = frames if frames is not None else []
        self.trace.append(e)

    def segment(self, size, kind):
        base = self.next_base
        self.next_base += size + 64 * MiB
        self.segments.append([base, size, kind, {0: [size, 0, "inactive", []]}])
        self.event("segment_alloc", base, size)
        return self.segments[-1]

    def alloc(self, requested, name):
        size = max(512, (requested + 511) // 512 * 512)
        kind = "small" if size <= MiB else "large"
        for seg in self.segments:
            if seg[2] != kind:
                continue
            for off, b in sorted(seg[3].items()):
                if b[2] == "inactive" and b[0] >= size:
                    return self.take(seg, off, size, requested, name)
        seg = self.segment(2 * MiB if kind == "small" else max(20 * MiB, size), kind)
        return self.take(seg, 0, size, requested, name)

    def take(self, seg, off, size, requested, name):
        b = seg[3][off]
        if b[0] > size:
            seg[3][off + size] = [b[0] - size, 0, "inactive", []]
        seg[3][off] = [size, requested, "active_allocated", SITES[name]]
        addr = seg[0] + off
        self.event("alloc", addr, requested, SITES[name])
        return addr

    def free(self, addr, pending=False):
        for seg in self.segments:
            off = addr - seg[0]
            if off in seg[3] and seg[3][off][2] == "active_allocated":
                b = seg[3][off]
                self.event("free_requested", addr, b[1], b[3])
                if pending:
                    b[2] = "active_pending_free"
                    return
                self.event("free_completed", addr, b[1], b[3])
                b[1], b[2], b[3] = 0, "inactive", []
                # merge with the next free block
                nxt = off + b[0]
                if nxt in seg[3] and seg[3][nxt][2] == "inactive":
                    b[0] += seg[3].pop(nxt)[0]
                return
        raise ValueError("free of an unknown address")

    def snapshot_segments(self, device):
        out = []
        for base, size, kind, blocks in self.segments:
            bl = []
            for off, (bsize, req, state, frames) in sorted(blocks.items()):
                bl.append({"address": base + off, "size": bsize, "requested_size": req,
                           "state": state, "frames": frames})
            allocated = sum(b["size"] for b in bl if b["state"] == "active_allocated")
            active = sum(b["size"] for b in bl if b["state"] != "inactive")
            out.append({
                "device": device, "address": base, "total_size": size,
                "allocated_size": allocated, "active_size": active,
                "requested_size": sum(b["requested_size"] for b in bl),
                "stream": self.stream, "segment_type": kind, "segment_pool_id": (0, 0),
                "is_expandable": False, "frames": [], "blocks": bl,
            })
        return out


def training_run(steps):
    """A small model's training steps: weights kept, activations freed, a leak."""
    random.seed(7)
    a = Allocator(stream=0, t0=1_700_000_000_000_000)
    weights = [a.alloc(4 * MiB, "embed"), a.alloc(3 * MiB, "mlp"), a.alloc(3 * MiB, "mlp")]
    moments = []
    leaked = []
    for step in range(steps):
        acts = [a.alloc(random.choice([256 * 1024, 512 * 1024, 2 * MiB]), "mlp") for _ in range(6)]
        acts += [a.alloc(1536 * 1024, "attn") for _ in range(2)]
        grads = [a.alloc(3 * MiB, "grad") for _ in range(3)]
        for x in acts:
            a.free(x)
        if step == 0:
            moments = [a.alloc(4 * MiB, "opt") for _ in range(4)]
        for g in grads:
            a.free(g)
        leaked.append(a.alloc(64 * 1024, "attn"))  # kept across steps: a leak
    # One free waiting for another stream's work.
    pending = a.alloc(8192, "mlp")
    a.free(pending, pending=True)
    return {
        "segments": a.snapshot_segments(device=0),
        "device_traces": [a.trace],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False, "roundup_power2_divisions": {"1": 0},
        },
    }, weights, moments


# Sites of the second GPU's code (a pipeline's second stage).
SITES["stage2"] = [TORCH, frame("/home/user/stage2.py", 30, "forward")]
SITES["stage2_loss"] = [frame("/home/user/stage2.py", 55, "loss")]


def two_devices():
    """Two GPUs of one process, as _dump_snapshot writes them: the segments of both
    devices in one `segments` list (each with its `device`), and `device_traces` with
    one list per device. Device 0 runs training steps; device 1 a second pipeline
    stage with sites of its own, at other addresses (CUDA's unified address space)."""
    random.seed(11)
    d0 = Allocator(stream=0, t0=1_700_000_000_000_000)
    d1 = Allocator(stream=0, t0=1_700_000_000_000_500, base=0x7E0000000000)
    w0 = [d0.alloc(4 * MiB, "embed"), d0.alloc(3 * MiB, "mlp")]
    w1 = [d1.alloc(6 * MiB, "stage2")]
    for _ in range(3):
        acts = [d0.alloc(random.choice([256 * 1024, 2 * MiB]), "mlp") for _ in range(3)]
        outs = [d1.alloc(1536 * 1024, "stage2") for _ in range(2)]
        loss = d1.alloc(4096, "stage2_loss")
        for x in acts:
            d0.free(x)
        for x in outs + [loss]:
            d1.free(x)
    kept = d1.alloc(512 * 1024, "stage2_loss")
    return {
        "segments": d0.snapshot_segments(device=0) + d1.snapshot_segments(device=1),
        "device_traces": [d0.trace, d1.trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False},
    }, (w0, w1, kept)


def write_two_devices():
    snap, _ = two_devices()
    with open(os.path.join(HERE, "two_devices.pickle"), "wb") as f:
        pickle.dump(snap, f)


def write_other_encodings():
    """The same snapshots as other tools write them, in other-encodings/: the real
    small_train.pickle as JSON (`json.dump` of the unpickled dict, as scripts that
    post-process `torch.cuda.memory._snapshot()` do) and synthetic_training.pickle with
    pickle protocol 0 (text opcodes, as `pickle.dump(..., protocol=0)` writes)."""
    out = os.path.join(HERE, "other-encodings")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(HERE, "small_train.pickle"), "rb") as f:
        small = pickle.load(f)
    with open(os.path.join(out, "small_train.json"), "w") as f:
        json.dump(small, f)
    with open(os.path.join(HERE, "synthetic_training.pickle"), "rb") as f:
        synthetic = pickle.load(f)
    with open(os.path.join(out, "synthetic_training_protocol0.pickle"), "wb") as f:
        pickle.dump(synthetic, f, protocol=0)


def main():
    if sys.argv[1:] == ["two_devices"]:
        write_two_devices()
        return
    if sys.argv[1:] == ["other_encodings"]:
        write_other_encodings()
        return
    write_two_devices()
    snap, _, _ = training_run(steps=12)
    with open(os.path.join(HERE, "synthetic_training.pickle"), "wb") as f:
        pickle.dump(snap, f)  # the default protocol, as _dump_snapshot does

    bad = os.path.join(HERE, "bad")
    os.makedirs(bad, exist_ok=True)
    # A pickle that is not a snapshot.
    with open(os.path.join(bad, "not_a_snapshot.pickle"), "wb") as f:
        pickle.dump([1, 2, {"segments": "no"}], f)
    # A snapshot whose trace entry has a size that is not a number.
    broken, _, _ = training_run(steps=1)
    broken["device_traces"][0][3]["size"] = "big"
    with open(os.path.join(bad, "bad_size.pickle"), "wb") as f:
        pickle.dump(broken, f)
    # A snapshot with fields this version does not know (a newer PyTorch): readable.
    newer, _, _ = training_run(steps=2)
    newer["device_traces"][0][1]["new_event_field"] = "phase=forward"
    newer["segments"][0]["blocks"][0]["new_block_field"] = "N/A"
    newer["new_top_level_field"] = {"x": 1}
    with open(os.path.join(bad, "unknown_fields.pickle"), "wb") as f:
        pickle.dump(newer, f)
    # No segments, no events.
    with open(os.path.join(bad, "empty.pickle"), "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[]], "allocator_settings": {}}, f)


if __name__ == "__main__":
    main()
