"""Records one workload's allocations through PyTorch's CUDA caching allocator and writes
them as a gpuscope trace (CSV `op,id,size,stream`) with PyTorch's own figures beside it
(JSON, the fields of the traces in tests/data/traces/).

Usage (GPU machine, one process per workload so that histories never mix):
    python3 bench/record_traces/record.py OUT_DIR WORKLOAD
    torchrun --standalone --nproc_per_node=N bench/record_traces/record.py OUT_DIR WORKLOAD
    python3 bench/record_traces/record.py --ranks WORKLOAD
    python3 bench/record_traces/record.py --pickle OUT.pickle [WORKLOAD STEPS]
    RECORD_DEVICE=cpu python3 bench/record_traces/record.py --try WORKLOAD...
The second records a workload of RANKS (one process per GPU; rank 0 writes the trace of
its own GPU), the third prints how many processes a workload runs on (record_all.sh
asks), the fourth writes a small `torch.cuda.memory._dump_snapshot` pickle of a short
training run (tests/data/pytorch-snapshots/small_train.pickle), or of STEPS steps of
WORKLOAD (under whatever PYTORCH_CUDA_ALLOC_CONF the caller sets); the last runs
workloads on the CPU for two steps, recording nothing (to try a new one without a GPU).

How the trace is made, from `torch.cuda.memory._snapshot()['device_traces']`:
- `alloc` becomes `a,ID,SIZE,STREAM` (SIZE: the bytes asked for; ids are numbered in
  allocation order; streams are numbered in order of first use, the default stream 0);
- `free_requested` becomes `f,ID,0,STREAM` (STREAM: the block's own stream);
- a `free_requested` that is not followed at once by the block's `free_completed`
  means PyTorch deferred the free for events of other streams (`record_stream`): it is
  preceded by `r,ID,0,S`, S the default stream if the block is on another one, else
  every other stream the trace uses (or, where no other stream allocates, a stream
  number of its own: the stream that used the block allocated nothing);
- frees of blocks allocated before recording started are skipped.
"""
import glob
import importlib
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _workload_modules():
    """workloads.py and every other workloads*.py beside this file (a corpus a file), by
    name."""
    here = os.path.dirname(os.path.abspath(__file__))
    names = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(here, "workloads*.py")))
    return [importlib.import_module(n) for n in names]


WORKLOADS = {}
# Workloads that run one process per GPU under torchrun, and how many (record_all.sh).
RANKS = {}
for _module in _workload_modules():
    for _name, _workload in _module.WORKLOADS.items():
        if _name in WORKLOADS:
            sys.exit(f"record.py: workload {_name} is named in two files (one is {_module.__file__})")
        WORKLOADS[_name] = _workload
    RANKS.update(getattr(_module, "RANKS", {}))


def convert(events):
    """(csv text, counts) from one device's trace events."""
    dense = {0: 0}
    live = {}
    lines = ["op,id,size,stream"]
    next_id = 0
    counts = {"allocs": 0, "frees": 0, "record_streams": 0, "skipped_frees": 0}
    actions = {}
    deferred = []
    for k, e in enumerate(events):
        a = e["action"]
        actions[a] = actions.get(a, 0) + 1
        if a == "alloc":
            s = dense.setdefault(e["stream"], len(dense))
            live[e["addr"]] = (next_id, s)
            lines.append(f"a,{next_id},{e['size']},{s}")
            next_id += 1
            counts["allocs"] += 1
        elif a == "free_requested":
            if e["addr"] not in live:
                counts["skipped_frees"] += 1
                continue
            ident, s = live.pop(e["addr"])
            nxt = events[k + 1] if k + 1 < len(events) else None
            # (The last event of the history cannot tell: taken as immediate.)
            immediate = nxt is None or (nxt["action"] == "free_completed"
                                        and nxt["addr"] == e["addr"])
            if not immediate:
                deferred.append((len(lines), ident, s))
            lines.append(f"f,{ident},0,{s}")
            counts["frees"] += 1
    # Record-stream lines go before their frees (inserted back to front).
    streams = sorted(dense.values())
    # A block of the default stream whose free waited, in a trace where no other stream
    # allocates (it only copies or reads, as a side stream staging a checkpoint to the
    # host does): the stream that used it gets a number of its own.
    silent = len(dense)
    for at, ident, s in reversed(deferred):
        users = [0] if s != 0 else [t for t in streams if t != 0] or [silent]
        for t in reversed(users):
            lines.insert(at, f"r,{ident},0,{t}")
            counts["record_streams"] += 1
    counts["still_live_at_end"] = len(live)
    counts["streams"] = len(dense) + (1 if deferred and len(dense) == 1 else 0)
    return "\n".join(lines) + "\n", counts, actions


