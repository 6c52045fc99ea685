// The exact top-k selection of stage B: scores as order-preserving 32-bit keys, the k-th largest
// by radix select, and the selected keys emitted in position order. One total order throughout
// (higher score, then smaller position; NaN below every number), so every rank and run agree.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

// A score as an orderable key: a larger score gives a larger key, -0 and +0 the same key, a NaN
// the key 1 (below every number), and 0 means "no key here" (absent or padding).
// Without a branch (the flips as one xor with a mask from the sign, NaN by a select), so that the
// score loops' stores of several rows need no branch each.
__device__ __forceinline__ uint32_t score_key(float s)
{
    const uint32_t b = __float_as_uint(__fadd_rn(s, 0.0f)); // -0 + 0 = +0
    // negative: every bit flipped; else the sign bit set (it is 0 there): b xor the mask either way
    const uint32_t k = b ^ ((uint32_t)((int32_t)b >> 31) | 0x80000000u);
    return s != s ? 1u : k;
}

// ReLU that keeps a NaN a NaN (fmaxf would turn it into 0 and hide the host's fault).
__device__ __forceinline__ float relu_nan(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }

// Keys i .. i + 3 (0 past n): one 16-byte load where it can (Stride 1, i a multiple of 4, the row
// 16-byte aligned), so that a thread has several loads in flight. Checked = false: the caller
// knows i + 3 < n (a whole step of steps() below), and no bound is tested.
template <int Stride, bool Checked = true>
__device__ __forceinline__ void keys4(const uint32_t *keys, int64_t i, int64_t n, uint32_t (&u)[4])
{
    if constexpr (Stride == 1 && !Checked) {
        const uint4 v = *reinterpret_cast<const uint4 *>(keys + i);
        u[0] = v.x, u[1] = v.y, u[2] = v.z, u[3] = v.w;
    } else {
        if (Stride == 1 && i + 3 < n) {
            const uint4 v = *reinterpret_cast<const uint4 *>(keys + i);
            u[0] = v.x, u[1] = v.y, u[2] = v.z, u[3] = v.w;
            return;
        }
#pragma unroll
        for (int e = 0; e < 4; e++)
            u[e] = !Checked || i + e < n ? keys[(i + e) * Stride] : 0u;
    }
}

// body(b, checked) for b = lo, lo + step, .. below hi: checked false for the steps that lie wholly
// below hi, whose loads then test no bound (keys4<Stride, false>), true for the last, partial one
// (body is inlined into each loop, so the flag is a constant there). The tests were 3 of a key's
// 8-16 instructions in the loops over a row of scores.
template <class Body> __device__ __forceinline__ void steps(int64_t lo, int64_t hi, int64_t step, Body body)
{
    int64_t b = lo;
    for (; b + step <= hi; b += step)
        body(b, false);
    for (; b < hi; b += step)
        body(b, true);
}

// Keys i .. i + 3 as keys4<Stride> reads them, bound-tested where checked (a constant after inlining)
template <int Stride> __device__ __forceinline__ void keys4_if(bool checked, const uint32_t *keys, int64_t i, int64_t n, uint32_t (&u)[4])
{
    if (checked)
        keys4<Stride, true>(keys, i, n, u);
    else
        keys4<Stride, false>(keys, i, n, u);
}

// atomicAdd on the shared memory word at shared address a, which the caller computed once (from a
// generic pointer the compiler forms the shared window's base again at every atomic)
__device__ __forceinline__ void shared_add(uint32_t a, uint32_t v)
{
    asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}

