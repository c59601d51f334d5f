import os
import sys; sys.path.insert(0,os.path.dirname(os.path.abspath(__file__)))
import sim
from sim import *
from grid import PTbest, PT, base, PATHS, stem
# tag tracking: s.tags[addr] for free blocks
def alloc(s, r):
    if not hasattr(s,'tags'): s.tags={}
    w=s.wild()
    cands=[(sz,a) for a,sz in s.free_blocks() if a!=w and sz>=r]
    choice=s.pol(s, r, cands, w)
    if choice is None:
        if w is None or s.blocks[w][0]<r: s.grow(r); w=s.wild()
        choice=w
    a=choice; sz=s.blocks[a][0]; t=s.tags.pop(a,0)
    if sz-r>=512:
        s.blocks[a]=[r,False]; s.blocks[a+r]=[sz-r,True]; bisect.insort(s.addrs,a+r); s.tags[a+r]=t
        return a
    s.blocks[a][1]=False; return a
def free(s, a):
    if not hasattr(s,'tags'): s.tags={}
    s.blocks[a][1]=True; s.tags[a]=s.blocks[a][0]
    i=bisect.bisect_left(s.addrs,a)
    if i+1<len(s.addrs):
        n=s.addrs[i+1]
        if s.blocks[n][1]:
            s.blocks[a][0]+=s.blocks[n][0]; del s.blocks[n]; s.addrs.pop(i+1); s.tags[a]=max(s.tags[a],s.tags.pop(n,0))
    if i>0:
        p=s.addrs[i-1]
        if s.blocks[p][1]:
            s.blocks[p][0]+=s.blocks[a][0]; del s.blocks[a]; s.addrs.pop(i); s.tags[p]=max(s.tags.get(p,0),s.tags.pop(a,0))
Arena.alloc=alloc; Arena.free=free
def pref(k, fallback_hole):
    def p(s,r,c,w):
        good=[x for x in c if s.tags.get(x[1],0) < k*r]
        if good: return min(good)[1]
        if c and fallback_hole: return min(c)[1]
        return None
    return p
def bf(s,r,c,w): return min(c)[1] if c else None
def ev(name,pol):
    tot=0; worst=0; metR=0; out=[]
    for f in PATHS:
        n=stem(f)
        r=run(f,pol)
        if r[0]!=r[1]: out.append("UNSTABLE")
        d=r[-1][0]-base[n][0]; tot+=d; worst=max(worst,d); metR+=r[-1][0]<=PTbest[n]
        out.append(f"{n[:8]}:{d:+.0f}/{r[-1][1]}")
    print(f"{name:24s} tot {tot:+5.0f} worst {worst:+4.0f} metR {metR} |", " ".join(out), flush=True)
ev("bf",bf)
for k in [2,4,16]:
    ev(f"pref{k} hole",pref(k,True)); ev(f"pref{k} wild",pref(k,False))
