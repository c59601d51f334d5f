"""Makes the working tree small enough to travel to the GPU machine, and puts it back.

The GPU machine takes the tracked files, the untracked files git does not ignore and the
carried paths, at most 64 MiB in all. The repository's tracked files are larger than that
(earlier calls' results under bench/results, the traces under tests/data/traces), and a
device call needs few of them: its scripts, its traces, its call folder. `slim` takes
every tracked path under `bench/results` out of the index, except the paths named (a
call's folder, or a file of it), and lists them in `.git/info/exclude`, so that neither
travels; nothing is deleted from the disk, and `git status` shows them as staged deletions
until `restore` puts the index and `.git/info/exclude` back as they were. Commit nothing
between the two (`slim` refuses to run twice, `restore` may).

Usage, from the repository root:
    python3 bench/device_tree.py slim [--drop PATH]... [--only-traces NAME]... [KEEP_PATH]...
    python3 bench/device_tree.py restore
    python3 bench/device_tree.py size       # MB that would travel now (tracked + untracked, not ignored)
`--drop PATH` takes a tracked path outside bench/results out too (a large trace the call
does not replay). `--only-traces NAME` (repeatable; a trace's name without `.csv` or
`.csv.gz`) takes every trace of tests/data/traces out but those named: the traces alone are
more than the limit, so a call that replays a few names them rather than listing the others.
`slim` prints the size before and after; the carry (e.g. .device-bin.txz) comes on top of it.
"""
import argparse
import os
import subprocess
import sys

BEGIN = "# device_tree.py slim: BEGIN (python3 bench/device_tree.py restore removes this block)"
END = "# device_tree.py slim: END"
LIMIT_MB = 64 * (1 << 20) / 1e6


def git(*args, text=True):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=text).stdout


def exclude_path():
    return os.path.join(git("rev-parse", "--git-dir").strip(), "info", "exclude")


def travelling_mb():
    """MB of the files the GPU machine would take now: tracked ones (as on disk) and
    untracked ones that git does not ignore."""
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    return sum(os.path.getsize(f) for f in files if f and os.path.isfile(f)) / 1e6


def read_block():
    """The paths of the slim block of .git/info/exclude (None when there is none)."""
    path = exclude_path()
    if not os.path.exists(path):
        return None
    lines = open(path).read().splitlines()
    if BEGIN not in lines:
        return None
    start = lines.index(BEGIN)
    end = lines.index(END, start)
    return [line.lstrip("/") for line in lines[start + 1:end]]


def to_drop(root, keep, tracked):
    """The shortest tracked paths under `root` that hold none of `keep`: a folder goes whole
    when nothing kept lies in it; one that holds a kept path is opened."""
    out = []
    children = sorted({t[len(root) + 1:].split("/")[0] for t in tracked if t.startswith(root + "/")})
    for child in children:
        path = f"{root}/{child}"
        if path in keep:
            continue
        if any(k.startswith(path + "/") for k in keep):
            out += to_drop(path, keep, tracked)
        else:
            out.append(path)
    return out


TRACES = "tests/data/traces"


def trace_stem(path):
    """`NAME` of tests/data/traces/NAME.csv or NAME.csv.gz, else None."""
    folder, name = os.path.split(path)
    if folder != TRACES:
        return None
    for ext in (".csv.gz", ".csv"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return None


def other_traces(tracked, names):
    """The tracked trace files of tests/data/traces whose names are not in `names`; exits
    naming any of `names` that is no trace there."""
    stems = {trace_stem(t): t for t in tracked if trace_stem(t)}
    unknown = [n for n in names if n not in stems]
    if unknown:
        sys.exit(f"device_tree.py: --only-traces {', '.join(unknown)}: no such trace in "
                 f"{TRACES} (give the name without .csv or .csv.gz)")
    return sorted(path for stem, path in stems.items() if stem not in names)


def slim(keep, extra, only_traces=()):
    if read_block() is not None:
        sys.exit("device_tree.py: already slim (a block in .git/info/exclude); run "
                 "`python3 bench/device_tree.py restore` first")
    if git("diff", "--cached", "--name-only").strip():
        sys.exit("device_tree.py: the index has staged changes; commit or unstage them "
                 "first, so that `restore` gives back exactly what was there")
    tracked = set(git("ls-files", "-z").split("\0")) - {""}
    keep = [k.rstrip("/") for k in keep]
    for k in keep:
        if k not in tracked and not any(t.startswith(k + "/") for t in tracked):
            sys.exit(f"device_tree.py: {k} is not a tracked file or folder; name a path "
                     "under bench/results that git tracks (commit a new call's script first)")
    for e in extra:
        if e not in tracked and not any(t.startswith(e.rstrip("/") + "/") for t in tracked):
            sys.exit(f"device_tree.py: --drop {e} is not tracked")
    before = travelling_mb()
    paths = to_drop("bench/results", keep, tracked) + [e.rstrip("/") for e in extra]
    if only_traces:
        paths += [t for t in other_traces(tracked, set(only_traces)) if t not in paths]
    with open(exclude_path(), "a") as f:
        f.write("\n".join([BEGIN, *("/" + p for p in paths), END]) + "\n")
    git("rm", "-r", "-q", "--cached", "--", *paths)
    after = travelling_mb()
    print(f"slim: {len(paths)} paths out of the index; {before:.1f} MB -> {after:.1f} MB travel "
          f"(limit {LIMIT_MB:.1f} MB with the carry); `python3 bench/device_tree.py restore` after the call")


def restore():
    paths = read_block()
    if paths is None:
        print("restore: not slim, nothing to do")
        return
    if paths:
        git("reset", "-q", "--", *paths)
    path = exclude_path()
    lines = open(path).read().splitlines()
    start = lines.index(BEGIN)
    end = lines.index(END, start)
    del lines[start:end + 1]
    with open(path, "w") as f:
        f.write("\n".join(lines) + ("\n" if lines else ""))
    print(f"restore: {len(paths)} paths back in the index; {travelling_mb():.1f} MB tracked and untracked")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("slim")
    s.add_argument("--drop", action="append", default=[])
    s.add_argument("--only-traces", action="append", default=[])
    s.add_argument("keep", nargs="*")
    sub.add_parser("restore")
    sub.add_parser("size")
    args = ap.parse_args()
    os.chdir(git("rev-parse", "--show-toplevel").strip())
    if args.cmd == "slim":
        slim(args.keep, args.drop, args.only_traces)
    elif args.cmd == "restore":
        restore()
    else:
        print(f"{travelling_mb():.1f} MB would travel (limit {LIMIT_MB:.1f} MB with the carry)")


if __name__ == "__main__":
    main()
