"""A model of the dynamic-tiles protocol of logs/index_score_dynamic_tiles_426520b.patch (score_rows_wgmma):
G CTAs of T threads each; thread 0 also produces (claims runs from a row counter, fills a ring of S slots
with a tile or the end, -1); every thread fetches slots in order (waits on the slot's full barrier, reads
its tile, arrives on its empty barrier unless it is the end), scores the tile, and leaves at the end;
the last CTA to count itself done zeroes the counters. Copies land after random delays; threads run in a
random interleaving. Checks, over many random shapes and seeds: every tile below `tiles` scored exactly
once by each thread of one CTA, no tile at or past it, every thread ends (no hang), and the counters are
zero after the launch, so two launches in a row work. python3 dyn_tiles_model.py [trials]"""
import random
import sys


def run(tiles, G, RUN, S, T, rng, state):
    ctr = state  # [claims, done]
    copies = []  # (cta, slot, bytes) in flight
    scored = {}
    ctas = []
    for y in range(G):
        c = dict(y=y, full=[None] * S, empty=[None] * S, tile=[None] * S, fullc=[0] * S, emptyc=[0] * S,
                 fullpend=[1] * S, fulltx=[0] * S, emptypend=[T] * S)
        ctas.append(c)

    def claim():
        v = ctr[0]
        ctr[0] += 1
        return G + v

    def full_arrive(c, s, tx):
        c['fulltx'][s] += tx
        c['fullpend'][s] -= 1
        check_full(c, s)

    def check_full(c, s):
        if c['fullpend'][s] == 0 and c['fulltx'][s] == 0:
            c['fullc'][s] += 1
            c['fullpend'][s] = 1

    def empty_arrive(c, s):
        c['emptypend'][s] -= 1
        if c['emptypend'][s] == 0:
            c['emptyc'][s] += 1
            c['emptypend'][s] = T

    def thread(c, tid):
        y = c['y']
        if y * RUN >= tiles:  # no tile
            if tid == 0:
                ctr[1] += 1
                if ctr[1] == G:
                    ctr[0] = ctr[1] = 0
            return
        st = dict(tile=y * RUN, k=0, pending=0)
        ended = [False]

        def advance(cur):
            cur['k'] += 1
            if cur['k'] == RUN:
                cur['k'] = 0
                cur['tile'] = st['pending'] * RUN
                if cur['tile'] < tiles:
                    st['pending'] = claim()
            else:
                cur['tile'] += 1

        def issue(s, tile):
            c['tile'][s] = tile
            full_arrive(c, s, 100)
            copies.append((c, s, 100))

        def issue_end(s):
            c['tile'][s] = -1
            full_arrive(c, s, 0)

        fill = dict(tile=y * RUN, k=0)
        if tid == 0:
            st['pending'] = claim()
            cur = dict(fill)
            first = []
            for s in range(S + 1):
                if s < S:
                    first.append(cur['tile'])
                if s < S:
                    advance(cur)
            fill = cur
            for s in range(S):
                if not ended[0] and first[s] < tiles:
                    issue(s, first[s])
                elif not ended[0]:
                    issue_end(s)
                    ended[0] = True
            c['init'] = True
        else:
            while not c.get('init'):
                yield
        s, parity_n = 0, [0] * S  # completed phases this thread has waited for, per slot

        def fetch(s):
            while c['fullc'][s] <= parity_n[s]:
                yield
            parity_n[s] += 1
            t = c['tile'][s]
            if t >= 0:
                empty_arrive(c, s)
            return t

        t = yield from fetch(0)
        empty_waits = [0] * S
        while t >= 0:
            assert t < tiles, "a tile past the row"
            key = (c['y'], tid, t)
            assert key not in scored, "a tile scored twice by one thread"
            scored[key] = 1
            if tid == 0 and not ended[0]:
                while c['emptyc'][s] <= empty_waits[s]:
                    yield
                empty_waits[s] += 1
                if fill['tile'] < tiles:
                    issue(s, fill['tile'])
                    advance(fill)
                else:
                    issue_end(s)
                    ended[0] = True
            s = (s + 1) % S
            t = yield from fetch(s)
            yield
        if tid == 0:
            ctr[1] += 1
            if ctr[1] == G:
                ctr[0] = ctr[1] = 0

    threads = [thread(c, tid) for c in ctas for tid in range(T)]
    live = list(threads)
    steps = 0
    while live:
        steps += 1
        if steps > 200000:
            raise AssertionError("hang")
        if copies and rng.random() < 0.3:
            c, s, b = copies.pop(rng.randrange(len(copies)))
            c['fulltx'][s] -= b
            check_full(c, s)
            continue
        th = rng.choice(live)
        try:
            next(th)
        except StopIteration:
            live.remove(th)
    # coverage: each tile by exactly one CTA, every thread of it
    by_tile = {}
    for (y, tid, t) in scored:
        by_tile.setdefault(t, set()).add((y, tid))
    for t in range(tiles):
        ys = {y for (y, _) in by_tile.get(t, set())}
        assert len(ys) == 1, f"tile {t} scored by CTAs {ys}"
        assert len(by_tile[t]) == T, f"tile {t} not scored by every thread"
    assert set(by_tile) == set(range(tiles))
    assert ctr == [0, 0], f"counters left {ctr}"


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rng = random.Random(1)
    for i in range(trials):
        G, RUN, S, T = rng.randint(1, 7), rng.choice([1, 2, 3]), rng.choice([2, 3, 4]), rng.choice([1, 2, 3])
        tiles = rng.randint(1, 40)
        state = [0, 0]
        run(tiles, G, RUN, S, T, rng, state)
        run(rng.randint(1, 40), G, RUN, S, T, rng, state)  # a second launch on the same counters
    print(f"ok: {trials} random shapes, two launches each: every tile scored once, no hang, counters zero")


if __name__ == "__main__":
    main()
