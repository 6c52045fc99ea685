#!/usr/bin/env python3
"""Issue 14: what one persistent grid of both roles (score items, then each row group's split top-k
run by the same 128-thread CTAs) could give at the 32K decode points, from measured constants.

The grid holds the score kernel's residency (4 CTAs of 128 threads an SM, 132 SMs). A row's top-k
items take s of those slots for one chain each while later rows are scored, so the scores run on
fewer slots; only the last group's chain is exposed after the last score tile. No kernel is built:
this decides whether to build one (tests/bench/RESULTS.md, thirty-eighth session).

Constants (all GLM-5.2 unless named; H200 at 4.20 TB/s, tests/bench/RESULTS.md):
- query / scores / split top-k kernel times at 64 x 32K 3.2 / 78.1 / 21.2 us and 128 x 32K
  3.5 / 149.6 / 24.2 (ncu, `logs/index_32k_stages_34d3776.log`); floors 66.0 and 132.0 us;
- the split top-k's chain (`logs/index_topk_timeline_6131760.log`): the gather ~2.2 us plus
  ~0.33 us a thousand keys of a 512-thread CTA, i.e. ~0.169 us for each key a thread reads (a
  128-thread CTA of m keys: m / 128 a thread), then ~7 us of fixed steps (barrier, candidates, two
  passes, counts and bits, emit), taken as no longer at 128 threads (optimistic);
- what the scores lose with fewer slots: 3 CTAs an SM instead of 4 cost ~3.5% (the producer-warp
  rows of the eleventh session's table, 399.3 -> 413.3 us), 2 instead of 4 cost ~25% at 8 rows
  (the seventh session's capped grid, 72-73 -> 90-92 us); between, linear.
"""

SLOTS = 4 * 132  # score-shaped CTAs resident on the device
GATHER0, PER_KEY_THREAD, FIXED = 2.2, 0.33 * 512 / 1000, 7.0  # us
THREADS = 128

POINTS = {  # rows, keys a row, floor, query, scores, top-k kernel (us)
    "GLM-5.2 64 x 32K": (64, 32768, 66.0, 3.2, 78.1, 21.2),
    "GLM-5.2 128 x 32K": (128, 32768, 132.0, 3.5, 149.6, 24.2),
}


def slowdown(held):
    """Fractional slowdown of the scores with `held` of the 4 slots an SM taken (0..2)."""
    if held <= 1.0:
        return 0.035 * held
    return 0.035 + (0.25 - 0.035) * min(held - 1.0, 1.0)


def chain(keys_per_cta):
    """One top-k CTA's time (us) over its share of a row, 128 threads."""
    return GATHER0 + PER_KEY_THREAD * keys_per_cta / THREADS + FIXED


def model(rows, n, floor, query, scores, topk):
    best = None
    for s in (4, 8, 16, 32, 64):
        c = chain(n / s)
        cta_us = rows * s * c  # slot-microseconds the top-k items hold, all rows
        held = cta_us / scores / 132  # slots an SM, averaged over the scoring
        body = scores * (1 + slowdown(held))
        tail = min(chain(n / t) for t in (s, 2 * s, 4 * s, 8 * s))  # the last group on a free machine
        total = query * 0.5 + body + tail  # half the query kernel under the first copies, as today
        cand = (total, s, c, held, body, tail)
        best = cand if best is None or cand < best else best
    return best


if __name__ == "__main__":
    print("point | today us (x floor) | persistent grid us (x floor) | top-k CTAs a row | chain us | "
          "slots held an SM | scores us | exposed tail us | 1.25x us")
    for name, (rows, n, floor, query, scores, topk) in POINTS.items():
        today = query + scores + topk
        total, s, c, held, body, tail = model(rows, n, floor, query, scores, topk)
        print(f"{name} | {today:.1f} ({today / floor:.2f}) | {total:.1f} ({total / floor:.2f}) | {s} | "
              f"{c:.1f} | {held:.2f} | {body:.1f} | {tail:.1f} | {1.25 * floor:.1f}")
    # and with the scores at 128K's share of their floor (1.05x: GLM-5.2 64 x 128K 275.2 us against
    # 262, logs/ncu_index_stages_77cfc0f.log). At 32K the grid is about one wave of one chunk a CTA,
    # so each CTA's start (the wait behind the query kernel, the ring's fill) and drain (the last
    # tile's epilogue), ~6 us, weigh 4x more than at 128K; a persistent grid of one wave keeps them
    for name, (rows, n, floor, query, scores, topk) in POINTS.items():
        total, s, c, held, body, tail = model(rows, n, floor, query, 1.05 * floor, topk)
        print(f"{name}, if the scores ran at 128K's 1.05x the floor: {total:.1f} us ({total / floor:.2f}x), "
              f"{s} top-k CTAs a row, tail {tail:.1f}")
    # what the target needs of the chain, with the scores as measured and no residency cost at all
    for name, (rows, n, floor, query, scores, topk) in POINTS.items():
        room = 1.25 * floor - query * 0.5 - scores
        print(f"{name}: at 1.25x the exposed tail may be {room:.1f} us with free slots; "
              f"the shortest chain today is {chain(n / 64):.1f} us (64 CTAs a row)")
