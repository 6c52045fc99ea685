import random
def select(v, K):
    SH=[21,10,0]; DG=[2047,2047,1023]
    prefix=mask=above=total=0; remaining=K; whole=False
    for p in range(3):
        hist=[0]*2048
        for x in v:
            if x!=0 and (x&mask)==prefix: hist[(x>>SH[p])&DG[p]]+=1
        if p==0: total=sum(hist)
        if total<=K: break
        excl=0; found=None
        for b in range(2047,-1,-1):
            if excl<remaining and excl+hist[b]>=remaining:
                found=(b,excl,excl+hist[b]==remaining); break
            excl+=hist[b]
        b,before,full=found
        remaining-=before; above+=before; prefix|=b<<SH[p]; mask|=DG[p]<<SH[p]
        if full and prefix!=0: whole=True; break
    kth=0 if total<=K else (prefix-1 if whole else prefix)
    ties=K-above if (kth and not whole) else 0
    tie=kth if (kth!=0 and not whole) else 0xffffffff
    out=[]; tb=0
    for i,x in enumerate(v):
        if x>kth or (x==tie and tb<ties): out.append(i)
        tb+= x==tie
    return out, whole
def ref(v,K):
    idx=[i for i,x in enumerate(v) if x!=0]
    idx.sort(key=lambda i:(-v[i],i))
    return sorted(idx[:K])
random.seed(1); nwhole=0; N=0
for trial in range(300):
    n=random.choice([100,2048,3000,8192,16384])
    K=random.choice([2048,64,1000])
    mode=trial%4
    if mode==0: v=[random.getrandbits(32) for _ in range(n)]
    elif mode==1: v=[0x80000000|random.randrange(0x3f000000,0x41000000) for _ in range(n)]
    elif mode==2: v=[random.choice([0,1,5,0x80000000,0x80000000|random.getrandbits(12)]) for _ in range(n)]
    else: v=[0x80000000|(random.randrange(0x3f000000,0x40000000)&~0xff) for _ in range(n)]
    o,w=select(v,K); r=ref(v,K)
    assert o==r,(trial,mode,n,K)
    nwhole+=w; N+=1
print("ok",N,"whole",nwhole)
