# Summarises an ncu source-page CSV (profile_index.sh ... sass KERNEL) per block of SASS instructions:
# usage: python3 ncu_sass_blocks.py FILE.csv [BLOCK]
import csv,sys
f=sys.argv[1]
lines=open(f).read().splitlines()
i=[k for k,l in enumerate(lines) if l.startswith('"Address"')][0]
r=list(csv.reader(lines[i:]))
h=r[0]; rows=r[1:]
A=h.index("Address");S=h.index("Source");W=h.index("Warp Stall Sampling (All Samples)");E=h.index("Instructions Executed")
def num(x):
  try: return float(x.replace(',',''))
  except: return 0.0
rows=[(k,x[S],num(x[W]),num(x[E])) for k,x in enumerate(rows)]
ts=sum(x[2] for x in rows); te=sum(x[3] for x in rows)
print("instr",len(rows),"samples",ts,"exec",te)
# blocks of 32
B=int(sys.argv[2]) if len(sys.argv)>2 else 32
for b in range(0,len(rows),B):
  blk=rows[b:b+B]; s=sum(x[2] for x in blk); e=sum(x[3] for x in blk)
  if s/ts>0.01 or e/te>0.01:
    key=[x[1] for x in blk if any(t in x[1] for t in ("BAR","ATOM","LDG","LDS","STS","RED","SHFL","VOTE","MATCH","POPC","STG","NANOSLEEP","LD.","MEMBAR","FENCE"))]
    print(f"{b:5d} samp {100*s/ts:5.1f}% exec {100*e/te:5.1f}% | {blk[0][1][:40]} | {'; '.join(sorted(set(k.split()[0] if not k.startswith('@') else k.split()[1] for k in key)))}")