// The same for an or of v into the word
__device__ __forceinline__ void shared_or(uint32_t a, uint32_t v)
{
    asm volatile("red.shared.or.b32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}

// The mask of the lanes below this one (read where it is used, not held in a register)
__device__ __forceinline__ uint32_t lanes_below()
{
    uint32_t m;
    asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// Exclusive prefix sum of v over the warp's lanes; *total gets the sum.
__device__ __forceinline__ uint32_t warp_exclusive(uint32_t v, uint32_t *total)
{
    const int lane = threadIdx.x % 32;
    uint32_t x = v;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o)
            x += y;
    }
    *total = __shfl_sync(0xffffffffu, x, 31);
    return x - v;
}

// Counts keys[lo * Stride], .., keys[(hi - 1) * Stride] that are > 0 and match prefix under mask
// into hist by their digit (key >> shift) & digits; lo a multiple of 4 (16-byte loads where Stride
// is 1). Keys close in value share their high bits, so most keys of a pass can fall in one bin: a
// thread counts a run of keys of the same bin in a register and adds the run once. U: 16-byte
// loads in flight per thread (4 for keys in global memory; 1 does for shared memory).
template <int Threads, int Stride, int U = 4>
__device__ __forceinline__ void count_chunk(const uint32_t *keys, int64_t lo, int64_t hi, uint32_t prefix,
                                            uint32_t mask, int shift, uint32_t digits, uint32_t *hist)
{
    const uint32_t hist_s = (uint32_t)__cvta_generic_to_shared(hist);
    uint32_t run_bin = 0u, run_n = 0u;
    steps(lo, hi, (int64_t)Threads * 4 * U, [&](int64_t base, bool checked) {
        uint32_t u[U][4];
#pragma unroll
        for (int j = 0; j < U; j++)
            keys4_if<Stride>(checked, keys, base + ((int64_t)j * Threads + threadIdx.x) * 4, hi, u[j]);
#pragma unroll
        for (int j = 0; j < U; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint32_t v = u[j][e];
                if (v == 0u || (v & mask) != prefix)
                    continue;
                const uint32_t bin = (v >> shift) & digits;
                if (bin != run_bin && run_n) {
                    shared_add(hist_s + 4u * run_bin, run_n);
                    run_n = 0u;
                }
                run_bin = bin;
                run_n++;
            }
    });
    if (run_n)
        shared_add(hist_s + 4u * run_bin, run_n);
}

// One radix pass's histogram: hist[0 .. BINS) zeroed, then count_chunk's counts of keys lo .. hi
// - 1 into it, by the CTA's Threads threads; every thread may read hist after.
template <int Threads, int BINS, int Stride, int U = 4>
__device__ __forceinline__ void count_pass(const uint32_t *keys, int64_t lo, int64_t hi, uint32_t prefix, uint32_t mask,
                                           int shift, uint32_t digits, uint32_t *hist)
{
    for (int i = threadIdx.x; i < BINS; i += Threads)
        hist[i] = 0u;
    __syncthreads();
    count_chunk<Threads, Stride, U>(keys, lo, hi, prefix, mask, shift, digits, hist);
    __syncthreads();
}

// The K-th largest key among keys[0], keys[Stride], ... (n of them) by four 8-bit radix passes, and
// *above: how many keys are larger than it; *total: how many keys are not 0 (keys of 0 never
// count). When *total <= K there is no K-th: returns 0 after the first pass.
template <int Threads, int Stride>
__device__ uint32_t radix_kth(const uint32_t *keys, int64_t n, int K, uint32_t *hist, uint32_t *scratch,
                              uint32_t *above, uint32_t *total)
{
    uint32_t prefix = 0, mask = 0, remaining = (uint32_t)K, larger = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        count_pass<Threads, 256, Stride>(keys, 0, n, prefix, mask, shift, 255u, hist);
        if (threadIdx.x < 32) {
            // bins from the top: lane owns bins 255-8*lane .. 248-8*lane
            uint32_t c[8], sum = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                c[j] = hist[255 - 8 * threadIdx.x - j];
                sum += c[j];
            }
            uint32_t incl = sum;
#pragma unroll
            for (int o = 1; o < 32; o *= 2) {
                const uint32_t y = __shfl_up_sync(0xffffffffu, incl, o);
                if ((int)threadIdx.x >= o)
                    incl += y;
            }
            const uint32_t excl = incl - sum;
            if (shift == 24 && threadIdx.x == 31)
                scratch[2] = incl; // every key but the 0s: the first pass counts them all
            // the lane whose run reaches `remaining` finds the bin
            if (excl < remaining && incl >= remaining) {
                uint32_t run = excl;
                for (int j = 0; j < 8; j++) {
                    if (run + c[j] >= remaining) {
                        scratch[0] = 255u - 8u * threadIdx.x - (uint32_t)j;
                        scratch[1] = run;
                        break;
                    }
                    run += c[j];
                }
            }
        }
        __syncthreads();
        const uint32_t bin = scratch[0], before = scratch[1];
        if (shift == 24)
            *total = scratch[2];
        __syncthreads();
        if (*total <= (uint32_t)K)
            return 0u;
        remaining -= before;
        larger += before;
        prefix |= bin << shift;
        mask |= 255u << shift;
    }
    *above = larger;
    return prefix;
}

// step(b, u) for the steps of 128 keys b = wlo, wlo + 128, .. below whi of a warp's run, lane l's
// keys b + 4 l .. b + 4 l + 3 in u (0 past whi), the loads of A steps issued before the first of
// them is used, so that a lane has A loads in flight rather than one. Warp-uniform: every lane
// calls step for the same b.
template <int Stride, int A, class Step>
__device__ __forceinline__ void warp_steps(const uint32_t *keys, int64_t wlo, int64_t whi, Step step)
{
    const int lane = threadIdx.x % 32;
    for (int64_t b = wlo; b < whi; b += A * 128) {
        uint32_t u[A][4];
#pragma unroll
        for (int a = 0; a < A; a++)
            keys4<Stride>(keys, b + a * 128 + 4 * lane, whi, u[a]);
#pragma unroll
        for (int a = 0; a < A; a++)
            if (b + a * 128 < whi)
                step(b + a * 128, u[a]);
    }
}

