"""Packs the raw repeats of compare_torch.sh output folders into one archive each, so that
kept results stay small (the GPU machine's calls carry the tracked tree and the binaries
within 64 MiB).

In each folder given, the files only compare_torch.py's tables need (the second and
later repeats `torch_N.txt` and `gpuscope_N.jsonl`, `gpuscope_plain*.jsonl`,
`gpuscope_passes10.jsonl`) go into `repeats.tar.gz` and are removed; `torch.txt`,
`gpuscope.jsonl` (the first repeat, what the placement model's scripts read), `table.md`
and `method.txt` stay as they are. compare_torch.py reads the archive when it is there.
Before removing anything, the tables compare_torch.py prints from the packed folder are
checked to be the ones it printed from the plain files; a folder where they differ is
left as it was.

Usage, from the repository root:
    python3 bench/pack_repeats.py DIR...
"""
import io
import os
import re
import sys
import tarfile
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_torch  # noqa: E402

PACKED = re.compile(r"^(torch_\d+\.txt|gpuscope_\d+\.jsonl|gpuscope_plain(_\d+)?\.jsonl|"
                    r"gpuscope_passes10\.jsonl)$")


def tables(out_dir):
    """What compare_torch.py prints for `out_dir`."""
    buf = io.StringIO()
    with redirect_stdout(buf), compare_torch.readable(out_dir) as d:
        compare_torch.main(d)
    return buf.getvalue()


def pack(out_dir):
    """Packs `out_dir`'s repeats; returns how many bytes the plain files took, or None if
    there was nothing to pack or the tables would change."""
    archive = os.path.join(out_dir, compare_torch.ARCHIVE)
    names = sorted(n for n in os.listdir(out_dir) if PACKED.match(n))
    if not names or os.path.exists(archive):
        return None
    before = tables(out_dir)
    with tarfile.open(archive, "w:gz", compresslevel=9) as tar:
        for n in names:
            tar.add(os.path.join(out_dir, n), arcname=n)
    size = sum(os.path.getsize(os.path.join(out_dir, n)) for n in names)
    moved = os.path.join(out_dir, ".unpacked")
    os.makedirs(moved)
    for n in names:
        os.rename(os.path.join(out_dir, n), os.path.join(moved, n))
    same = False  # until the packed folder's tables are checked (an error keeps the files)
    try:
        same = tables(out_dir) == before
    finally:
        if not same:
            os.remove(archive)
        for n in names:
            dest = os.path.join(out_dir, n)
            if same:
                os.remove(os.path.join(moved, n))
            else:
                os.rename(os.path.join(moved, n), dest)
        os.rmdir(moved)
    return size if same else None


def main(dirs):
    if not dirs:
        sys.exit(__doc__)
    for d in dirs:
        if not os.path.isfile(os.path.join(d, "torch.txt")):
            sys.exit(f"pack_repeats.py: {d} is not a compare_torch.sh output folder "
                     "(no torch.txt)")
    for d in dirs:
        size = pack(d)
        if size is None:
            print(f"{d}: left as it was (nothing to pack, packed already, or the tables "
                  "would change)")
        else:
            packed = os.path.getsize(os.path.join(d, compare_torch.ARCHIVE))
            print(f"{d}: {size} bytes -> {packed} ({compare_torch.ARCHIVE})")


if __name__ == "__main__":
    main(sys.argv[1:])
