import os
import sys, bisect, collections
MIB=1<<20; PAGE=2*MIB
# The stream of a free completed after other streams' work (record_stream): any.
SHARED='*'
# The growth policy. GROWTH=pages (the default, commit after 1b1ac4b): what is missing in
# whole 20 MiB (large pool) or 2 MiB (small pool) pages, and in a run of large growths at
# least 5/4 of the last, up to 1/RUN_DIV of the arena (growth::growth_size). GROWTH=steps:
# the policy before it (at least 20 MiB or 1/LARGE_DIV of the arena, 5/4 of the last
# step in a run up to 1/8; small pool half what it maps, 2-8 MiB), with its settings below.
GROWTH=os.environ.get('GROWTH', 'pages')
RUN_DIV=int(os.environ.get('RUN_DIV', 16))
# Not the allocator's policy (tried in the eleventh session): RUN_CAP=K caps a run's step
# at K times what is missing; RUN_SHORT=K takes the run's step only where what is missing
# is at most 1/K of it (a growth for a large request then maps only what is missing).
RUN_CAP=int(os.environ.get('RUN_CAP', 0))
RUN_SHORT=int(os.environ.get('RUN_SHORT', 0))
# GROWTH=steps only: vmm::LARGE_GROWTH_DIVISOR (commit d8054fc); a large value models the
# step before it
LARGE_DIV=int(os.environ.get('LARGE_DIV', 128))
# GROWTH=steps only: runs of growths (commit after bf5947d); RUNS=0 models the policy
# before them
RUNS=os.environ.get('RUNS', '1')!='0'
# Not the allocator's policy (BENCHMARKS.md, "Small requests in the large pool's holes"):
# with SPILL_MIB=N, a small request that no small hole fits takes the best-fitting hole
# of the large pool if it is under N MiB (SPILL_MIB=inf: any hole) before the small
# wilderness. Unset, the allocator's policy.
SPILL=(1<<62 if os.environ.get('SPILL_MIB')=='inf' else int(os.environ.get('SPILL_MIB','0'))*MIB)
# Not the allocator's policy either: two rules once taken for PyTorch's expandable
# segments (BENCHMARKS.md, "All 74 traces ..."; they are not: "PyTorch's pages").
# PT_NOSPLIT=1: a large-pool hole is taken whole when what would be left is 1 MiB or
# less; PT_WILDCAND=1: the free top of the arena is an ordinary hole for best fit, not
# the last resort.
PT_NOSPLIT=os.environ.get('PT_NOSPLIT')=='1'
# SHARE=1: one arena per pool for every stream (the allocator's
# `share_across_streams:True`; in a replay every stream is idle when asked, so every free
# serves every stream: crossstream.py's `eager`). Unset or 0: an arena per (stream,
# pool), the allocator's default.
SHARE=os.environ.get('SHARE','0')!='0'
PT_WILDCAND=os.environ.get('PT_WILDCAND')=='1'
# Chunks: a growth larger than CHUNK_MIB is that many device allocations
# (growth::chunk_limit: 1/160 of the 80 GiB device in whole 20 MiB pages, 500 MiB).
# CHUNK_MIB=0: one per growth, the policy before it. Placement does not change.
CHUNK=int(os.environ.get('CHUNK_MIB', 500))*MIB
def r512(s): return max(512,(s+511)//512*512)

def spill(small, large, r):
    """The address of the hole of `large` (under SPILL) that takes a small request
    `small` has no hole for (taken and split), or None."""
    if SPILL==0 or large is None or any(a!=small.wild() and sz>=r for a,sz in small.free_blocks()):
        return None
    w=large.wild()
    cands=[(sz,a) for a,sz in large.free_blocks() if a!=w and r<=sz<SPILL]
    if not cands: return None
    return large.take(min(cands)[1], r)

class Arena:
    def __init__(s, small, pol):
        s.small=small; s.pol=pol
        s.blocks={}  # addr -> [size, free]
        s.addrs=[]   # sorted addrs
        s.top=0; s.mapped=0; s.grows=0; s.peak=0
        s.run=None   # the last large step, while nothing has been freed since
    def free_blocks(s):
        return [(a,b[0]) for a,b in s.blocks.items() if b[1]]
    def wild(s):
        if not s.addrs: return None
        a=s.addrs[-1]; b=s.blocks[a]
        return a if b[1] and a+b[0]==s.top else None
    def pages(s, short):
        """What a growth maps when the free top is `short` bytes too small
        (growth::growth_size); notes a large growth as the run's."""
        q=2*MIB if s.small else 20*MIB
        size=-(-short//q)*q
        if not s.small:
            if s.run is not None:
                step=min(s.run+s.run//4, s.mapped//RUN_DIV)
                if RUN_CAP: step=min(step, RUN_CAP*short)
                if not RUN_SHORT or short*RUN_SHORT<=step:
                    size=max(size, -(-step//q)*q)
            s.run=size
        return size
    def min_step(s):
        """The least a growth adds (vmm::min_growth); notes a large step as the run's."""
        if s.small: return min(max(s.mapped//2,2*MIB),8*MIB)
        ming=max(20*MIB, s.mapped//LARGE_DIV)
        if RUNS and s.run is not None:
            # a run of growths (nothing freed since the last): 5/4 of the last step,
            # up to 1/8 of the arena (vmm::min_growth)
            ming=max(ming, min(s.run+s.run//4, s.mapped//8))
        s.run=ming
        return ming
    def grow(s, need_total):
        w=s.wild(); have=s.blocks[w][0] if w is not None else 0
        if GROWTH=='pages':
            size=s.pages(need_total-have)
        else:
            need=-(-(need_total-have)//PAGE)*PAGE
            size=-(-max(need,s.min_step())//PAGE)*PAGE
        s.grows+=-(-size//CHUNK) if CHUNK else 1; s.last_growth=size
        if w is not None: s.blocks[w][0]+=size
        else:
            s.blocks[s.top]=[size,True]; bisect.insort(s.addrs,s.top)
        s.top+=size; s.mapped+=size; s.peak=max(s.peak,s.mapped)
    def take(s, a, r, end='low'):
        """Allocates `r` bytes of the free block at `a`, split off its low or high end."""
        sz=s.blocks[a][0]
        if PT_NOSPLIT and not s.small and sz-r<=MIB and a!=s.wild():
            s.blocks[a][1]=False; return a
        if sz-r>=512:
            if end=='low':
                s.blocks[a]=[r,False]; s.blocks[a+r]=[sz-r,True]; bisect.insort(s.addrs,a+r); return a
            s.blocks[a]=[sz-r,True]; s.blocks[a+sz-r]=[r,False]; bisect.insort(s.addrs,a+sz-r); return a+sz-r
        s.blocks[a][1]=False; return a
    def alloc(s, r):
        w=s.wild()
        cands=[(sz,a) for a,sz in s.free_blocks() if (a!=w or PT_WILDCAND) and sz>=r]
        choice=s.pol(s, r, cands, w)
        if choice is None:
            if w is None or s.blocks[w][0]<r: s.grow(r); w=s.wild()
            choice=(w,'low')
        return s.take(choice[0], r, choice[1])
    def free(s, a):
        s.run=None
        s.blocks[a][1]=True
        i=bisect.bisect_left(s.addrs,a)
        # merge next
        if i+1<len(s.addrs):
            n=s.addrs[i+1]
            if s.blocks[n][1]:
                s.blocks[a][0]+=s.blocks[n][0]; del s.blocks[n]; s.addrs.pop(i+1)
        if i>0:
            p=s.addrs[i-1]
            if s.blocks[p][1]:
                s.blocks[p][0]+=s.blocks[a][0]; del s.blocks[a]; s.addrs.pop(i)

def bestfit(s, r, cands, w):
    if not cands: return None
    sz,a=min(cands); return (a,'low')

def trace_paths():
    """The traces to replay: TRACES=GLOB, else every trace of tests/data/traces, plain
    (NAME.csv) or compressed (NAME.csv.gz)."""
    import glob
    return sorted(glob.glob(os.environ.get("TRACES", "tests/data/traces/*.csv*")))

def stem(path):
    """A trace's name without its folder and `.csv` or `.csv.gz`."""
    return os.path.basename(path).split(".csv")[0]

def json_beside(path):
    """PyTorch's figures recorded beside the trace at `path` (NAME.json)."""
    for ext in (".csv.gz", ".csv"):
        if path.endswith(ext):
            return path[:-len(ext)] + ".json"
    return path + ".json"

def read_text(path):
    """The text of the trace at `path`, plain or gzip-compressed (NAME.csv.gz)."""
    if path.endswith(".gz"):
        import gzip
        with gzip.open(path, "rt") as f:
            return f.read()
    with open(path) as f:
        return f.read()

def replay(path, allocate, totals, passes=2, free=None, deferred=None):
    """Replays the trace at `path` `passes` times: `allocate(stream, rounded)` places a
    request and returns (arena, address); frees after `record_stream` complete at the
    next allocation; what the trace leaves live is freed at the end of a pass. Returns
    `totals()` after each pass. Hooks, for other designs: `free(arena, addr, stream)`
    frees (`stream`: the one that allocated, or SHARED for a free completed at the next
    allocation; default `arena.free(addr)`), and `deferred(arena, addr)` says whether a
    plain free also waits for the next allocation (default: none does)."""
    free=free or (lambda A,a,st: A.free(a))
    deferred=deferred or (lambda A,a: False)
    ops=[l.split(",") for l in read_text(path).splitlines()[1:]]
    res=[]
    for p in range(passes):
        live={}; pending=[]
        for op,i,sz,st in ops:
            if op=='a':
                for A,a in pending: free(A,a,SHARED)
                pending=[]
                live[i]=[*allocate(st, r512(int(sz))), False, st]
            elif op=='r':
                live[i][2]=True
            else:
                A,a,rec,ast=live.pop(i)
                if rec or deferred(A,a): pending.append((A,a))
                else: free(A,a,ast)
        for A,a in pending: free(A,a,SHARED)
        for A,a,_,ast in live.values(): free(A,a,ast)
        res.append(totals())
    return res

def peaks_and_growths(arenas):
    """(peak reserved MiB, growths) of `arenas`, summed."""
    return lambda: (sum(A.peak for A in arenas)/MIB, sum(A.grows for A in arenas))

def run(path, pol, passes=2):
    arenas={}
    def allocate(st, r):
        st=SHARED if SHARE else st
        k=(st, r<=MIB)
        if k not in arenas: arenas[k]=Arena(r<=MIB,pol)
        A=arenas[k]
        a=spill(A, arenas.get((st,False)), r) if A.small else None
        if a is not None: return arenas[(st,False)], a
        return A, A.alloc(r)
    return replay(path, allocate, peaks_and_growths(arenas.values()), passes)

if __name__=="__main__":
    import glob, os
    pol=globals()[sys.argv[1]] if len(sys.argv)>1 else bestfit
    tot=0
    for f in trace_paths():
        r=run(f,pol)
        tot+=r[-1][0]
        print(os.path.basename(f), r)
    print("total",tot)

def run_banded(path, bandf, pol=bestfit, passes=2):
    arenas={}
    def allocate(st, r):
        k=(st,)+tuple(bandf(r))
        if k not in arenas: arenas[k]=Arena(r<=MIB,pol)
        return arenas[k], arenas[k].alloc(r)
    return replay(path, allocate, peaks_and_growths(arenas.values()), passes)
