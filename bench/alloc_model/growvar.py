import os
import sys; sys.path.insert(0,os.path.dirname(os.path.abspath(__file__)))
import sim
from sim import *
MIB=1<<20
PT={"bert_infer":28,"gan_two_models_train":24,"gpt2_train":137,"gpt_checkpoint_train":44,"gpt_generate_kvcache":24,"gpt_train_varlen":162,"lstm_train":19,"prefetch_train":23,"resnet18_infer_varbatch":12,"resnet50_amp_train":106,"side_stream_loader_train":24,"unet_bf16_train":44}
def stem(f):
    return os.path.basename(f).split('.csv')[0]
# The experiments of this file, grid.py and tagsim.py were run on the first twelve traces
# (the tables above); other traces are left out.
PATHS=[f for f in trace_paths() if stem(f) in PT]
base={}
for f in PATHS:
    base[stem(f)]=run(f,bestfit)[-1]
def make(smallf, largef):
    def grow(s, need_total):
        w=s.wild(); have=s.blocks[w][0] if w is not None else 0
        need=-(-(need_total-have)//PAGE)*PAGE
        ming=smallf(s.mapped) if s.small else largef(s.mapped)
        size=-(-max(need,ming)//PAGE)*PAGE
        s.grows+=1
        if w is not None: s.blocks[w][0]+=size
        else:
            s.blocks[s.top]=[size,True]; bisect.insort(s.addrs,s.top)
        s.top+=size; s.mapped+=size; s.peak=max(s.peak,s.mapped)
    return grow
def ev(name, smallf, largef=lambda m:20*MIB):
    Arena.grow=make(smallf,largef)
    tot=0; out=[]
    for f in PATHS:
        n=stem(f)
        r=run(f,bestfit); assert r[0]==r[1]
        tot+=r[-1][0]-base[n][0]
        flag="!" if r[-1][1]>PT[n] else ""
        out.append(f"{n[:10]}:{r[-1][0]-base[n][0]:+.0f}/{r[-1][1]-base[n][1]:+d}{flag}")
    print(name, f"total {tot:+.0f}", " ".join(out), flush=True)
if __name__ == "__main__":
    for spec in sys.argv[1:]:
        ev(spec, *eval(spec))