// Emits the selected keys among keys[lo * Stride] .. keys[(hi - 1) * Stride] (ascending positions),
// given the K-th largest key kth (0: every key > 0 is in), how many of the keys equal to it are in
// (ties, taken in position order), and how many keys above kth and equal to it lie before lo
// (above0, tie0; 0 for a whole row): emit(j, i) with j = the key's place among all selected keys.
// Each warp takes one contiguous run of the range: it counts its keys above the K-th and equal to
// it (each lane on its own, one warp sum at the end), the block adds up the counts of the warps
// before, and each warp then emits its run in order. A step of the run is 128 keys, lane l holding
// keys 4l .. 4l + 3: the place of key (l, e) among the step's selected keys is what the ballots of
// the four slots give for the lanes below l, plus the lane's own slots before e (the ties' ranks
// alike, worked out only in a step that has a tie). Only a few keys in a hundred are selected, so
// these ballots replaced two warp scans a step (the kernel's largest share of instructions).
// scratch: 2 * Threads / 32 words.
template <int Threads, int Stride, int AHEAD, int EAHEAD, class Emit>
__device__ void emit_range(const uint32_t *keys, int64_t lo, int64_t hi, uint32_t kth, uint32_t ties, uint32_t above0,
                           uint32_t tie0, Emit emit, uint32_t *scratch)
{
    constexpr int WARPS = Threads / 32;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // no key equals tie (score_key never gives all ones) when there is no K-th; a key above kth
    // is not 0
    const uint32_t tie = kth != 0u ? kth : 0xffffffffu;
    const int64_t len = hi > lo ? hi - lo : 0;
    const int64_t run = ((len + WARPS - 1) / WARPS + 127) / 128 * 128, wlo = lo + warp * run,
                  whi = wlo + run < hi ? wlo + run : hi;
    // the count takes AHEAD steps of the run at a time and the emit EAHEAD (warp_steps: the split
    // top-k's run is up to 2048 keys at 64 rows of 128K, 16 steps, each a round trip to L2 when
    // loaded one by one)
    uint32_t ca = 0, ct = 0;
    warp_steps<Stride, AHEAD>(keys, wlo, whi, [&](int64_t, const uint32_t(&u)[4]) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            ca += u[e] > kth;
            ct += u[e] == tie;
        }
    });
    const uint32_t n_above = __reduce_add_sync(0xffffffffu, ca), n_tie = __reduce_add_sync(0xffffffffu, ct);
    if (lane == 0) {
        scratch[warp] = n_above;
        scratch[WARPS + warp] = n_tie;
    }
    __syncthreads();
    uint32_t above_before = above0, tie_before = tie0;
    for (int v = 0; v < warp; v++) {
        above_before += scratch[v];
        tie_before += scratch[WARPS + v];
    }
    // ties are taken in position order: the keys before took min(ties, their ties) of them
    uint32_t at = above_before + (tie_before < ties ? tie_before : ties);
    // one step of 128 keys at b, lane l's keys b + 4 l .. b + 4 l + 3 in u (warp-uniform: every
    // lane calls it for the same b)
    auto emit_step = [&](int64_t b, const uint32_t(&u)[4]) {
        bool sel[4];
        uint32_t any_tie = 0u;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            sel[e] = u[e] > kth;
            any_tie |= __ballot_sync(0xffffffffu, u[e] == tie);
        }
        if (any_tie != 0u) { // the same in every lane; rare, so the ballots are taken again
            uint32_t rank = tie_before, in_step = 0u; // rank: of this lane's first key among the ties
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint32_t tb = __ballot_sync(0xffffffffu, u[e] == tie);
                rank += (uint32_t)__popc(tb & lanes_below());
                in_step += (uint32_t)__popc(tb);
            }
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const bool is_tie = u[e] == tie;
                sel[e] = sel[e] || (is_tie && rank < ties);
                rank += is_tie;
            }
            tie_before += in_step;
        }
        uint32_t j = at;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const uint32_t sb = __ballot_sync(0xffffffffu, sel[e]);
            j += (uint32_t)__popc(sb & lanes_below());
            at += (uint32_t)__popc(sb);
        }
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (sel[e])
                emit((int)j++, b + 4 * lane + e);
    };
    warp_steps<Stride, EAHEAD>(keys, wlo, whi, emit_step);
    __syncthreads(); // scratch is the caller's again
}

// The top K of n candidates keys[i * Stride] given in ascending position order: the keys above
// the K-th largest, and of the keys equal to it the ones of smallest position, passed in
// ascending position order to emit(j, i) for j = 0, 1, ...; returns how many (min(K, number of
// keys > 0)). Keys of 0 are no candidates. One CTA does it all.
template <int Threads, int Stride, class Emit>
__device__ int select_topk(const uint32_t *keys, int64_t n, int K, Emit emit, uint32_t *hist, uint32_t *scratch)
{
    uint32_t above = 0, total = 0;
    const uint32_t kth = radix_kth<Threads, Stride>(keys, n, K, hist, scratch, &above, &total);
    const uint32_t ties = kth ? (uint32_t)K - above : 0u; // of the keys equal to kth, this many are in
    // one load in flight a lane: index_topk and index_merge stay at 32 registers, two 1024-thread
    // CTAs an SM (more ahead took 56-58)
    emit_range<Threads, Stride, 1, 1>(keys, 0, n, kth, ties, 0u, 0u, emit, scratch + 3);
    return (int)(total < (uint32_t)K ? total : (uint32_t)K);
}

// ---- the same selection spread over several CTAs of a row (few rows, long rows) ----

// A row's state in global memory, shared by its CTAs and all zero between calls up to word COUNTS
// (the last CTA to leave zeroes it): words 1 .. PASSES - 1 count the CTAs arrived at each radix
// pass's barrier (word 0 unused where the score kernel counted the first pass), word LAST those arrived at the barrier before
// the emit, LEFT those that left, STORED the candidates stored so far, ABOVE the keys above the
// first pass's bin stored so far; from word HIST the row-wide histogram of each radix pass (BINS
// counts each; the first pass's counted by the score kernel ahead where it can, FirstPassCounts), then from word
// COUNTS each CTA's counts of its chunk's keys above the K-th and equal to it (2 words a CTA), then
// from word cands(max_splits) the row's candidates, Cands (key, position) pairs, then from word
// above(max_splits) the positions of the row's keys above the first pass's bin (fewer than K: the
// bin holds the K-th); each call writes the ones it reads: never zeroed.
template <int RB, int Cands, int K> struct SplitState {
    static constexpr int BINS = 1 << RB, PASSES = (32 + RB - 1) / RB, HIST = 8, COUNTS = HIST + PASSES * BINS;
    // STORED and ABOVE one 8-byte word, so that one atomic takes slots in both lists
    static constexpr int LAST = PASSES, LEFT = PASSES + 1, STORED = 6, ABOVE = 7;
    static_assert(LEFT < STORED && STORED % 2 == 0, "the counters before STORED, which starts an 8-byte word");
    // radix pass `pass` reads the key's digits [shift, shift + RB) (the last pass may read fewer)
    static __device__ __forceinline__ int shift(int pass) { return 32 - RB * (pass + 1) > 0 ? 32 - RB * (pass + 1) : 0; }
    static __device__ __forceinline__ uint32_t digits(int pass) { return (1u << (32 - RB * pass - shift(pass))) - 1u; }
    static_assert(ABOVE < HIST, "the counters fit before the histograms");
    // the first pass's digit of key u: its bin in the row's first histogram
    static __device__ __forceinline__ uint32_t first_bin(uint32_t u) { return u >> shift(0); }
    __host__ __device__ static constexpr long long cands(int max_splits) { return COUNTS + 2ll * max_splits; }
    __host__ __device__ static constexpr long long above(int max_splits) { return cands(max_splits) + 2ll * Cands; }
    __host__ __device__ static constexpr long long bytes(int max_splits) { return 4ll * (above(max_splits) + K); }
};

