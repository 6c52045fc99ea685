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

// The L2 lines wholly inside keys[lo .. hi) dropped without being written back (discard.global.L2:
// a later read may see anything), by the CTA's Threads threads: a row's score keys once the top-k
// has read them for the last time. The score kernel stores them evict-last so that the top-k reads
// them from L2; dropped, they neither go back to DRAM nor hold L2 through the rest of the step.
// Lines shared with a neighbouring chunk stay (another CTA may still read them).
template <int Threads> __device__ __forceinline__ void discard_lines(const uint32_t *keys, int64_t lo, int64_t hi)
{
    const uint64_t a = (reinterpret_cast<uint64_t>(keys + lo) + 127u) & ~(uint64_t)127u;
    const uint64_t b = reinterpret_cast<uint64_t>(keys + hi) & ~(uint64_t)127u;
    for (uint64_t p = a + 128u * threadIdx.x; p < b; p += 128u * Threads)
        asm volatile("discard.global.L2 [%0], 128;" ::"l"(p) : "memory");
}

// A row's keys[0 .. n) dropped (discard_lines) by the one CTA that selected from them, once all of
// its threads are past their last read (the emit's)
template <int Threads> __device__ __forceinline__ void discard_row(const uint32_t *keys, int64_t n)
{
    __syncthreads();
    discard_lines<Threads>(keys, 0, n);
}

// The mask of the lanes below this one (read where it is used, not held in a register)
__device__ __forceinline__ uint32_t lanes_below()
{
    uint32_t m;
    asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// The warp's inclusive prefix sum of v over lanes 0 .. lane
__device__ __forceinline__ uint32_t warp_inclusive(uint32_t v)
{
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o)
            v += y;
    }
    return v;
}

// Exclusive prefix sum of v over the warp's lanes; *total gets the sum.
__device__ __forceinline__ uint32_t warp_exclusive(uint32_t v, uint32_t *total)
{
    const uint32_t x = warp_inclusive(v);
    *total = __shfl_sync(0xffffffffu, x, 31);
    return x - v;
}

// Counts keys[lo * Stride], .., keys[(hi - 1) * Stride] that are > 0 and match prefix under mask
// into hist by their digit (key >> shift) & digits; lo a multiple of 4 (16-byte loads where Stride
// is 1). Keys close in value share their high bits, so most keys of a pass can fall in one bin: a
// thread counts a run of keys of the same bin in a register and adds the run once (so that a row
// of equal scores does not put every lane's add on one word). A key that does not match is skipped
// (one branch: most keys of the passes after the first over a whole row, in select_topk); a key
// that matches adds without a branch, the run before to its bin where this key starts another,
// else to the word of its lane index (one per lane index, shared by the warps; nothing reads it),
// and the run's count and bin are selected (the run's branches and their convergence barriers were
// half of the loop's instructions where bins change at almost every key, as scores of random order
// do). The skip stays a branch: as an add to the sink it cost the one-CTA top-k's later passes
// 60-80 us at 64-128 rows of 128K (tests/bench/RESULTS.md). U: 16-byte loads in flight per thread
// (4 for keys in global memory; 1 does for shared memory).
template <int Threads, int Stride, int U = 4>
__device__ __forceinline__ void count_chunk(const uint32_t *keys, int64_t lo, int64_t hi, uint32_t prefix,
                                            uint32_t mask, int shift, uint32_t digits, uint32_t *hist)
{
    __shared__ uint32_t sink[32]; // a lane's add where it ends no run, by lane index: never read
    const uint32_t hist_s = (uint32_t)__cvta_generic_to_shared(hist);
    const uint32_t sink_s = (uint32_t)__cvta_generic_to_shared(sink + threadIdx.x % 32);
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
                if (v == 0u || (v & mask) != prefix) // most keys of the passes after the first
                    continue;
                const uint32_t bin = (v >> shift) & digits;
                const bool other = bin != run_bin;
                shared_add(other ? hist_s + 4u * run_bin : sink_s, run_n); // run_n 0 before the first key
                run_n = other ? 1u : run_n + 1u;
                run_bin = bin;
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
            const uint32_t incl = warp_inclusive(sum), excl = incl - sum;
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
    // one load in flight a lane: index_merge stays at 32 registers, two 1024-thread CTAs an SM (more
    // ahead took 56-58; index_topk, which also holds short rows in registers, has 64)
    emit_range<Threads, Stride, 1, 1>(keys, 0, n, kth, ties, 0u, 0u, emit, scratch + 3);
    return (int)(total < (uint32_t)K ? total : (uint32_t)K);
}

// ---- one CTA, the row held in registers (rows of at most Threads x R keys) ----

