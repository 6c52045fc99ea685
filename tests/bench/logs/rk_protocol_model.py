"""A model of the barrier protocol of attend_rk_register_keys_d16fe0a.patch (16 heads, fp8: raw
stages filled by bulk copies, a bf16 V tile written by the producers, two consumer groups on
alternate tiles), for random interleavings and copies landing in any order: mbarriers as counts
and completed phases, waits by parity as the hardware does them. It asserts that every consumer
and producer read sees the tile it expects, that the V tile is not rewritten while read, and that
nothing deadlocks, for 1-39 tiles x 300 seeds. With one vfull/vempty pair shared by both groups
(the version that hung on the GPU) it fails at once. Run: python3 rk_protocol_model.py"""
import random
NST=3; LAG=NST-1
class Bar:
    def __init__(s,count): s.count=count; s.pending=count; s.c=0; s.tx=0
    def arrive(s,n=1,tx=0):
        s.pending-=n; s.tx+=tx; s.check()
    def complete_tx(s,b): s.tx-=b; s.check()
    def check(s):
        assert s.pending>=0
        if s.pending==0 and s.tx==0: s.c+=1; s.pending=s.count
    def ok(s,par): return s.c%2!=par
def run(tiles, seed):
    rnd=random.Random(seed)
    full=[Bar(1) for _ in range(NST)]; empty=[Bar(2) for _ in range(NST)]
    vfull=[[Bar(1),Bar(1)] for _ in range(2)]; vempty=[[Bar(1),Bar(1)] for _ in range(2)]
    stage_tile=[None]*NST; vtile=[None,None]; copies=[]; reading=[0,0]  # pending async copies (st, tile)
    landed={}
    def producer():
        for t in range(tiles+LAG):
            if t<tiles:
                u=t; st=u%NST
                if u>=NST:
                    while not empty[st].ok((u//NST-1)%2): yield
                full[st].arrive(1,tx=1)
                copies.append((st,u))
            if t>=LAG:
                u=t-LAG; st=u%NST
                while not full[st].ok((u//NST)%2): yield
                assert stage_tile[st]==u, ('prod reads stage',st,stage_tile[st],u)
                for hf in range(2):
                    if u>=1:
                        while not vempty[(u+1)%2][hf].ok(((u-1)//2)%2): yield
                    assert reading[hf]==0, 'overwrite'
                    vtile[hf]=u
                    vfull[u%2][hf].arrive()
                    yield
                empty[st].arrive()
            yield
    def consumer(wg):
        for u in range(tiles):
            if u%2!=wg: continue
            st=u%NST
            while not full[st].ok((u//NST)%2): yield
            assert stage_tile[st]==u, ('cons reads stage',wg,st,stage_tile[st],u)
            yield
            empty[st].arrive()
            yield
            for hf in range(2):
                while not vfull[wg][hf].ok((u//2)%2): yield
            assert vtile[0]==u and vtile[1]==u, ('V',wg,vtile,u)
            reading[0]+=1; reading[1]+=1
            yield
            assert vtile[0]==u and vtile[1]==u, ('V2',wg,vtile,u)
            reading[0]-=1; reading[1]-=1
            for hf in range(2): vempty[wg][hf].arrive()
            yield
    agents=[producer(),consumer(0),consumer(1)]; alive=[True]*3; steps=0
    while any(alive):
        steps+=1; assert steps<200000,'deadlock'
        # maybe land a copy
        if copies and rnd.random()<0.3:
            st,u=copies.pop(rnd.randrange(len(copies)))
            stage_tile[st]=u; full[st].complete_tx(1)
        i=rnd.randrange(3)
        if alive[i]:
            try: next(agents[i])
            except StopIteration: alive[i]=False
        if not any(alive) and copies: raise AssertionError('copies left')
for tiles in range(1,40):
    for seed in range(300): run(tiles,seed)
print('ok')
