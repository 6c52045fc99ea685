// The exact top-k selection of stage B: scores as order-preserving 32-bit keys, the k-th largest
// by radix select, and the selected keys emitted in position order. One total order throughout
// (higher score, then smaller position; NaN below every number), so every rank and run agree.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

// A score as an orderable key: a larger score gives a larger key, -0 and +0 the same key, a NaN
// the key 1 (below every number), and 0 means "no key here" (absent or padding).
__device__ __forceinline__ uint32_t score_key(float s)
{
    if (s != s)
        return 1u;
    const uint32_t b = __float_as_uint(__fadd_rn(s, 0.0f)); // -0 + 0 = +0
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// ReLU that keeps a NaN a NaN (fmaxf would turn it into 0 and hide the host's fault).
__device__ __forceinline__ float relu_nan(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }

// Keys i .. i + 3 (0 past n): one 16-byte load where it can (Stride 1, i a multiple of 4, the row
// 16-byte aligned), so that a thread has several loads in flight.
template <int Stride> __device__ __forceinline__ void keys4(const uint32_t *keys, int64_t i, int64_t n, uint32_t (&u)[4])
{
    if (Stride == 1 && i + 3 < n) {
        const uint4 v = *reinterpret_cast<const uint4 *>(keys + i);
        u[0] = v.x, u[1] = v.y, u[2] = v.z, u[3] = v.w;
        return;
    }
#pragma unroll
    for (int e = 0; e < 4; e++)
        u[e] = i + e < n ? keys[(i + e) * Stride] : 0u;
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

// The K-th largest key among keys[0], keys[Stride], ... (n of them) by four 8-bit radix passes, and
// *above: how many keys are larger than it; *total: how many keys are not 0 (keys of 0 never
// count). When *total <= K there is no K-th: returns 0 after the first pass.
template <int Threads, int Stride>
__device__ uint32_t radix_kth(const uint32_t *keys, int64_t n, int K, uint32_t *hist, uint32_t *scratch,
                              uint32_t *above, uint32_t *total)
{
    uint32_t prefix = 0, mask = 0, remaining = (uint32_t)K, larger = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += Threads)
            hist[i] = 0;
        __syncthreads();
        // keys close in value share their high bytes, so most keys of a pass can fall in one bin: a
        // thread counts a run of keys of the same bin in a register and adds the run once
        constexpr int U = 4; // 16-byte loads in flight per thread
        uint32_t run_bin = 0u, run_n = 0u;
        for (int64_t base = 0; base < n; base += (int64_t)Threads * 4 * U) {
            uint32_t u[U][4];
#pragma unroll
            for (int j = 0; j < U; j++)
                keys4<Stride>(keys, base + ((int64_t)j * Threads + threadIdx.x) * 4, n, u[j]);
#pragma unroll
            for (int j = 0; j < U; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if (u[j][e] == 0u || (u[j][e] & mask) != prefix)
                        continue;
                    const uint32_t bin = (u[j][e] >> shift) & 255u;
                    if (bin != run_bin && run_n) {
                        atomicAdd(&hist[run_bin], run_n);
                        run_n = 0u;
                    }
                    run_bin = bin;
                    run_n++;
                }
        }
        if (run_n)
            atomicAdd(&hist[run_bin], run_n);
        __syncthreads();
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

// The top K of n candidates keys[i * Stride] given in ascending position order: the keys above
// the K-th largest, and of the keys equal to it the ones of smallest position, passed in
// ascending position order to emit(j, i) for j = 0, 1, ...; returns how many (min(K, number of
// keys > 0)). Keys of 0 are no candidates. Each warp takes one contiguous run of the row: it counts
// its keys above the K-th and equal to it, the block adds up the counts of the warps before, and
// each warp then emits its run in order with warp scans (no block-wide scan per element).
template <int Threads, int Stride, class Emit>
__device__ int select_topk(const uint32_t *keys, int64_t n, int K, Emit emit, uint32_t *hist, uint32_t *scratch)
{
    constexpr int WARPS = Threads / 32;
    uint32_t above = 0, total = 0;
    const uint32_t kth = radix_kth<Threads, Stride>(keys, n, K, hist, scratch, &above, &total);
    const uint32_t ties = kth ? (uint32_t)K - above : 0u; // of the keys equal to kth, this many are in
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // runs of 128 keys a step: lane holds keys 4 lane .. 4 lane + 3 of the step (ascending)
    const int64_t run = ((n + WARPS - 1) / WARPS + 127) / 128 * 128, lo = warp * run, hi = lo + run < n ? lo + run : n;
    uint32_t n_above = 0, n_tie = 0;
    for (int64_t b = lo; b < hi; b += 128) {
        uint32_t u[4];
        keys4<Stride>(keys, b + 4 * lane, hi, u);
        uint32_t ca = 0, ct = 0;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            ca += u[e] != 0u && u[e] > kth;
            ct += kth != 0u && u[e] == kth;
        }
        uint32_t ta, tt;
        warp_exclusive(ca, &ta);
        warp_exclusive(ct, &tt);
        n_above += ta;
        n_tie += tt;
    }
    if (lane == 0) {
        scratch[3 + warp] = n_above;
        scratch[3 + WARPS + warp] = n_tie;
    }
    __syncthreads();
    uint32_t above_before = 0, tie_before = 0;
    for (int v = 0; v < warp; v++) {
        above_before += scratch[3 + v];
        tie_before += scratch[3 + WARPS + v];
    }
    // ties are taken in position order: the warps before took min(ties, their ties) of them
    uint32_t at = above_before + (tie_before < ties ? tie_before : ties);
    for (int64_t b = lo; b < hi; b += 128) {
        uint32_t u[4];
        keys4<Stride>(keys, b + 4 * lane, hi, u);
        uint32_t ct = 0;
#pragma unroll
        for (int e = 0; e < 4; e++)
            ct += kth != 0u && u[e] == kth;
        uint32_t tt, ts;
        uint32_t tie_rank = tie_before + warp_exclusive(ct, &tt); // ties before this lane's first
        bool sel[4];
        uint32_t cs = 0;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const bool is_tie = kth != 0u && u[e] == kth;
            sel[e] = (u[e] != 0u && u[e] > kth) || (is_tie && tie_rank < ties);
            tie_rank += is_tie;
            cs += sel[e];
        }
        uint32_t j = at + warp_exclusive(cs, &ts);
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (sel[e])
                emit((int)j++, b + 4 * lane + e);
        at += ts;
        tie_before += tt;
    }
    __syncthreads(); // scratch is the caller's again
    return (int)(total < (uint32_t)K ? total : (uint32_t)K);
}

} // namespace dsa
