import os
import sys; sys.path.insert(0,os.path.dirname(os.path.abspath(__file__)))
from growvar import *
PTbest={"bert_infer":602,"gan_two_models_train":366,"gpt2_train":7708,"gpt_checkpoint_train":2450,"gpt_generate_kvcache":624,"gpt_train_varlen":8590,"lstm_train":2324,"prefetch_train":1588,"resnet18_infer_varbatch":750,"resnet50_amp_train":1806,"side_stream_loader_train":1886,"unet_bf16_train":1136}
def ev2(name, smallf, largef):
    Arena.grow=make(smallf,largef)
    tot=0; worst=0; metR=0; metA=0; out=[]
    for f in PATHS:
        n=stem(f)
        r=run(f,bestfit); assert r[0]==r[1]
        d=r[-1][0]-base[n][0]; tot+=d; worst=max(worst,d)
        metR+= r[-1][0]<=PTbest[n]; metA+= r[-1][1]<=PT[n]
        out.append(f"{n[:8]}:{d:+.0f}/{r[-1][1]}")
    print(f"{name:40s} tot {tot:+5.0f} worst {worst:+4.0f} metR {metR} metA {metA} |", " ".join(out), flush=True)
S0=lambda m: min(max(m//2,2*MIB),8*MIB)
if __name__ == "__main__":
  for k in [0, 256, 128, 96, 64, 48, 32]:
    for sname, sf in [("S0",S0)]:
      ev2(f"L=max(20,m/{k}) {sname}", sf, (lambda k: (lambda m: max(20*MIB, m//k if k else 0)))(k))
