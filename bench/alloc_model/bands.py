import sys, os
sys.path.insert(0,os.path.dirname(os.path.abspath(__file__)))
from sim import *
from pols import base
def band_log2(T):
    return lambda r: ('s',) if r<=MIB else (('L',) if r<T else ('B', r.bit_length()))
def band_two(T):
    return lambda r: ('s',) if r<=MIB else (('L',) if r<T else ('B',))
def band_log4(T):
    return lambda r: ('s',) if r<=MIB else (('L',) if r<T else ('B', r.bit_length()//2))
def evaluate(name,bf):
    tot=0; out=[]
    for f in trace_paths():
        n=stem(f)
        r=run_banded(f,bf)
        assert r[0]==r[1], (n, r)
        tot+=r[-1][0]-base[n][0]
        out.append(f"{n[:12]}:{r[-1][0]-base[n][0]:+.0f}/{r[-1][1]-base[n][1]:+d}")
    print(name, f"total {tot:+.0f}", " ".join(out), flush=True)
for spec in sys.argv[1:]:
    evaluate(spec, eval(spec))