def record(out_dir, name):
    fn, steps = WORKLOADS[name]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        # Under torchrun: this process's GPU and the NCCL group, set up before recording
        # (as a training script does before its first step); rank 0 writes the trace.
        import torch.distributed as dist
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.cuda.init()
    # Nothing runs before the recording: library workspaces (cuBLAS, cuDNN) are allocated
    # inside it, as in a real first step.
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=10_000_000)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(steps)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats()
    events = snap["device_traces"][torch.cuda.current_device()]
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
        if rank != 0:
            return
    text, counts, actions = convert(events)
    with open(os.path.join(out_dir, f"{name}.csv"), "w") as f:
        f.write(text)
    info = {
        "workload": name,
        "description": " ".join((fn.__doc__ or "").split()),
        "steps": steps,
        "seconds": seconds,
        "trace_actions": actions,
        "allocs_in_trace": counts["allocs"],
        "record_streams": counts["record_streams"],
        "skipped_frees": counts["skipped_frees"],
        "still_live_at_end": counts["still_live_at_end"],
        "streams": counts["streams"],
        "max_allocated_bytes": stats.get("allocated_bytes.all.peak", 0),
        "max_reserved_bytes": stats.get("reserved_bytes.all.peak", 0),
        "num_device_alloc": stats.get("num_device_alloc", 0),
        "num_device_free": stats.get("num_device_free", 0),
        "num_alloc_retries": stats.get("num_alloc_retries", 0),
        "segment_peak": stats.get("segment.all.peak", 0),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "ranks": world,
    }
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"{name}: {counts['allocs']} allocs, {counts['record_streams']} record_stream, "
          f"{counts['streams']} streams, peak allocated {info['max_allocated_bytes'] >> 20} MiB, "
          f"reserved {info['max_reserved_bytes'] >> 20} MiB, {seconds:.1f} s")


def dump_pickle(path, name=None, steps=None):
    """A small real snapshot pickle with Python stacks: a short MLP training run, or
    `steps` steps of workload `name` (its whole history)."""
    torch.cuda.init()
    if name is not None:
        sizes = ((10_000_000, int(steps)),)
        run = WORKLOADS[name][0]
    else:
        sizes = ((3000, 3), (1000, 2), (300, 1))
        run = workloads.tiny_mlp_train
    for entries, steps in sizes:
        torch.cuda.empty_cache()
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                 max_entries=entries)
        run(steps)
        torch.cuda.synchronize()
        torch.cuda.memory._dump_snapshot(path)
        torch.cuda.memory._record_memory_history(enabled=None)
        size = os.path.getsize(path)
        print(f"{path}: {size} bytes ({entries} entries, {steps} steps)")
        if size <= 3 << 20:
            return


def check_names(names):
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        sys.exit(f"record.py: unknown workload(s) {', '.join(unknown)}; "
                 f"the workloads are: {', '.join(WORKLOADS)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--pickle":
        if len(sys.argv) not in (3, 5):
            sys.exit(__doc__)
        check_names(sys.argv[3:4])
        dump_pickle(*sys.argv[2:])
    elif sys.argv[1] == "--ranks":
        check_names(sys.argv[2:3])
        print(RANKS.get(sys.argv[2], 1))
    elif sys.argv[1] == "--try":
        check_names(sys.argv[2:])
        for name in sys.argv[2:] or WORKLOADS:
            t0 = time.perf_counter()
            WORKLOADS[name][0](2)
            print(f"{name}: ran 2 steps in {time.perf_counter() - t0:.1f} s")
    else:
        if len(sys.argv) != 3:
            sys.exit(__doc__)
        check_names(sys.argv[2:])
        record(sys.argv[1], sys.argv[2])
