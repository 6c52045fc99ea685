# tests/bench/logs/index_topk_gather_staged_58772b8.patch, its gathered-path read modelled (warps, lists,
# drains, the shared atomic) against a brute-force classification; run: python3 THIS (prints ok N).
# Model of the staged gather (warp lists, drains) against a brute-force classification.
import random
def run(keys, lo, hi, prefix, mask, long_chunk, Threads, STAGE=512):
    span = (~mask) & 0xffffffff
    bin_top = (prefix | span) if long_chunk else 0xffffffff
    low = prefix if prefix else 1
    W = Threads // 32
    lists = [[None]*STAGE for _ in range(W)]
    fill = [0]*W
    mine_up = [0, 0]  # cands count, up count (kept separately; packing checked by bounds)
    cands = {}; up = {}
    events = []  # (warp, action) processed in random interleaving per step
    def key(i): return keys[i] if lo <= i < hi else 0
    def drain(w):
        L = lists[w]
        for t in range(0, fill[w], 32):
            cm = []; um = []
            for lane in range(32):
                k = t + lane
                if k < fill[w]:
                    i = lo + L[k]; v = keys[i]
                else:
                    i = lo; v = 0
                c = v != 0 and ((v - prefix) & 0xffffffff) <= span
                a = v > bin_top
                cm.append((c, v, i)); um.append((a, i))
            nc = sum(1 for c, _, _ in cm if c); nu = sum(1 for a, _ in um if a)
            atc, atu = mine_up[0], mine_up[1]
            mine_up[0] += nc; mine_up[1] += nu
            r = 0
            for c, v, i in cm:
                if c:
                    assert atc + r not in cands; cands[atc + r] = (v, i); r += 1
            r = 0
            for a, i in um:
                if a:
                    assert atu + r not in up; up[atu + r] = i; r += 1
        fill[w] = 0
    step = Threads * 8
    b = lo
    while b < hi:
        order = list(range(W)); random.shuffle(order)
        for w in order:
            hbs = []
            for lane in range(32):
                tid = w * 32 + lane
                hb = 0
                for j in range(2):
                    for e in range(4):
                        i = b + (j * Threads + tid) * 4 + e
                        if key(i) >= low:
                            hb |= 1 << (4 * j + e)
                hbs.append(hb)
            if not any(hbs): continue
            cnt = [bin(h).count('1') for h in hbs]
            total = sum(cnt)
            assert total <= STAGE
            if fill[w] + total > STAGE: drain(w)
            k = fill[w]
            for lane in range(32):
                tid = w * 32 + lane
                first = (b - lo) + 4 * tid
                h = hbs[lane]
                while h:
                    e = (h & -h).bit_length() - 1
                    lists[w][k] = first + (e // 4) * (4 * Threads) + e % 4; k += 1
                    h &= h - 1
            fill[w] += total
        b += step
    order = list(range(W)); random.shuffle(order)
    for w in order: drain(w)
    return cands, up, mine_up
def brute(keys, lo, hi, prefix, mask, long_chunk):
    span = (~mask) & 0xffffffff
    bin_top = (prefix | span) if long_chunk else 0xffffffff
    C = sorted((keys[i], i) for i in range(lo, hi) if keys[i] != 0 and (keys[i] & mask) == prefix)
    U = sorted(i for i in range(lo, hi) if keys[i] > bin_top)
    return C, U
random.seed(7)
n_ok = 0
for trial in range(3000):
    RB = random.choice([8, 10, 11, 12]); mask = ((1 << RB) - 1) << (32 - RB)
    Threads = random.choice([32, 64, 128])
    n = random.randint(1, 6000)
    kind = random.choice(['rand', 'narrow', 'nan', 'zeros', 'allone', 'edge'])
    if kind == 'rand': keys = [random.getrandbits(32) for _ in range(n)]
    elif kind == 'narrow': base = random.getrandbits(32); keys = [(base + random.randint(-50000000, 50000000)) & 0xffffffff for _ in range(n)]
    elif kind == 'nan': keys = [random.choice([0, 1, 1, 1, random.getrandbits(32)]) for _ in range(n)]
    elif kind == 'zeros': keys = [random.choice([0, random.getrandbits(32)]) for _ in range(n)]
    elif kind == 'allone': v = random.getrandbits(32); keys = [v] * n
    else: keys = []
    lo = random.randrange(0, n, 4) if n > 4 else 0
    hi = random.randint(lo, n)
    nz = [k for k in keys[lo:hi] if k]
    if kind == 'edge' or not nz:
        keys = [random.getrandbits(32) for _ in range(n)]; nz = [k for k in keys[lo:hi] if k] or [5]
    if kind == 'nan' and random.random() < 0.5: prefix = 0
    else: prefix = random.choice(nz) & mask
    if kind == 'edge':
        for t in range(lo, hi):
            keys[t] = random.choice([prefix, (prefix - 1) & 0xffffffff, prefix | ((~mask) & 0xffffffff), (prefix | ((~mask) & 0xffffffff)) + 1 & 0xffffffff, 0, 1])
    long_chunk = random.random() < 0.5
    cands, up, mu = run(keys, lo, hi, prefix, mask, long_chunk, Threads)
    C, U = brute(keys, lo, hi, prefix, mask, long_chunk)
    assert sorted(cands.keys()) == list(range(len(C))), (trial, 'cands places')
    assert sorted(up.keys()) == list(range(len(U))), (trial, 'up places')
    assert sorted(cands.values()) == C, (trial, 'cands set')
    assert sorted(up.values()) == U, (trial, 'up set')
    if not long_chunk: assert not up
    n_ok += 1
print("ok", n_ok)