// The first radix pass of the split top-k, counted by a score kernel as it stores a row's keys (the
// top-k then starts at that pass's bin, with no count of its own and no barrier): the CTA counts
// the keys it stores in shared memory, 16-bit counters two a word (so WORDS words: the CTA stores
// at most Most keys of the row, the plan's index_score_first_keys, which the runtime checks before
// it asks for the counts), and adds its counts to the row's first histogram once, at its end (a
// hot bin's atomics in L2, one a key, made the score kernel a third slower at 64 rows of 128K keys).
template <class St, int Most> struct FirstPassCounts {
    static constexpr int WORDS = St::BINS / 2;
    static_assert(Most >= 1 && Most <= 65535, "a CTA's count of a bin fits a 16-bit counter");
    // h's counters to 0 (before the CTA's barrier that precedes the first add)
    template <int Threads> static __device__ __forceinline__ void clear(uint32_t *h)
    {
        for (int w = threadIdx.x; w < WORDS; w += Threads)
            h[w] = 0u;
    }
    // key u (0: none, never counted) where `on` (a lane that stores a key of a counted row): the
    // warp's lanes with the same bin add once, their count. Every lane of the warp calls it.
    static __device__ __forceinline__ void add(uint32_t h_s, bool on, uint32_t u)
    {
        on = on && u != 0u;
        const uint32_t bin = St::first_bin(u);
        const uint32_t same = __match_any_sync(0xffffffffu, on ? bin : 0xffffffffu);
        if (on && (same & lanes_below()) == 0u) // the lowest lane of its set
            shared_add(h_s + 4u * (bin / 2), (uint32_t)__popc(same) << (16 * (bin % 2)));
    }
    // the CTA's counts into the row's first histogram g (after a barrier that follows the last add)
    template <int Threads> static __device__ __forceinline__ void flush(const uint32_t *h, uint32_t *g)
    {
        for (int w = threadIdx.x; w < WORDS; w += Threads) {
            const uint32_t v = h[w];
            if (v & 0xffffu)
                atomicAdd(g + 2 * w, v & 0xffffu);
            if (v >> 16)
                atomicAdd(g + 2 * w + 1, v >> 16);
        }
    }
};