// The CTA's exclusive prefix sum of v in thread order; *total gets the sum. wsum: Threads / 32
// words, free on entry and again after the next barrier the caller takes; one barrier inside.
template <int Threads> __device__ __forceinline__ uint32_t block_exclusive(uint32_t v, uint32_t *wsum, uint32_t *total)
{
    static_assert(Threads % 32 == 0 && Threads <= 1024, "a warp's lane reads each warp's sum");
    constexpr int WARPS = Threads / 32;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t incl = warp_inclusive(v);
    if (lane == 31)
        wsum[warp] = incl;
    __syncthreads();
    // every warp scans the warps' sums itself (one load and a warp scan: no second barrier)
    const uint32_t w = lane < WARPS ? wsum[lane] : 0u, wincl = warp_inclusive(w);
    *total = __shfl_sync(0xffffffffu, wincl, 31);
    return __shfl_sync(0xffffffffu, wincl - w, warp) + incl - v;
}

// select_topk's selection (the same set, emitted at the same places) for a row of at most Threads x
// R keys, which the CTA holds in registers (load_keys): thread h keys h R .. h R + R - 1. Its
// time at one row of 8K keys was the one-SM kernel's instructions (59K warp instructions for
// select_topk's four 8-bit passes, each reading the row again with bound tests, and its emit's
// ballots: tests/bench/RESULTS.md); here up to three radix passes of 11, 11 and 10 bits count only
// the registers' keys that still match (a predicated add each; the passes end once the K-th's bin
// holds exactly the keys still wanted), a pass's 2048 bins are scanned by
// every thread at once (two bins each, one block scan), and the emit is one block scan of the
// threads' counts above the K-th and equal to it. A thread adds a run of equal bins among its R
// keys once (a row of equal scores puts one add a thread, not R, on one word). Two histograms
// alternate, so that one is zeroed while the other is scanned. Shared memory: SelectRegsSmem.
struct SelectRegsSmem {
    static constexpr int OutWords = 2 * 2048; // the histograms, free once the emit begins
    uint32_t hist[2][2048];
    uint32_t wsum[32];
    uint32_t found[3]; // the K-th's bin, the keys above that bin, 1 where every key of the bin is in
};
// A row's keys as select_topk_regs holds them: thread h keys h R .. h R + R - 1 of keys[0 .. n), 0
// from n on
template <int Threads, int R>
__device__ __forceinline__ void load_keys(const uint32_t *keys, int64_t n, uint32_t (&v)[R])
{
    static_assert(R % 4 == 0, "16-byte loads (a row of keys starts 16-byte aligned: idx_max_local)");
    const int64_t first = (int64_t)threadIdx.x * R;
    if (first + R <= n) {
#pragma unroll
        for (int j = 0; j < R; j += 4) {
            const uint4 q = *reinterpret_cast<const uint4 *>(keys + first + j);
            v[j] = q.x, v[j + 1] = q.y, v[j + 2] = q.z, v[j + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < R; j++)
            v[j] = first + j < n ? keys[first + j] : 0u;
    }
}

template <int Threads, int R, class Emit>
__device__ int select_topk_regs(const uint32_t (&v)[R], int K, Emit emit, SelectRegsSmem &s)
{
    static_assert(Threads == 1024, "a pass's 2048 bins are two a thread");
    const int64_t first = (int64_t)threadIdx.x * R;
    s.hist[0][threadIdx.x] = 0u, s.hist[0][threadIdx.x + Threads] = 0u; // two bins a thread, as the scans
    __syncthreads();
    uint32_t prefix = 0u, mask = 0u, remaining = (uint32_t)K, above = 0u, total = 0u;
    bool whole = false;
    constexpr int SHIFT[3] = {21, 10, 0};
    constexpr uint32_t DIGITS[3] = {2047u, 2047u, 1023u};
#pragma unroll
    for (int pass = 0; pass < 3; pass++) {
        uint32_t *hist = s.hist[pass & 1];
        const int shift = SHIFT[pass];
        const uint32_t digits = DIGITS[pass];
        { // count: the keys that are > 0 and match the bins chosen so far, a run of one bin added once
            uint32_t run_bin = 0u, run_n = 0u;
#pragma unroll
            for (int j = 0; j < R; j++) {
                // without a branch: a predicated add where a run ends, then the run's count and
                // bin selected (the branches and their convergence barriers were half of these
                // instructions)
                const bool in = v[j] != 0u && (v[j] & mask) == prefix;
                const uint32_t bin = (v[j] >> shift) & digits;
                const bool starts = in && bin != run_bin;
                if (starts && run_n != 0u)
                    atomicAdd(&hist[run_bin], run_n);
                run_n = starts ? 1u : run_n + in;
                run_bin = in ? bin : run_bin;
            }
            if (run_n)
                atomicAdd(&hist[run_bin], run_n);
        }
        __syncthreads();
        if (pass < 2) // the next pass's histogram zeroed (its last reads were the pass before's, three barriers ago)
            s.hist[(pass + 1) & 1][threadIdx.x] = 0u, s.hist[(pass + 1) & 1][threadIdx.x + Threads] = 0u;
        // thread h's bins from the top: 2047 - 2h, 2046 - 2h (bins past the pass's digits hold 0)
        const uint32_t hi = hist[2047 - 2 * threadIdx.x], lo = hist[2046 - 2 * threadIdx.x];
        uint32_t all;
        const uint32_t excl = block_exclusive<Threads>(hi + lo, s.wsum, &all);
        if (pass == 0)
            total = all; // every key but the 0s: the first pass counts them all
        if (excl < remaining && excl + hi >= remaining)
            s.found[0] = 2047u - 2u * threadIdx.x, s.found[1] = excl, s.found[2] = excl + hi == remaining;
        else if (excl + hi < remaining && excl + hi + lo >= remaining)
            s.found[0] = 2046u - 2u * threadIdx.x, s.found[1] = excl + hi, s.found[2] = excl + hi + lo == remaining;
        __syncthreads();
        if (total <= (uint32_t)K) // every key > 0 is in: no K-th (the same in every thread)
            break;
        const uint32_t bin = s.found[0], before = s.found[1];
        remaining -= before;
        above += before;
        prefix |= bin << shift;
        mask |= digits << shift;
        // the bin holds exactly the keys still wanted: they are all in, so the set is every key at
        // or above the bin's lowest value (prefix, its lower bits 0) and the passes left are not
        // needed (at one row of 8K keys the second pass's bin usually holds one key, and a pass
        // took 1.2-1.3 us). Not where prefix is 0 (the bin's keys are then the smallest above 0).
        if (s.found[2] && prefix != 0u) {
            whole = true;
            break;
        }
    }
    // the K-th: with no tie to break where the K-th's bin is whole (every key above prefix - 1 is in)
    const uint32_t kth = total <= (uint32_t)K ? 0u : whole ? prefix - 1u : prefix;
    const uint32_t ties = kth && !whole ? (uint32_t)K - above : 0u; // of the keys equal to kth, this many are in
    // no key equals tie (score_key never gives all ones) when there is no K-th or its bin is whole
    const uint32_t tie = kth != 0u && !whole ? kth : 0xffffffffu;
    uint32_t ca = 0u, ct = 0u;
#pragma unroll
    for (int j = 0; j < R; j++) {
        ca += v[j] > kth;
        ct += v[j] == tie;
    }
    // above and ties before this thread's keys in one scan: each count is at most Threads x R
    static_assert(Threads * R < 65536, "two 16-bit counts in one word");
    uint32_t unused;
    const uint32_t before = block_exclusive<Threads>((ca << 16) | ct, s.wsum, &unused);
    uint32_t tie_before = before & 0xffffu;
    uint32_t at = (before >> 16) + (tie_before < ties ? tie_before : ties);
#pragma unroll
    for (int j = 0; j < R; j++) {
        const bool is_tie = v[j] == tie;
        if (v[j] > kth || (is_tie && tie_before < ties))
            emit((int)at++, first + j);
        tie_before += is_tie;
    }
    __syncthreads(); // every thread past its last read of the row and of wsum, and its emits done (index_topk
                     // reads the positions it placed in shared memory after this)
    return (int)(total < (uint32_t)K ? total : (uint32_t)K);
}

// select_topk_regs of keys[0 .. n), n <= Threads x R, loaded into registers here
template <int Threads, int R, class Emit>
__device__ __forceinline__ int select_topk_loaded(const uint32_t *keys, int64_t n, int K, Emit emit, SelectRegsSmem &s)
{
    uint32_t v[R];
    load_keys<Threads, R>(keys, n, v);
    return select_topk_regs<Threads, R>(v, K, emit, s);
}

// ---- the same selection spread over several CTAs of a row (few rows, long rows) ----

// A row's state in global memory, shared by its CTAs and all zero between calls up to word COUNTS
// (the last CTA to leave zeroes it): words 0 .. PASSES - 1 count the CTAs arrived at each radix
// pass's barrier, word LAST those arrived at the barrier before the emit, LEFT those that left,
// STORED the candidates stored so far, ABOVE the keys above the first pass's bin stored so far,
// GIVEN not 0 where the score kernel counted the first pass's histogram (select_topk_split); from
// word HIST the row-wide histogram of each radix pass (BINS counts each), then from word
// COUNTS each CTA's counts of its chunk's keys above the K-th and equal to it (2 words a CTA), then
// from word cands(max_splits) the row's candidates, Cands (key, position) pairs, then from word
// above(max_splits) the positions of the row's keys above the first pass's bin that chunks of at
// least bit_keys keys hold (fewer than K: the bin holds the K-th); each call writes the ones it
// reads: never zeroed.
template <int RB, int Cands, int K> struct SplitState {
    static constexpr int BINS = 1 << RB, PASSES = (32 + RB - 1) / RB, HIST = 8, COUNTS = HIST + PASSES * BINS;
    static constexpr int LAST = PASSES, LEFT = PASSES + 1, STORED = PASSES + 2, ABOVE = PASSES + 3;
    static constexpr int GIVEN = PASSES + 4; // not 0: the score kernel counted the first pass (HIST)
    // radix pass `pass` reads the key's digits [shift, shift + RB) (the last pass may read fewer)
    static __device__ __forceinline__ int shift(int pass) { return 32 - RB * (pass + 1) > 0 ? 32 - RB * (pass + 1) : 0; }
    static __device__ __forceinline__ uint32_t digits(int pass) { return (1u << (32 - RB * pass - shift(pass))) - 1u; }
    static_assert(GIVEN < HIST, "the counters fit before the histograms");
    __host__ __device__ static constexpr long long cands(int max_splits) { return COUNTS + 2ll * max_splits; }
    __host__ __device__ static constexpr long long above(int max_splits) { return cands(max_splits) + 2ll * Cands; }
    __host__ __device__ static constexpr long long bytes(int max_splits) { return 4ll * (above(max_splits) + K); }
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

// The counts of BINS bins walked from the top bin down, count(j) the count of this thread's j-th
// bin (BINS - 1 - (BINS / Threads) threadIdx.x - j): *bin gets the bin where the running count first
// reaches `remaining`, *before the count of the bins above it, *in_bin its own count; returns the
// count of all bins (when it is below `remaining`, *bin, *before and *in_bin mean nothing). Every CTA
// given the same counts gets the same answer. red: Threads / 32 + 3 words.
template <int Threads, int BINS, class Count>
__device__ __forceinline__ uint32_t find_bin_by(Count count, uint32_t remaining, uint32_t *red, uint32_t *bin,
                                                uint32_t *before, uint32_t *in_bin)
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
        c[j] = count(j);
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

// find_bin_by over the counts g[0 .. BINS) (Global: row-wide counts that other CTAs wrote, read
// through L2; otherwise the CTA's own in shared memory)
template <int Threads, int BINS, bool Global>
__device__ uint32_t find_bin(const uint32_t *g, uint32_t remaining, uint32_t *red, uint32_t *bin, uint32_t *before,
                             uint32_t *in_bin)
{
    const int top = BINS - 1 - BINS / Threads * (int)threadIdx.x;
    return find_bin_by<Threads, BINS>([&](int j) { return Global ? __ldcg(g + top - j) : g[top - j]; }, remaining,
                                      red, bin, before, in_bin);
}

// The first radix pass's row-wide counts that the score kernel gave a row (select_topk_split's
// hist_given: the counts from word HIST of its state St, and the mark at word GIVEN that says they
// are there), this thread's bins as find_bin_by takes them (c[j]: bin BINS - 1 - PER threadIdx.x -
// j), read where the split top-k starts, beside the row's request (index_topk_split): their
// addresses depend on neither the request nor the row's length, so they load in the request's round
// trip instead of two more once the row's key count is known (the counts, then the mark behind
// them). Zero, and nothing read, where hist_given is 0. The values are those select_topk_split
// would read itself: the score kernel wrote them, and no CTA of the row writes the mark or (the mark
// set) the counts before every CTA has left; where the mark is 0 the CTAs add their own counts
// there, and these, which then mean nothing, are not used (the counts are read after the barrier).
template <int Threads, class St> struct GivenCounts {
    static constexpr int PER = St::BINS / Threads;
    uint32_t mark, c[PER];
    __device__ __forceinline__ GivenCounts(const uint32_t *state, int hist_given)
    {
        const int top = St::BINS - 1 - PER * (int)threadIdx.x;
        const bool on = hist_given != 0;
        mark = on ? __ldcg(state + St::GIVEN) : 0u;
#pragma unroll
        for (int j = 0; j < PER; j++)
            c[j] = on ? __ldcg(state + St::HIST + top - j) : 0u;
    }
};

// select_topk's selection (the same set, emitted at the same places) by the S = gridDim.y CTAs of
// a row, blockIdx.y this CTA's part; pad(j) is called for j = min(K, keys > 0) .. K - 1. Each CTA
// takes a contiguous chunk of the row, at least SplitKeys keys (CTAs past the row's end take none,
// but still meet at every barrier). The K-th largest key is found by radix passes of RB bits: each
// CTA counts its chunk in shared memory and adds its counts to the row's histogram of the pass
// (state), a barrier, and every CTA reads the same row-wide counts and picks the same bin.
// Usually the first pass leaves few keys in the chosen bin (the candidates: the first RB bits of a
// key are the score's sign, exponent and top mantissa bits, so a bin is a narrow band of scores):
// when at most Cands, each CTA stores its chunk's candidates (key, position) row-wide, a barrier,
// and every CTA reads all of their keys into shared memory and finishes the radix passes there
// alone; the same keys give every CTA the same K-th (their order, which the stores' atomics decide,
// does not matter), and the candidates before the chunk with the chunk counts published before the
// barrier give each CTA its chunk's place. So two barriers instead of one a pass and one for the
// counts, and the passes after the first read shared memory instead of the row.
// With more candidates the passes go on over the chunks, a barrier each; each CTA keeps its own
// chunk's count of keys above the K-th (from the bins above the chosen one in every pass) and equal
// to it (the chosen bin of the last pass), the CTAs publish those, a last barrier. Either way each
// CTA then emits its chunk with the counts of the chunks before it: the ties are taken in position
// order across the chunks, as in one CTA. In the first case, in a CTA of at least bit_keys keys,
// the read that stores the candidates also stores the positions of the chunk's keys above the bin
// (all of them in), so that the CTA sets a bit for each of its selected keys in shared memory and
// emits by walking the bits: its chunk is read twice in all instead of four times (emit_range's
// count and emit passes stay for smaller chunks, where the bits' barriers and round trips cost more
// than the two reads, for the other cases, and for the one chunk of a row where the cut among the
// K-th's ties falls inside it). A row of at most SplitKeys keys is CTA 0's alone (select_topk); the
// other CTAs return at once and the state is not touched.
// Bins (the plan's index_score_bins) and hist_given (1 or 2): the score kernel may have counted the
// first pass row-wide into the state (index_score's count_bins), marked at word GIVEN: where it did,
// no CTA counts that pass nor meets at its barrier; a CTA counts its own chunk only where the rest
// wants its counts (every key in; more candidates than Cands), and in the gathered case the read that
// stores the candidates counts them (and the keys above the bin), staged in shared memory until one
// atomic places them (2: a test, no staging: every chunk reads its keys again to store them, the
// path of a chunk with more than shared memory holds). Where it did not (the mma.sync kernel; a CTA
// that could overflow its 16-bit counts) the CTAs count.
// discard: each CTA drops its chunk's lines from L2 at the end (discard_lines; the keys are dead).
// state: St::bytes(MaxSplits) bytes, 8-byte aligned; hist: 1 << RB words; red: 3 + 2 * Threads / 32
// words; cand_s: Cands + Cands / 32 words of shared memory, 16-byte aligned. given_counts (Bins, or
// null): the score kernel's counts and mark, read already (GivenCounts, with the same hist_given).
template <int Threads, int RB, int SplitKeys, int Cands, int MaxSplits, int K, bool Bins, class Emit, class Pad>
__device__ void select_topk_split(const uint32_t *keys, int64_t n, int64_t bit_keys, int hist_given, bool discard,
                                  Emit emit, Pad pad, uint32_t *state, uint32_t *hist, uint32_t *red, uint32_t *cand_s,
                                  const GivenCounts<Threads, SplitState<RB, Cands, K>> *given_counts = nullptr)
{
    using St = SplitState<RB, Cands, K>;
    constexpr int BINS = St::BINS, PASSES = St::PASSES;
    static_assert(RB >= 8 && RB <= 12, "a pass's histogram fits in shared memory; select_topk's hist needs 256");
    static_assert(SplitKeys % 4 == 0 && Cands % 4 == 0, "chunks and the candidates' keys on 16-byte boundaries");
    static_assert(K <= 65536 && Cands < 65536, "two counts in the halves of a word: a chunk's candidates (at most "
                                               "Cands) and keys above the bin (below K); the keys above the K-th "
                                               "(below K) and ties (at most Cands) before a chunk");
    __shared__ uint32_t mine_at, up_at; // the places of the chunk's candidates in cands and its keys above the
                                        // first pass's bin in above
    __shared__ uint32_t mine_up;        // how many of each it stored so far (low half, high half)
    __shared__ uint32_t last_out;       // this CTA is the last of the row to leave
    const uint32_t S = gridDim.y, part = blockIdx.y;
    if (n <= SplitKeys) {
        if (part != 0)
            return;
        const int written = select_topk<Threads, 1>(keys, n, K, emit, hist, red);
        for (int j = written + threadIdx.x; j < K; j += Threads)
            pad(j);
        if (discard)
            discard_row<Threads>(keys, n);
        return;
    }
    int64_t chunk = ((n + S - 1) / S + 3) / 4 * 4;
    chunk = chunk < SplitKeys ? SplitKeys : chunk;
    const int64_t lo = (int64_t)part * chunk < n ? (int64_t)part * chunk : n, hi = lo + chunk < n ? lo + chunk : n;
    const uint32_t words = (uint32_t)((hi - lo + 31) / 32); // the chunk's words of a bit a key (the bit emit)
    uint32_t prefix = 0u, mask = 0u, remaining = (uint32_t)K, larger = 0u, total = 0u, mine_above = 0u, mine_tie = 0u;
    uint32_t in_bin = 0u;
    bool all = false;      // at most K keys > 0: every one is in
    bool gathered = false; // the first pass's bin holds at most Cands keys: the rest in shared memory
    bool given = false;    // the score kernel counted the first pass row-wide (hist_given, and its mark)
    for (int pass = 0; pass < PASSES; pass++) {
        const int shift = St::shift(pass);
        const uint32_t digits = St::digits(pass);
        uint32_t bin, before, counted;
        bool from_score = false; // this pass's row-wide counts are the score kernel's (the first, given)
        if constexpr (Bins) {
            if (pass == 0 && hist_given != 0) {
                // the mark and the counts read together; without the mark the counts mean nothing (the
                // other CTAs may be adding theirs) and are read again after the barrier. The same in
                // every CTA: the score kernel wrote them, and the mark stays until every CTA has left.
                uint32_t mark;
                if (given_counts) { // read where the kernel started
                    mark = given_counts->mark;
                    counted = find_bin_by<Threads, BINS>([&](int j) { return given_counts->c[j]; }, remaining, red,
                                                         &bin, &before, &in_bin);
                } else {
                    mark = __ldcg(state + St::GIVEN);
                    counted = find_bin<Threads, BINS, true>(state + St::HIST, remaining, red, &bin, &before, &in_bin);
                }
                given = from_score = mark != 0u;
            }
        }
        // the chunk's own counts of the pass in hist, added row-wide, a barrier, the row's bin; given,
        // the chunk's counts only where the rest wants them
        if (!from_score) {
            count_pass<Threads, BINS, 1>(keys, lo, hi, prefix, mask, shift, digits, hist);
            uint32_t *g = state + St::HIST + pass * BINS;
            for (int i = threadIdx.x; i < BINS; i += Threads)
                if (hist[i])
                    atomicAdd(g + i, hist[i]);
            group_sync(state + pass, S);
            counted = find_bin<Threads, BINS, true>(g, remaining, red, &bin, &before, &in_bin);
        }
        uint32_t s = 0u;
        if (pass == 0) {
            total = counted;
            if (total <= (uint32_t)K) { // the same in every CTA: they read the same counts
                if (from_score)
                    count_pass<Threads, BINS, 1>(keys, lo, hi, prefix, mask, shift, digits, hist);
                for (int i = threadIdx.x; i < BINS; i += Threads)
                    s += hist[i];
                mine_above = block_sum<Threads>(s, red);
                all = true;
                break;
            }
        }
        // given and gathered (below), the gather counts the chunk's keys above the bin
        if (from_score && in_bin > (uint32_t)Cands)
            count_pass<Threads, BINS, 1>(keys, lo, hi, prefix, mask, shift, digits, hist);
        if (!from_score || in_bin > (uint32_t)Cands) {
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
        if (pass == 0 && in_bin <= (uint32_t)Cands) { // the same in every CTA, as above
            gathered = true;
            break;
        }
    }
    uint32_t *counts = state + St::COUNTS;
    uint32_t kth, ties, above0, tie0;
    bool bitmap = false; // the gathered path's emit from the chunk's bits (below)
    if (gathered) {
        // this chunk's candidates (its own count of the bin: the pass's last histogram), stored
        // row-wide from the place a counter gives them
        uint32_t *const key_s = cand_s, *const before_s = cand_s + Cands;
        uint2 *const cands = reinterpret_cast<uint2 *>(state + St::cands(MaxSplits)); // even words: 8-byte aligned
        uint32_t *const up = state + St::above(MaxSplits);
        const bool long_chunk = hi - lo >= bit_keys; // the chunk's emit may take its bits (below)
        if (threadIdx.x == 0) {
            if (!given) {
                mine_at = atomicAdd(state + St::STORED, hist[prefix >> (32 - RB)]);
                // mine_above: the chunk's keys above the bin, which only a long chunk stores (below)
                up_at = long_chunk ? atomicAdd(state + St::ABOVE, mine_above) : 0u;
            }
            mine_up = 0u;
            if (!given)
                counts[2 * part] = mine_above;
        }
        __syncthreads();
        // the candidates, and for a chunk that takes the bit emit below, the positions of the keys
        // above the bin (all of them are in: the bin holds the K-th), which the emit then takes
        // without reading the chunk again. A lane's step of 8 keys marks its candidates and keys
        // above as bits; a lane with any takes its places by one shared atomic and writes them,
        // a candidate's key read again (an L1 hit). (A key's own test and warp-aggregated atomic
        // were ~24 instructions a key: in 256 keys a warp step there is almost always one.)
        // Given the first pass's counts, the chunk's own are not known before this read: its
        // candidates and keys above wait in shared memory (staged: cand_s and hist, free until the
        // barrier below) and take their places row-wide after it, by one atomic each; a chunk with
        // more than those hold (rare: its share of the row's candidates is under the bin's Cands)
        // reads itself again, storing straight to its places.
        uint2 *const stage_c = reinterpret_cast<uint2 *>(cand_s); // 16-byte aligned
        uint32_t *const stage_u = hist;
        // (hist_given 2: none held, a test of that path)
        const uint32_t stage_cn = hist_given == 2 ? 0u : (Cands + Cands / 32) / 2;
        const uint32_t stage_un = hist_given == 2 ? 0u : BINS;
        const uint32_t span = ~mask; // a candidate: 0 < key, key - prefix <= span
        // no key is above all ones; given, every chunk counts its keys above (mine_above)
        const uint32_t bin_top = long_chunk || given ? prefix | span : 0xffffffffu;
        const auto gather = [&](bool staged) {
            steps(lo, hi, (int64_t)Threads * 8, [&](int64_t b, bool checked) {
                uint32_t u[2][4];
#pragma unroll
                for (int j = 0; j < 2; j++)
                    keys4_if<1>(checked, keys, b + ((int64_t)j * Threads + threadIdx.x) * 4, hi, u[j]);
                uint32_t cb = 0u, ub = 0u; // bit 4 j + e: key u[j][e]
#pragma unroll
                for (int j = 0; j < 2; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const uint32_t v = u[j][e];
                        cb |= (uint32_t)(v != 0u && v - prefix <= span) << (4 * j + e);
                        ub |= (uint32_t)(v > bin_top) << (4 * j + e);
                    }
                if ((cb | ub) == 0u)
                    return;
                const uint32_t at = atomicAdd(&mine_up, (uint32_t)__popc(cb) | (uint32_t)__popc(ub) << 16);
                const auto where = [&](uint32_t bits) { // the position of the lowest bit's key
                    const int s = __ffs(bits) - 1;
                    return b + ((int64_t)(s / 4) * Threads + threadIdx.x) * 4 + s % 4;
                };
                // (staged: c counts from 0, in the chunk's stage; else from the chunk's places)
                for (uint32_t c = (staged ? 0u : mine_at) + (at & 0xffffu); cb != 0u; cb &= cb - 1u, c++) {
                    const int64_t i = where(cb);
                    const uint2 v = make_uint2(keys[i], (uint32_t)i);
                    if (!staged)
                        cands[c] = v;
                    else if (c < stage_cn)
                        stage_c[c] = v;
                }
                // (given, a short chunk counts its keys above the bin but has no place for them in up:
                // not stored, in its second read either)
                if (!given || long_chunk)
                    for (uint32_t c = (staged ? 0u : up_at) + (at >> 16); ub != 0u; ub &= ub - 1u, c++) {
                        const uint32_t i = (uint32_t)where(ub);
                        if (!staged)
                            up[c] = i;
                        else if (c < stage_un)
                            stage_u[c] = i;
                    }
            });
        };
        gather(given);
        if (given) {
            __syncthreads();
            const uint32_t got = mine_up, got_c = got & 0xffffu, got_u = got >> 16;
            if (threadIdx.x == 0) {
                mine_at = atomicAdd(state + St::STORED, got_c);
                up_at = long_chunk ? atomicAdd(state + St::ABOVE, got_u) : 0u;
                counts[2 * part] = got_u;
            }
            __syncthreads();
            if (got_c <= stage_cn && (!long_chunk || got_u <= stage_un)) {
                for (uint32_t c = threadIdx.x; c < got_c; c += Threads)
                    cands[mine_at + c] = stage_c[c];
                for (uint32_t c = threadIdx.x; long_chunk && c < got_u; c += Threads)
                    up[up_at + c] = stage_u[c];
            } else {
                if (threadIdx.x == 0)
                    mine_up = 0u; // every thread read it above, before the barrier
                __syncthreads();
                gather(false); // the same keys, so the same counts
            }
        }
        group_sync(state + St::LAST, S);
        const uint32_t mine_n = mine_up & 0xffffu, up_n = mine_up >> 16;
        // the counts of the chunks before this one, loaded now so that they arrive with the candidates
        uint32_t a = 0u, t = 0u;
        for (uint32_t c = threadIdx.x; c < part; c += Threads)
            a += __ldcg(counts + 2 * c);
        // every candidate's key of the row, and a bit for each: before this chunk (a warp's 32
        // consecutive candidates make one word); two loads in flight a thread
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
                if (i < in_bin) {
                    key_s[i] = v[j].x;
                    if (i % 32 == 0)
                        before_s[i / 32] = bits;
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
        // in a) or candidates above it; the ties before it: candidates; m: this chunk's ties (its
        // own block of the candidates)
        uint32_t m = 0u;
        for (uint32_t i = threadIdx.x; i < in_bin; i += Threads) {
            if ((before_s[i / 32] >> (i % 32)) & 1u) {
                a += key_s[i] > kth;
                t += key_s[i] == kth;
            }
            m += i - mine_at < mine_n && key_s[i] == kth;
        }
        // a < K and t <= in_bin <= Cands: one sum of both, in the halves of a word
        const uint32_t at = block_sum<Threads>(a | t << 16, red);
        above0 = at & 0xffffu;
        tie0 = at >> 16;
        m = block_sum<Threads>(m, red);
        // The chunk's selected keys as a bit a key in cand_s (free now: block_sum's barriers follow
        // the last read of key_s): the keys above the bin and the candidates above the K-th, and
        // the chunk's ties where all or none of them are in (the ties are taken in position order,
        // so where the row's cut falls inside this chunk, emit_range ranks them). The emit then
        // walks the bits instead of reading the chunk twice. The same in every thread.
        const bool ties_in = tie0 + m <= ties;
        bitmap = long_chunk && words <= (uint32_t)(Cands + Cands / 32) && (ties_in || tie0 >= ties);
        if (bitmap) {
            for (uint32_t w = threadIdx.x; w < words; w += Threads)
                cand_s[w] = 0u;
            __syncthreads();
            const uint32_t cand_s_a = (uint32_t)__cvta_generic_to_shared(cand_s);
            auto set = [&](uint32_t i) { // i: the key's position in the row
                const uint32_t o = i - (uint32_t)lo;
                shared_or(cand_s_a + 4u * (o / 32), 1u << (o % 32));
            };
            for (uint32_t c = threadIdx.x; c < up_n; c += Threads)
                set(__ldcg(up + up_at + c));
            for (uint32_t c = threadIdx.x; c < mine_n; c += Threads) {
                const uint2 v = __ldcg(cands + mine_at + c);
                if (v.x > kth || (v.x == kth && ties_in))
                    set(v.y);
            }
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
        // (red is free: block_sum's barriers came last; nothing writes it again before the barrier
        // below the emit, so the scan needs no barrier of its own after it)
        uint32_t unused;
        uint32_t j = above0 + (tie0 < ties ? tie0 : ties) + block_exclusive<Threads>(c, red, &unused);
        for (uint32_t k = 0; k < per; k++) {
            uint32_t b = w0 + k < words ? cand_s[w0 + k] : 0u;
            for (; b != 0u; b &= b - 1u)
                emit((int)j++, lo + 32 * (w0 + k) + (__ffs(b) - 1));
        }
    } else {
        // 3 and 2 loads in flight a lane (more spilled under the kernel's 64 registers at DCP = 8):
        // tests/bench/RESULTS.md, 128 x 128K 1-2% faster
        emit_range<Threads, 1, 3, 2>(keys, lo, hi, kth, ties, above0, tie0, emit, red);
    }
    const int written = (int)(total < (uint32_t)K ? total : (uint32_t)K);
    for (int64_t j = written + (int64_t)part * Threads + threadIdx.x; j < K; j += (int64_t)S * Threads)
        pad((int)j);
    if (threadIdx.x == 0) {
        if (left == S - 1)
            __threadfence(); // acquire, after the read of LEFT: every other CTA's reads of the state
                             // came before its arrival; the barrier below orders the zeroing after it
        last_out = left == S - 1;
    }
    __syncthreads(); // also: every thread's emit has read its keys
    if (last_out)
        for (int i = threadIdx.x; i < St::COUNTS; i += Threads)
            state[i] = 0u;
    if (discard)
        discard_lines<Threads>(keys, lo, hi);
}

} // namespace dsa
