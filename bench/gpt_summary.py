"""Prints the GPT benchmark's table from gpt_run.sh's logs (the JSON lines of
torch_gpt.py and of the gpt example), and the test and sanitizer tallies."""
import glob, json, os, re, sys

out = sys.argv[1]


def last_json(path):
    try:
        for line in reversed(open(path).read().splitlines()):
            if line.startswith("{"):
                return json.loads(line)
    except (OSError, ValueError):
        return None


rows = []
for name in ["torch_default", "gpt_default", "gpt_default_chain", "gpt_default_ckpt", "gpt_default_r102",
             "torch_sdpa", "gpt_sdpa", "torch_tf32", "gpt_tf32", "torch_bf16", "gpt_bf16",
             "torch_big", "gpt_big", "gpt_big_ckpt", "gpt_big_r102", "torch_big_sdpa", "gpt_big_sdpa", "torch_big_bf16", "gpt_big_bf16"]:
    d = last_json(os.path.join(out, name + ".txt"))
    if d:
        rows.append((name, d))
print(f"{'run':<20} {'ms/step':>9} {'tok/s':>9} {'peak alloc':>12} {'peak res':>12} {'res/alloc':>9} {'first':>7} {'last':>7} {'floor':>7}")
for name, d in rows:
    pa, pr = d["peak_allocated"], d["peak_reserved"]
    print(f"{name:<20} {d['ms_per_step']:>9.2f} {d['tokens_per_s']:>9} {pa/2**20:>10.1f}Mi {pr/2**20:>10.1f}Mi "
          f"{pr/pa:>9.3f} {d['first_loss']:>7.4f} {d['last_loss']:>7.4f} {d['entropy_floor']:>7.4f}")
by = dict(rows)
for size in ["default", "big", "sdpa", "big_sdpa", "tf32", "bf16", "big_bf16"]:
    t, g = by.get("torch_" + size), by.get("gpt_" + size)
    if t and g:
        print(f"{size}: step time gpuscope/pytorch {g['ms_per_step']/t['ms_per_step']:.3f}; "
              f"peak allocated {g['peak_allocated']/t['peak_allocated']:.3f}; "
              f"last loss difference {g['last_loss']-t['last_loss']:+.4f}")
    c = by.get("gpt_" + size + "_ckpt")
    if g and c:
        print(f"{size} --checkpoint: peak allocated {c['peak_allocated']/g['peak_allocated']:.3f} of the plain run, "
              f"step time {c['ms_per_step']/g['ms_per_step']:.3f}x")
for f in sorted(glob.glob(os.path.join(out, "gpt_ab.txt"))):
    for line in open(f):
        if "tracking A/B" in line:
            print(line.strip())
tests = os.path.join(out, "tests.txt")
if os.path.exists(tests):
    text = open(tests).read()
    passed = sum(int(m) for m in re.findall(r"test result: \w+\. (\d+) passed", text))
    failed = sum(int(m) for m in re.findall(r"(\d+) failed", text))
    print(f"tests: {passed} passed, {failed} failed, {text.count('skipped:')} skipped; "
          f"{len(re.findall('panicked', text))} panics")
    for line in text.splitlines():
        if "FAILED" in line or "panicked" in line:
            print("  " + line)
for f in sorted(glob.glob(os.path.join(out, "sanitizer_*.txt"))):
    text = open(f).read()
    sums = re.findall(r"ERROR SUMMARY: (\d+) error", text)
    exits = re.findall(r"^exit (\d+)", text, re.M)
    print(f"{os.path.basename(f)}: {len(sums)} runs, errors {sum(int(s) for s in sums)}, exit codes {' '.join(exits)}")
for name in ["gpt_leaks.err", "gpt_oom.err", "gpt_fit.err"]:
    p = os.path.join(out, name)
    if os.path.exists(p):
        lines = [l for l in open(p).read().splitlines() if l.strip()]
        print(f"{name}: " + " | ".join(lines[-3:])[:600])
