#!/usr/bin/env python3
"""Issue 14: what one persistent grid of both roles (score items, then each row group's split top-k
run by the same 128-thread CTAs) could give at the 32K decode points, from measured constants.

The grid holds the score kernel's residency (4 CTAs of 128 threads an SM, 132 SMs). A row's top-k
items take some of those slots for one chain each while later rows are scored, so the scores run on
fewer slots; the last group's chain is exposed after the last score tile. No kernel is built: this
decides whether to build one (tests/bench/RESULTS.md, thirty-eighth session).

Kernel times (GLM-5.2, H200 at 4.20 TB/s, `logs/index_32k_stages_34d3776.log`): query / scores /
split top-k 3.2 / 78.1 / 21.2 us at 64 x 32K and 3.5 / 149.6 / 24.2 at 128 x 32K; floors 66.0 and
132.0 us. Half the query kernel runs under the scores' first copies, as today.

Two sets of the unknowns:
- "assumed" (before the probe): the scores lose 3.5% with 3 CTAs an SM and 25% with 2 (earlier
  sessions, other code and rows); a 128-thread top-k CTA's chain is the 512-thread chain's gather
  (~2.2 us + 0.169 us for each key a thread reads) plus its ~7 us of fixed steps
  (`logs/index_topk_timeline_6131760.log`);
- "measured" (`logs/index_residency_74cb941.log`, H100, whole calls and ncu kernel times): the
  scores with 3 and 2 CTAs an SM within 0-4% of 4 at 64-128 rows (GLM-5.2 64 x 32K the exception:
  +12-14%); the split top-k at 128 threads a CTA (5 an SM by its 42 KiB of shared memory) took
  16.6 us as a kernel at 1 x 32K (16 CTAs a row, 2K keys each), 32.3 at 64 x 32K (10 a row) and 40.4
  at 128 x 32K (5 a row). A CTA's chain is taken as the kernel time less 5 us of launch and spread
  (the 512-thread kernel's ncu time against its CTAs' chains), every CTA of it busy throughout.
"""

SMS, SLOTS_SM = 132, 4
POINTS = {  # rows, keys a row, floor, query, scores (us)
    "GLM-5.2 64 x 32K": (64, 32768, 66.0, 3.2, 78.1),
    "GLM-5.2 128 x 32K": (128, 32768, 132.0, 3.5, 149.6),
}


def assumed_slowdown(held):
    return 0.035 * held if held <= 1.0 else 0.035 + (0.25 - 0.035) * min(held - 1.0, 1.0)


def measured_slowdown(held):
    return 0.02 * min(held, 2.0) / 2.0 if held <= 2.0 else 0.02 + 0.35 * min(held - 2.0, 1.0)


def assumed_topk(rows, n):
    """(CTAs a row, chain us) of the 128-thread top-k while the scores run, and the shortest chain"""
    s = 8 if rows <= 64 else 4
    chain = lambda m: 2.2 + 0.169 * m / 128 + 7.0  # noqa: E731
    return s, chain(n / s), chain(n / 64)


def measured_topk(rows, n):
    # 10 a row at 64 rows, 5 at 128 (as the probe's kernel ran), and 16 a row on a free machine
    return (10, 32.3 - 5.0, 16.6 - 5.0) if rows <= 64 else (5, 40.4 - 5.0, 16.6 - 5.0)


def model(rows, n, floor, query, scores, topk, slowdown):
    s, chain, tail = topk(rows, n)
    held = rows * s * chain / scores / SMS  # slots an SM the top-k items hold, averaged over the scoring
    body = scores * (1 + slowdown(held))
    return query * 0.5 + body + tail, s, chain, held, body, tail


if __name__ == "__main__":
    print("inputs | point | today us (x floor) | persistent grid us (x floor) | top-k CTAs a row | chain us | "
          "top-k slots an SM | scores us | exposed tail us | 1.25x us")
    for label, topk, slow in (("assumed", assumed_topk, assumed_slowdown), ("measured", measured_topk, measured_slowdown)):
        for name, (rows, n, floor, query, scores) in POINTS.items():
            today = {64: 100.8, 128: 174.1}[rows]  # the calls, back to back (34d3776's run)
            total, s, chain, held, body, tail = model(rows, n, floor, query, scores, topk, slow)
            print(f"{label} | {name} | {today:.1f} ({today / floor:.2f}) | {total:.1f} ({total / floor:.2f}) | {s} | "
                  f"{chain:.1f} | {held:.2f} | {body:.1f} | {tail:.1f} | {1.25 * floor:.1f}")
    for name, (rows, n, floor, query, scores) in POINTS.items():
        room = 1.25 * floor - query * 0.5 - scores
        print(f"{name}: at 1.25x, with the scores as they are and free slots, the exposed tail may be {room:.1f} us")
