import sys, os
sys.path.insert(0,os.path.dirname(os.path.abspath(__file__)))
from sim import *
MIB=1<<20
def mk_twoend(T):
    def p(s,r,c,w):
        if not c: return None
        sz,a=min(c)
        return (a,'high' if r>=T else 'low')
    return p
def mk_twoend_rel(frac):
    def p(s,r,c,w):
        if not c: return None
        sz,a=min(c)
        return (a,'high' if r>=s.mapped*frac else 'low')
    return p
def mk_hugewild(T, slack):
    # huge requests take a hole only if near exact
    def p(s,r,c,w):
        if not c: return None
        sz,a=min(c)
        if r>=T and sz-r > r*slack: return None
        return (a,'low')
    return p
def mk_nosplitbig(T):
    # small requests (<T) don't split holes >=T: prefer wilderness if wilderness fits w/o growth else hole
    def p(s,r,c,w):
        if not c: return None
        small=[x for x in c if x[0]<T or r>=T]
        if small: return (min(small)[1],'low')
        if w is not None and s.blocks[w][0]>=r: return None
        return (min(c)[1],'low')
    return p
def mk_nosplitbig_strict(T):
    def p(s,r,c,w):
        small=[x for x in c if x[0]<T or r>=T]
        if small: return (min(small)[1],'low')
        return None
    return p
base={}
for f in trace_paths():
    base[stem(f)]=run(f,bestfit)[-1]
def evaluate(name,pol):
    tot=0; worse=[]; out=[]
    for f in trace_paths():
        n=stem(f)
        r=run(f,pol)
        assert r[0]==r[1], (n, r)
        tot+=r[-1][0]-base[n][0]
        out.append(f"{n[:12]}:{r[-1][0]-base[n][0]:+.0f}/{r[-1][1]-base[n][1]:+d}")
    print(name, f"total {tot:+.0f}", " ".join(out), flush=True)
if __name__=="__main__":
    for spec in sys.argv[1:]:
        evaluate(spec, eval(spec))
