"""How close to the device's memory each allocator lets a workload come: every request of
a trace is scaled by the same factor until the replay runs out of memory, and the
largest peak of live memory that still replays (cold pass and one warm pass) is
reported as a fraction of the memory the device has free. An allocator that wasted
nothing would reach 1.0; what it reaches less is the memory its fragmentation, page
rounding and growth steps cost where memory is scarce, which is where users see an OOM.

Usage, from the repository root:
    python3 bench/headroom.py [--runner R]... [--capacity BYTES] [--lo F] [--steps N] TRACE.csv...
Runners (each may be given more than once; default sim):
    sim            `gpuscope replay --backend sim` (a simulated 80 GiB device)
    cuda           `gpuscope replay --backend cuda`
    torch-default  PyTorch's caching allocator through bench/torch_replay.cpp (built by
                   bench/torch_replay.sh's compile line into /tmp/torch_replay)
    torch-expandable  the same with expandable_segments:True
    RUNNER[VAR=VALUE,...]  a runner with environment variables set (e.g.
                   `cuda[GPUSCOPE_ALLOC_CONF=...]`)
Environment: GPUSCOPE (the gpuscope binary, default target/release/gpuscope),
TORCH_REPLAY (default /tmp/torch_replay). --capacity is the memory the fractions are of
(default: 80 GiB for sim; for the others the device's free memory, from nvidia-smi).
Bisection on the fraction between --lo (default 0.80) and 1.0, --steps times (default 7,
about 0.16% of the device). Prints one line per trace and runner, then a table.
"""
import argparse
import gzip
import os
import signal
import subprocess
import sys
import tempfile
import time

GIB = 1 << 30


def read_trace(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        header = f.readline()
        rows = [line.rstrip("\n").split(",") for line in f if line.strip()]
    live, cur, peak = {}, 0, 0
    for op, id_, size, _ in rows:
        if op == "a":
            live[id_] = int(size)
            cur += int(size)
            peak = max(peak, cur)
        elif op == "f":
            cur -= live.pop(id_, 0)
    return header, rows, peak


def write_scaled(header, rows, k, path):
    with open(path, "w") as out:
        out.write(header)
        for op, id_, size, stream in rows:
            if op == "a":
                size = str(int(int(size) * k))
            out.write(f"{op},{id_},{size},{stream}\n")


def attempt(runner, path):
    """Whether the scaled trace replays (cold and one warm pass) without running out."""
    gpuscope = os.environ.get("GPUSCOPE", "target/release/gpuscope")
    env = dict(os.environ)
    if runner.endswith("]"):
        runner, settings = runner[:-1].split("[", 1)
        env.update(kv.split("=", 1) for kv in settings.split(","))
    if runner in ("sim", "cuda"):
        cmd = [gpuscope, "replay", "--backend", runner, "--warm-passes", "1", path]
    else:
        replayer = os.environ.get("TORCH_REPLAY", "/tmp/torch_replay")
        if not os.path.exists(replayer):
            raise SystemExit(
                f"headroom.py: runner {runner} needs PyTorch's replayer at {replayer}, which is "
                "not there: build it first on the GPU machine (bench/torch_replay.sh compiles "
                "it there, as bench/compare_torch.sh does), or set TORCH_REPLAY to it")
        cmd = [replayer, path]
        env["TORCH_REPLAY_PASSES"] = "2"
        env["TORCH_REPLAY_PAIRS"] = "0"
        if runner == "torch-expandable":
            env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    global CHILD
    CHILD = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = CHILD.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        CHILD.kill()
        CHILD.communicate()
        raise SystemExit(f"{runner} took more than 300 s on {path}")
    returncode, CHILD = CHILD.returncode, None
    out = stdout + stderr
    if returncode == 0:
        return True, ""
    if "out of memory" in out.lower() or "OutOfMemory" in out:
        return False, ""
    raise SystemExit(f"{runner} failed on {path} for another reason than memory:\n{out[-3000:]}")


# The replay running now, if any: ended with this script when a time limit ends it
# (`timeout` signals only this process), so that its memory is not still held when the
# next measurement reads the device's free memory.
CHILD = None


def end_child(signum, _frame):
    if CHILD is not None and CHILD.poll() is None:
        CHILD.kill()
        CHILD.wait()
    raise SystemExit(128 + signum)


def device_memory():
    """(free, total) bytes of GPU 0, from nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free,memory.total",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"headroom.py: the device's free memory comes from nvidia-smi, which failed "
                         f"({e}): run on the GPU machine, or give --capacity BYTES (the sim runner "
                         "alone defaults to 80 GiB)")
    free, total = (int(x) << 20 for x in out.splitlines()[0].split(","))
    return free, total


def device_free(settle_s=60.0, step_s=0.5):
    """The device's free memory once it has stopped rising: a process that ended (or was
    cut off by a time limit, its replayer still exiting) may still be giving memory back,
    and a reading taken then makes every fraction of a run too small. Polls until two
    readings `step_s` apart differ by less than 64 MiB, for at most `settle_s`; says so on
    stderr when less than nine tenths of the device is free."""
    free, total = device_memory()
    deadline = time.time() + settle_s
    while time.time() < deadline:
        time.sleep(step_s)
        now, _ = device_memory()
        if abs(now - free) < (64 << 20):
            free = max(free, now)
            break
        free = now
    if free < 0.9 * total:
        print(f"headroom.py: only {free / GIB:.2f} of {total / GIB:.2f} GiB free on the device: "
              "another process holds memory, and the fractions are of what is free",
              file=sys.stderr, flush=True)
    return free


def headroom(runner, trace, capacity, lo, steps, tmp):
    header, rows, peak = read_trace(trace)
    path = os.path.join(tmp, os.path.basename(trace).removesuffix(".gz"))
    ok_at, t0, tries = None, time.time(), 0
    hi = 1.0
    # The lower end must replay; if not, step down.
    while True:
        write_scaled(header, rows, lo * capacity / peak, path)
        tries += 1
        if attempt(runner, path)[0]:
            ok_at = lo
            break
        hi, lo = lo, lo - 0.2
        if lo <= 0:
            return 0.0, tries, time.time() - t0
    for _ in range(steps):
        mid = (lo + hi) / 2
        write_scaled(header, rows, mid * capacity / peak, path)
        tries += 1
        if attempt(runner, path)[0]:
            lo = ok_at = mid
        else:
            hi = mid
    return ok_at, tries, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", action="append")
    ap.add_argument("--capacity", type=int)
    ap.add_argument("--lo", type=float, default=0.80)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("traces", nargs="+")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, end_child)
    runners = a.runner or ["sim"]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for trace in a.traces:
            for runner in runners:
                cap = a.capacity or (80 * GIB if runner.startswith("sim") else device_free())
                f, tries, secs = headroom(runner, trace, cap, a.lo, a.steps, tmp)
                results[(trace, runner)] = f
                print(f"{os.path.basename(trace)} {runner}: live peak up to {f:.4f} of "
                      f"{cap / GIB:.2f} GiB ({tries} replays, {secs:.1f} s)", flush=True)
    print()
    print("| trace | " + " | ".join(runners) + " |")
    print("|---|" + "---:|" * len(runners))
    for trace in a.traces:
        cells = [f"{results[(trace, r)]:.3f}" for r in runners]
        print(f"| {os.path.basename(trace)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