__device__ __forceinline__ uint32_t load_acquire(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// *p += v with release semantics (what the CTA's threads wrote before a __syncthreads that came
// first is visible to whoever acquires the sum), returning the sum before, acquiring it as well.
__device__ __forceinline__ uint32_t add_acq_rel(uint32_t *p, uint32_t v)
{
    uint32_t old;
    asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

// *p += v with release semantics only, returning the sum before: the thread goes on without waiting
// for it until it uses the value (an acquire would hold its later accesses back).
__device__ __forceinline__ uint32_t add_release(uint32_t *p, uint32_t v)
{
    uint32_t old;
    asm volatile("atom.release.gpu.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

// Waits until all S CTAs of a row have arrived at this barrier (*counter counts them from 0); what
// any of them wrote to global memory before arriving is visible to all after. The S CTAs must be
// resident at once: the runtime launches the kernel cooperatively, which guarantees it. The CTA's
// writes are ordered before thread 0's arrival by the __syncthreads, and published by the arrival's
// release; thread 0's acquire of the full count and the second __syncthreads order everything
// after it (the release-acquire pair needs no full fence on either side).
__device__ __forceinline__ void group_sync(uint32_t *counter, uint32_t S)
{
    __syncthreads();
    if (threadIdx.x == 0 && add_acq_rel(counter, 1u) + 1u < S)
        while (load_acquire(counter) < S)
            __nanosleep(32);
    __syncthreads();
}

// The sum of v over the CTA's threads, in every thread. red: Threads / 32 words.
template <int Threads> __device__ __forceinline__ uint32_t block_sum(uint32_t v, uint32_t *red)
{
    constexpr int WARPS = Threads / 32;
#pragma unroll
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0)
        red[threadIdx.x / 32] = v;
    __syncthreads();
    uint32_t s = 0;
#pragma unroll
    for (int w = 0; w < WARPS; w++)
        s += red[w];
    __syncthreads();
    return s;
}

// The sum of v over the CTA's threads below this one (threadIdx.x order). red: Threads / 32 words.
template <int Threads> __device__ __forceinline__ uint32_t block_exclusive(uint32_t v, uint32_t *red)
{
    uint32_t total;
    uint32_t x = warp_exclusive(v, &total);
    if (threadIdx.x % 32 == 0)
        red[threadIdx.x / 32] = total;
    __syncthreads();
    for (int w = 0; w < (int)threadIdx.x / 32; w++)
        x += red[w];
    __syncthreads();
    return x;
}

// The counts g[0 .. BINS) walked from the top bin down (Global: row-wide counts that other CTAs
// wrote, read through L2; otherwise the CTA's own in shared memory): *bin gets the bin where the
// running count first reaches `remaining`, *before the count of the bins above it, *in_bin its own
// count; returns the count of all bins (when it is below `remaining`, *bin, *before and *in_bin mean
// nothing). Every CTA reading the same counts gets the same answer. red: Threads / 32 + 3 words.
template <int Threads, int BINS, bool Global>
__device__ uint32_t find_bin(const uint32_t *g, uint32_t remaining, uint32_t *red, uint32_t *bin, uint32_t *before,
                             uint32_t *in_bin)
{
    static_assert(BINS % Threads == 0, "each thread takes the same number of bins");
    constexpr int PER = BINS / Threads, WARPS = Threads / 32;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int top = BINS - 1 - PER * (int)threadIdx.x; // this thread's bins: top, top - 1, ..
    if (threadIdx.x == 0)
        red[WARPS] = red[WARPS + 1] = red[WARPS + 2] = 0u; // defined even when no bin reaches `remaining`
    uint32_t c[PER], s = 0;
#pragma unroll
    for (int j = 0; j < PER; j++) {
        c[j] = Global ? __ldcg(g + top - j) : g[top - j];
        s += c[j];
    }
    uint32_t wtotal;
    const uint32_t wex = warp_exclusive(s, &wtotal);
    if (lane == 0)
        red[warp] = wtotal;
    __syncthreads();
    uint32_t excl = wex, all = 0;
#pragma unroll
    for (int w = 0; w < WARPS; w++) {
        all += red[w];
        excl += w < warp ? red[w] : 0u;
    }
    if (excl < remaining && excl + s >= remaining) {
        uint32_t run = excl;
#pragma unroll
        for (int j = 0; j < PER; j++) {
            if (run + c[j] >= remaining) {
                red[WARPS] = (uint32_t)(top - j);
                red[WARPS + 1] = run;
                red[WARPS + 2] = c[j];
                break;
            }
            run += c[j];
        }
    }
    __syncthreads();
    *bin = red[WARPS];
    *before = red[WARPS + 1];
    *in_bin = red[WARPS + 2];
    __syncthreads();
    return all;
}

// f(i, keys[i]) for every i in lo .. hi - 1 (lo a multiple of 4), and f(i, 0) for a few i past
// it (keys4 reads 0 there; f ignores keys of 0, which the caller's test saves a 64-bit compare a
// key); each thread with two 16-byte loads in flight (four, as count_chunk has, made the split
// kernel spill at 64 registers).
template <int Threads, class F> __device__ __forceinline__ void each_key(const uint32_t *keys, int64_t lo, int64_t hi, F f)
{
    constexpr int U = 2;
    steps(lo, hi, (int64_t)Threads * 4 * U, [&](int64_t base, bool checked) {
        uint32_t u[U][4];
#pragma unroll
        for (int j = 0; j < U; j++)
            keys4_if<1>(checked, keys, base + ((int64_t)j * Threads + threadIdx.x) * 4, hi, u[j]);
#pragma unroll
        for (int j = 0; j < U; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                f(base + ((int64_t)j * Threads + threadIdx.x) * 4 + e, u[j][e]);
    });
}

// The keys of keys[lo .. hi) above x (keys of 0 never count), summed over the CTA's threads: every
// thread gets the sum. red: Threads / 32 words.
template <int Threads> __device__ uint32_t count_above(const uint32_t *keys, int64_t lo, int64_t hi, uint32_t x, uint32_t *red)
{
    uint32_t c = 0u;
    each_key<Threads>(keys, lo, hi, [&](int64_t, uint32_t u) { c += u > x; });
    return block_sum<Threads>(c, red);
}

// select_topk's selection (the same set, emitted at the same places) by the S = gridDim.y CTAs of
// a row, blockIdx.y this CTA's part; pad(j) is called for j = min(K, keys > 0) .. K - 1. Each CTA
// takes a contiguous chunk of the row, at least SplitKeys keys (CTAs past the row's end take none,
// but still meet at every barrier). The K-th largest key is found by radix passes of RB bits over
// row-wide histograms (state): in a pass each CTA counts its chunk in shared memory and adds its
// counts to the pass's histogram, a barrier, and every CTA reads the same row-wide counts and picks
// the same bin; where first_counted, the first pass's histogram was counted by the score kernel
// ahead as it stored the keys (FirstPassCounts), and every CTA starts by reading it.
// Usually the first pass leaves few keys in the chosen bin (the candidates: the first RB bits of a
// key are the score's sign, exponent and top mantissa bits, so a bin is a narrow band of scores):
// when at most Cands, each CTA stores its chunk's candidates (key, position) row-wide in slots a
// warp takes with one atomic a step, a barrier, and every CTA reads all of their keys into shared
// memory and finishes the radix passes there alone; the same keys give every CTA the same K-th
// (their order, which the atomics decide, does not matter), and a bit a candidate for those before
// the chunk and those in it, with the chunk counts published before the barrier, give each CTA its
// chunk's place. So one barrier instead of one a pass and one for the counts, and the passes after
// the first read shared memory instead of the row.
// With more candidates the passes go on over the chunks, a barrier each; each CTA keeps its own
// chunk's count of keys above the K-th (a count of its keys above the first pass's bin, then the
// bins above the chosen one in every later pass) and equal to it (the chosen bin of the last pass),
// the CTAs publish those, a last barrier. Either way each CTA then emits its chunk with the counts
// of the chunks before it: the ties are taken in position order across the chunks, as in one CTA.
// In the first case the read that stores the candidates also stores the positions of the chunk's
// keys above the bin (all of them in), so a CTA of at least bit_keys keys sets a bit for each of
// its selected keys in shared memory and emits by walking the bits: its chunk is read once more
// instead of twice (emit_range's count and emit passes stay for smaller chunks, where the bits'
// barriers and round trips cost more than the two reads, for the other cases, and for the one
// chunk of a row where the cut among the K-th's ties falls inside it). A row of at most SplitKeys
// keys is CTA 0's alone (select_topk); the other CTAs return at once and the state is not touched
// (nor is its first histogram counted: FirstPassCounts's callers test the row's keys the same way).
// state: St::bytes(MaxSplits) bytes, 8-byte aligned; hist: 1 << RB words; red: 3 + 2 * Threads / 32
// words; cand_s: Cands + 2 Cands / 32 words of shared memory, 16-byte aligned.
template <int Threads, int RB, int SplitKeys, int Cands, int MaxSplits, int K, class Emit, class Pad>
__device__ void select_topk_split(const uint32_t *keys, int64_t n, int64_t bit_keys, bool first_counted, Emit emit, Pad pad,
                                  uint32_t *state, uint32_t *hist, uint32_t *red, uint32_t *cand_s)
{
    using St = SplitState<RB, Cands, K>;
    constexpr int BINS = St::BINS, PASSES = St::PASSES;
    static_assert(RB >= 8 && RB <= 12, "a pass's histogram fits in shared memory; select_topk's hist needs 256");
    static_assert(SplitKeys % 4 == 0 && Cands % 4 == 0, "chunks and the candidates' keys on 16-byte boundaries");
    static_assert(Cands % Threads == 0 && 2 * (Cands / 32) <= BINS, "the candidates' selected bits fit hist");
    static_assert(K < 65536 && Cands < 65536, "a warp's step counts two 16-bit halves of a word");
    __shared__ uint32_t last_out; // this CTA is the last of the row to leave
    const uint32_t S = gridDim.y, part = blockIdx.y;
    if (n <= SplitKeys) {
        if (part != 0)
            return;
        const int written = select_topk<Threads, 1>(keys, n, K, emit, hist, red);
        for (int j = written + threadIdx.x; j < K; j += Threads)
            pad(j);
        return;
    }
    // in 32 bits (a row's keys are int32 positions: fewer than 2^31), two registers fewer held
    // through the kernel than in 64 (their spill, at the 64 registers a CTA of 512 threads takes)
    const uint32_t keys_n = (uint32_t)n, step = ((keys_n + S - 1) / S + 3) / 4 * 4;
    const uint32_t chunk = step < (uint32_t)SplitKeys ? (uint32_t)SplitKeys : step;
    const uint32_t lo32 = part * chunk < keys_n ? part * chunk : keys_n, hi32 = keys_n - lo32 > chunk ? lo32 + chunk : keys_n;
    const int64_t lo = lo32, hi = hi32;
    const uint32_t words = (hi32 - lo32 + 31u) / 32u; // the chunk's words of a bit a key (the bit emit)
    uint32_t prefix = 0u, mask = 0u, remaining = (uint32_t)K, larger = 0u, total = 0u, mine_above = 0u, mine_tie = 0u;
    uint32_t in_bin = 0u;
    bool all = false;      // at most K keys > 0: every one is in
    bool gathered = false; // the first pass's bin holds at most Cands keys: the rest in shared memory
    for (int pass = 0; pass < PASSES; pass++) {
        const int shift = St::shift(pass);
        const uint32_t digits = St::digits(pass);
        uint32_t *g = state + St::HIST + pass * BINS;
        if (pass > 0 || !first_counted) { // else the score kernel's, complete before this grid began
            count_pass<Threads, BINS, 1>(keys, lo, hi, prefix, mask, shift, digits, hist);
            for (int i = threadIdx.x; i < BINS; i += Threads)
                if (hist[i])
                    atomicAdd(g + i, hist[i]);
            group_sync(state + pass, S);
        }
        uint32_t bin, before;
        const uint32_t counted = find_bin<Threads, BINS, true>(g, remaining, red, &bin, &before, &in_bin);
        if (pass == 0) {
            total = counted;
            if (total <= (uint32_t)K) { // the same in every CTA: they read the same counts
                mine_above = count_above<Threads>(keys, lo, hi, 0u, red);
                all = true;
                break;
            }
        } else {
            uint32_t s = 0u;
            for (int i = threadIdx.x; i < BINS; i += Threads)
                s += (uint32_t)i > bin ? hist[i] : 0u;
            mine_above += block_sum<Threads>(s, red);
        }
        if (pass == PASSES - 1)
            mine_tie = hist[bin];
        remaining -= before;
        larger += before;
        prefix |= bin << shift;
        mask |= digits << shift;
        if (pass == 0) {
            if (in_bin <= (uint32_t)Cands) { // the same in every CTA, as above
                gathered = true;
                break;
            }
            mine_above = count_above<Threads>(keys, lo, hi, prefix | ~mask, red); // above the bin
        }
    }
    // the places past the row's keys, padded now (the emit below writes the places before them),
    // so that the count is not held through the kernel
    for (uint32_t j = (total < (uint32_t)K ? total : (uint32_t)K) + part * Threads + threadIdx.x; j < (uint32_t)K;
         j += S * Threads)
        pad((int)j);
    uint32_t *counts = state + St::COUNTS;
    uint32_t kth, ties, above0, tie0;
    bool bitmap = false; // the gathered path's emit from the chunk's bits (below)
    if (gathered) {
        uint32_t *const key_s = cand_s, *const before_s = cand_s + Cands, *const mine_s = before_s + Cands / 32;
        uint2 *const cands = reinterpret_cast<uint2 *>(state + St::cands(MaxSplits)); // even words: 8-byte aligned
        uint32_t *const up = state + St::above(MaxSplits);
        const bool long_chunk = hi - lo >= bit_keys; // the chunk's emit may take its bits (below)
        // The chunk's candidates and, for a chunk that takes the bit emit below, the positions of its
        // keys above the bin (all of them are in: the bin holds the K-th), which the emit then takes
        // without reading the chunk again. Each warp step takes its slots in both lists with one
        // atomic (STORED and ABOVE, one 8-byte word: the candidates' count in the low half), its
        // lanes' places by a prefix sum of their counts (two 16-bit halves of a word). The slots
        // are bounded by the lists' sizes: the first pass's counts say they fit (fewer than K keys
        // lie above the bin), and a place past the end is dropped, never stored.
        const uint32_t bin_max = prefix | ~mask; // the bin's largest key
        unsigned long long *const slots = reinterpret_cast<unsigned long long *>(state + St::STORED);
        uint32_t above_n = 0u; // this thread's keys above the bin
        constexpr int U = 2;   // 16-byte loads in flight a thread (each_key's)
        steps(lo, hi, (int64_t)Threads * 4 * U, [&](int64_t base, bool checked) {
            uint32_t u[U][4];
#pragma unroll
            for (int j = 0; j < U; j++)
                keys4_if<1>(checked, keys, base + ((int64_t)j * Threads + threadIdx.x) * 4, hi, u[j]);
            uint32_t c = 0u, a = 0u;
#pragma unroll
            for (int j = 0; j < U; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    c += u[j][e] != 0u && (u[j][e] & mask) == prefix;
                    a += u[j][e] > bin_max;
                }
            above_n += a;
            a = long_chunk ? a : 0u;
            uint32_t sum;
            const uint32_t x = warp_exclusive(c | a << 16, &sum);
            if (sum == 0u) // the same in every lane of the warp
                return;
            unsigned long long b = 0ull;
            if (threadIdx.x % 32 == 0)
                b = atomicAdd(slots, (unsigned long long)(sum & 0xffffu) | (unsigned long long)(sum >> 16) << 32);
            b = __shfl_sync(0xffffffffu, b, 0);
            uint32_t ci = (uint32_t)b + (x & 0xffffu), ai = (uint32_t)(b >> 32) + (x >> 16);
#pragma unroll
            for (int j = 0; j < U; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const uint32_t v = u[j][e], i = (uint32_t)(base + ((int64_t)j * Threads + threadIdx.x) * 4 + e);
                    if (v != 0u && (v & mask) == prefix) {
                        if (ci < (uint32_t)Cands)
                            cands[ci] = make_uint2(v, i);
                        ci++;
                    } else if (long_chunk && v > bin_max) {
                        if (ai < (uint32_t)K)
                            up[ai] = i;
                        ai++;
                    }
                }
        });
        mine_above = block_sum<Threads>(above_n, red);
        if (threadIdx.x == 0)
            counts[2 * part] = mine_above;
        group_sync(state + St::LAST, S);
        // the counts of the chunks before this one, loaded now so that they arrive with the candidates
        uint32_t a = 0u, t = 0u;
        for (uint32_t c = threadIdx.x; c < part; c += Threads)
            a += __ldcg(counts + 2 * c);
        // every candidate's key of the row, and two bits for each: before this chunk, and in it (a
        // warp's 32 consecutive candidates make one word of each); two loads in flight a thread
        for (uint32_t b = 0; b < in_bin; b += 2 * Threads) {
            uint2 v[2];
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const uint32_t i = b + j * Threads + threadIdx.x;
                v[j] = i < in_bin ? __ldcg(cands + i) : make_uint2(0u, 0xffffffffu);
            }
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const uint32_t i = b + j * Threads + threadIdx.x;
                const uint32_t bits = __ballot_sync(0xffffffffu, (int64_t)v[j].y < lo);
                const uint32_t mine = __ballot_sync(0xffffffffu, (int64_t)v[j].y >= lo && (int64_t)v[j].y < hi);
                if (i < in_bin) {
                    key_s[i] = v[j].x;
                    if (i % 32 == 0)
                        before_s[i / 32] = bits, mine_s[i / 32] = mine;
                }
            }
        }
        __syncthreads();
        // the passes left, over the candidates
        for (int pass = 1; pass < PASSES; pass++) {
            const int shift = St::shift(pass);
            const uint32_t digits = St::digits(pass);
            count_pass<Threads, BINS, 1, 1>(key_s, 0, in_bin, prefix, mask, shift, digits, hist);
            uint32_t bin, before, unused;
            find_bin<Threads, BINS, false>(hist, remaining, red, &bin, &before, &unused);
            remaining -= before;
            larger += before;
            prefix |= bin << shift;
            mask |= digits << shift;
        }
        kth = prefix;
        ties = (uint32_t)K - larger;
        // the keys above the K-th before this chunk: above the first pass's bin (the chunks' counts,
        // in a) or candidates above it; the ties before it: candidates; m: this chunk's ties. This
        // chunk's candidates above the K-th and equal to it, a bit each in hist (free since
        // find_bin's last barrier; one word a warp's 32 candidates), for the bit emit.
        uint32_t *const gt_s = hist, *const eq_s = hist + Cands / 32;
        uint32_t m = 0u;
        for (uint32_t b = 0; b < in_bin; b += Threads) { // the same trips in every lane
            const uint32_t i = b + threadIdx.x;
            const uint32_t k = i < in_bin ? key_s[i] : 0u, w = i / 32, bit = 1u << (i % 32);
            const bool ahead = i < in_bin && (before_s[w] & bit), mine = i < in_bin && (mine_s[w] & bit);
            a += ahead && k > kth;
            t += ahead && k == kth;
            const uint32_t gt = __ballot_sync(0xffffffffu, mine && k > kth), eq = __ballot_sync(0xffffffffu, mine && k == kth);
            if (threadIdx.x % 32 == 0) {
                gt_s[w] = gt, eq_s[w] = eq;
                m += (uint32_t)__popc(eq);
            }
        }
        // a < K and t <= in_bin <= Cands: one sum of both, in the halves of a word
        const uint32_t at = block_sum<Threads>(a | t << 16, red);
        above0 = at & 0xffffu;
        tie0 = at >> 16;
        m = block_sum<Threads>(m, red);
        // The chunk's selected keys as a bit a key in cand_s (free now: block_sum's barriers follow
        // the last read of key_s and the candidates' bits): the keys above the bin and the candidates
        // above the K-th, and the chunk's ties where all or none of them are in (the ties are taken
        // in position order, so where the row's cut falls inside this chunk, emit_range ranks them).
        // The emit then walks the bits instead of reading the chunk twice. The same in every thread.
        const bool ties_in = tie0 + m <= ties;
        bitmap = long_chunk && words <= (uint32_t)(Cands + 2 * (Cands / 32)) && (ties_in || tie0 >= ties);
        if (bitmap) {
            for (uint32_t w = threadIdx.x; w < words; w += Threads)
                cand_s[w] = 0u;
            __syncthreads();
            const uint32_t cand_s_a = (uint32_t)__cvta_generic_to_shared(cand_s);
            auto set = [&](uint32_t i) { // i: the key's position in the row
                const uint32_t o = i - (uint32_t)lo;
                shared_or(cand_s_a + 4u * (o / 32), 1u << (o % 32));
            };
            // the row's stored keys above the bin (the long chunks', final since the last barrier)
            // that lie in this chunk
            const uint32_t up_all = __ldcg(state + St::ABOVE), ups = up_all < (uint32_t)K ? up_all : (uint32_t)K;
            for (uint32_t c = threadIdx.x; c < ups; c += Threads) {
                const uint32_t i = __ldcg(up + c);
                if ((int64_t)i >= lo && (int64_t)i < hi)
                    set(i);
            }
            for (uint32_t i = threadIdx.x; i < in_bin; i += Threads)
                if (((gt_s[i / 32] | (ties_in ? eq_s[i / 32] : 0u)) >> (i % 32)) & 1u)
                    set(__ldcg(cands + i).y);
            __syncthreads();
        }
    } else {
        kth = all ? 0u : prefix;
        ties = all ? 0u : (uint32_t)K - larger;
        if (threadIdx.x == 0) {
            counts[2 * part] = mine_above;
            counts[2 * part + 1] = mine_tie;
        }
        group_sync(state + St::LAST, S);
        uint32_t a = 0u, t = 0u;
        for (uint32_t c = threadIdx.x; c < part; c += Threads) {
            a += __ldcg(counts + 2 * c);
            t += __ldcg(counts + 2 * c + 1);
        }
        above0 = block_sum<Threads>(a, red);
        tie0 = block_sum<Threads>(t, red);
    }
    // this CTA is done with the row's state (a barrier follows every thread's last read: block_sum's,
    // or the one after the bits are set): it leaves now, and the emit below runs while the arrival
    // travels. The last CTA to leave zeroes the counters and histograms for the next call: by then
    // every CTA has passed every barrier and read every count (each CTA's reads come before its
    // release of LEFT; the last one's thread 0 fences after it saw every other arrival, and the
    // CTA's barrier puts its stores after that)
    uint32_t left = 0u;
    if (threadIdx.x == 0)
        left = add_release(state + St::LEFT, 1u);
    if (bitmap) {
        // thread x takes words x * per .. x * per + per - 1; a key's place: the selected keys before
        // the chunk (above0 and the ties taken there), then the bits before it
        const uint32_t per = (words + Threads - 1) / Threads, w0 = threadIdx.x * per;
        uint32_t c = 0u;
        for (uint32_t k = 0; k < per; k++)
            c += w0 + k < words ? (uint32_t)__popc(cand_s[w0 + k]) : 0u;
        uint32_t j = above0 + (tie0 < ties ? tie0 : ties) + block_exclusive<Threads>(c, red);
        for (uint32_t k = 0; k < per; k++) {
            uint32_t b = w0 + k < words ? cand_s[w0 + k] : 0u;
            for (; b != 0u; b &= b - 1u)
                emit((int)j++, (int64_t)(lo32 + 32u * (w0 + k) + (uint32_t)(__ffs(b) - 1)));
        }
    } else {
        // 3 and 2 loads in flight a lane (more spilled under the kernel's 64 registers at DCP = 8):
        // tests/bench/RESULTS.md, 128 x 128K 1-2% faster
        emit_range<Threads, 1, 3, 2>(keys, lo, hi, kth, ties, above0, tie0, emit, red);
    }
    if (threadIdx.x == 0) {
        if (left == S - 1)
            __threadfence(); // acquire, after the read of LEFT: every other CTA's reads of the state
                             // came before its arrival; the barrier below orders the zeroing after it
        last_out = left == S - 1;
    }
    __syncthreads();
    if (last_out)
        for (int i = threadIdx.x; i < St::COUNTS; i += Threads)
            state[i] = 0u;
}

} // namespace dsa
