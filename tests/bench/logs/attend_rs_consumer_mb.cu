// Microbenchmark (throwaway instrument, not part of the product; issue 15): one consumer warpgroup
// of the 16-head transposed sparse MLA loop, alone (no producer, no global memory in the loop), per
// 64-key tile, in two forms:
//   mode 0 (ss, today's): the key tile in bf16 in shared memory (core matrices, 576 dims), S^T = K
//     Q^T by 36 m64n16k16 products with both operands from shared memory, the column maxima and the
//     softmax, P^T (bf16) into the tile's rope columns, O^T += V^T P^T by 32 products (V^T read
//     M-major from the tile): what dsa_wgmma_t.cuh's consumer does a tile.
//   mode 1 (rs): the raw fp8_ds_mla entries in shared memory (656 bytes a key: 512 e4m3, 4 fp32
//     scales, 64 bf16 rope dims), nothing dequantised ahead: the consumer reads its A fragments of
//     S^T from the raw rows (the latent dims permuted so that a thread's four k-steps are one 16-byte
//     read a row), converts them exactly to f16 (one cvt a pair), multiplies by Q^T in f16 from
//     shared memory into four accumulators (one a 128-dim scale block) plus the rope step in bf16,
//     scales them by each key's scales; then P' = P x scale per block in f16 (four copies of P^T),
//     and O^T += V^T P'^T with V^T's A fragments built from the raw rows (the output dims permuted
//     so that a thread's 16 dims of a key are one 16-byte read; a byte of two keys paired by PRMT,
//     then one cvt a pair).
// Each with one consumer group (tile u in buffer u % 2 / u % 4: the one-consumer layout) and with
// two on alternate tiles (today's 16-head consumers), 32 tiles, the tiles prefilled once with finite
// values; thread 0 of each CTA times the loop with clock64; the median over 132 CTAs (one an SM) is
// printed as cycles a tile. The values are not checked: a timing of the instruction stream and the
// tensor cores. Then the ring itself: a producer warp gathers the benches' random entries by
// cp.async into 4 raw tiles (mbarriers full / empty), one rs group consumes them, 128 CTAs of 32
// tiles (128 rows) or 16 (64 rows in 2 splits), L2 flushed before each call, against the gather
// alone and a copy of the same bytes. Together they decide whether a ring of raw tiles with a
// consumer that converts its own operands (exact f16 keys: a numerics change, RESULTS.md) can beat
// the bf16 tiles the producers write today (16 heads x 64 / 128 rows: 53 / 89.6 us).
// nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I kernels -o /tmp/rsmb tests/bench/logs/attend_rs_consumer_mb.cu && /tmp/rsmb
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>
#include <cuda_runtime.h>
#include "mb_timing.cuh"
#define DSA_ATTEND_SEGMENT 2048
#include "dsa_wgmma_t.cuh" // wgmma_n16, wg_desc_at, st_shared_u16

using namespace dsa;

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

constexpr int HB = 16, KT = 64, LAT = 512, KV = 576, NT = 32, ENTRY = 656, SCALE_OFF = 512, ROPE_OFF = 528;
constexpr uint32_t SBO = KV / 8 * 128;          // mode 0: 8-row groups of a Q or K tile
constexpr int TILE0 = KT * KV * 2;              // mode 0: a bf16 key tile
constexpr int RAW = KT * ENTRY;                 // mode 1: a raw tile
constexpr int QLAT = HB * LAT * 2, QROPE = HB * 64 * 2, PCOPY = HB * KT * 2;
constexpr int XCH = 4 * HB * 4;                 // a group's column maxima: [4 warps][HB] floats
// shared memory of G consumer groups: mode 0 two bf16 tiles (a group's own of two), Q, the maxima;
// mode 1 four raw tiles, Q's latent (f16) and rope (bf16) dims, each group's four P'^T, the maxima
template <int Mode, int G> constexpr int smem_bytes = Mode == 0 ? 2 * TILE0 + HB * KV * 2 + G * XCH
                                                               : 4 * RAW + QLAT + QROPE + G * (4 * PCOPY + XCH);

// D += A B, m64 n16 k16, A from registers (f16 or bf16 pairs), B by descriptor (K-major)
template <bool F16> __device__ __forceinline__ void wgmma_rs_n16(float (&d)[8], const uint32_t (&a)[4], uint64_t b)
{
    if constexpr (F16)
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %13, 0;\n\t"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 " DSA_WG_REGS8
                     ", {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n\t}"
                     : DSA_WG_D8(0)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
    else
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %13, 0;\n\t"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 " DSA_WG_REGS8
                     ", {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n\t}"
                     : DSA_WG_D8(0)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
// the low and the high two e4m3 bytes of w to f16x2 (exact), the halves taken as register halves
__device__ __forceinline__ void f16x2_of_e4m3x4(uint32_t w, uint32_t &lo, uint32_t &hi)
{
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.rn.f16x2.e4m3x2 %0, l;\n\tcvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
}
__device__ __forceinline__ uint32_t f16x2_of(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ uint4 lds128(uint32_t addr)
{
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
__device__ __forceinline__ uint32_t lds32(uint32_t addr)
{
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
}
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

// the column maxima of the group's S^T (rows r0, r0 + 8 of each warp, heads h(2 j + e)), through
// xch, and per head the exponentials; returns p (8 values: keys r0 / r0 + 8 x the thread's 4 heads)
// and rescales O^T by the correction, as the kernel's softmax does
template <int Bar>
__device__ __forceinline__ void softmax(float (&s)[8], float *xch, float (&m)[4], float (&l)[4], float (&o)[8][8], int wl, int g,
                                        int t4)
{
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float mx = fmaxf(s[4 * j + e], s[4 * j + 2 + e]);
#pragma unroll
            for (int off = 4; off < 32; off *= 2)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            if (g == 0)
                xch[wl * HB + 8 * j + 2 * t4 + e] = mx;
        }
    named_barrier_n<Bar, 128>();
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int h = 2 * j + e, head = 8 * j + 2 * t4 + e;
            float mn = m[h];
#pragma unroll
            for (int w = 0; w < 4; w++)
                mn = fmaxf(mn, xch[w * HB + head]);
            const float c = __expf(m[h] - mn);
            m[h] = mn;
            s[4 * j + e] = __expf(s[4 * j + e] - mn);
            s[4 * j + 2 + e] = __expf(s[4 * j + 2 + e] - mn);
            l[h] = l[h] * c + s[4 * j + e] + s[4 * j + 2 + e];
#pragma unroll
            for (int b = 0; b < 8; b++)
                o[b][4 * j + e] *= c, o[b][4 * j + 2 + e] *= c;
        }
}

// group wg's barrier (1 + wg, an immediate), its softmax, and its state at the start and the end
__device__ __forceinline__ void group_sync(int wg)
{
    if (wg == 0)
        named_barrier_n<1, 128>();
    else
        named_barrier_n<2, 128>();
}
__device__ __forceinline__ void group_softmax(int wg, float (&s)[8], float *xch, float (&m)[4], float (&l)[4], float (&o)[8][8],
                                              int wl, int g, int t4)
{
    if (wg == 0)
        softmax<1>(s, xch, m, l, o, wl, g, t4);
    else
        softmax<2>(s, xch, m, l, o, wl, g, t4);
}
__device__ __forceinline__ void state_init(float (&o)[8][8], float (&m)[4], float (&l)[4])
{
#pragma unroll
    for (int b = 0; b < 8; b++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            o[b][i] = 0.0f;
#pragma unroll
    for (int h = 0; h < 4; h++)
        m[h] = -1e30f, l[h] = 0.0f;
}
__device__ __forceinline__ float state_sum(const float (&o)[8][8], const float (&l)[4])
{
    float acc = l[0] + l[1] + l[2] + l[3];
#pragma unroll
    for (int b = 0; b < 8; b++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc += o[b][i];
    return acc;
}

// One raw tile (at shared address raw: KT entries of ENTRY bytes) through the rs consumer of group
// wg: S^T from the raw rows (f16, four scale blocks, the rope in bf16), the softmax, P' = P x scale
// in f16 (four copies of P^T at pcopy), O^T += V^T P'^T with V^T built from the raw rows
template <int WG>
__device__ __forceinline__ void rs_tile(uint32_t raw, uint32_t qlat, uint32_t qrope, uint32_t pcopy, float *xch, int wl,
                                        int g, int t4, int r0, float (&o)[8][8], float (&m)[4], float (&l)[4])
{
    constexpr int wg = WG;
    constexpr uint32_t QSBO = LAT / 8 * 128, RSBO = 64 / 8 * 128; // Q's latent and rope tiles: 8-head groups
    constexpr uint32_t PL = HB / 8 * 128;                          // P'^T: 8-key groups (K) apart
    const uint32_t row0 = raw + r0 * ENTRY, row1 = row0 + 8 * ENTRY;
    float acc[5][8];
#pragma unroll
    for (int b = 0; b < 5; b++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[b][i] = 0.0f;
    // S^T, two halves of the latent dims (two scale blocks each, 16 k-steps: 64 A registers),
    // then the rope's 4 k-steps (bf16 from the raw rows)
#pragma unroll
    for (int half = 0; half < 2; half++) {
        uint32_t a[16][4];
#pragma unroll
        for (int q = 0; q < 4; q++) { // 4 k-steps a 16-byte read a row: dims 64 (4 half + q) + 16 t4 ..
            const uint32_t off = 64u * (4 * half + q) + 16u * t4;
            const uint4 x0 = lds128(row0 + off), x1 = lds128(row1 + off);
            const uint32_t w0[4] = {x0.x, x0.y, x0.z, x0.w}, w1[4] = {x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                f16x2_of_e4m3x4(w0[k], a[4 * q + k][0], a[4 * q + k][2]);
                f16x2_of_e4m3x4(w1[k], a[4 * q + k][1], a[4 * q + k][3]);
            }
        }
#pragma unroll
        for (int b = 0; b < 2; b++)
            wg_pin(acc[2 * half + b]);
        wgmma_fence();
        const uint64_t qd = wg_desc(qlat, 128u, QSBO);
#pragma unroll
        for (int ks = 0; ks < 16; ks++)
            wgmma_rs_n16<true>(acc[2 * half + ks / 8], a[ks], wg_desc_at(qd, 16u * (16 * half + ks)));
        wgmma_commit();
        wgmma_wait();
#pragma unroll
        for (int b = 0; b < 2; b++)
            wg_pin(acc[2 * half + b]);
    }
    {
        uint32_t a[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const uint32_t off = ROPE_OFF + 32u * ks + 4u * t4;
            a[ks][0] = lds32(row0 + off), a[ks][1] = lds32(row1 + off);
            a[ks][2] = lds32(row0 + off + 16), a[ks][3] = lds32(row1 + off + 16);
        }
        wg_pin(acc[4]);
        wgmma_fence();
        const uint64_t rd = wg_desc(qrope, 128u, RSBO);
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
            wgmma_rs_n16<false>(acc[4], a[ks], wg_desc_at(rd, 16u * ks));
        wgmma_commit();
        wgmma_wait();
        wg_pin(acc[4]);
    }
    // S = sum of the blocks times each key's scale, plus the rope
    const uint4 sc0 = lds128(row0 + SCALE_OFF), sc1 = lds128(row1 + SCALE_OFF);
    const float c0[4] = {__uint_as_float(sc0.x), __uint_as_float(sc0.y), __uint_as_float(sc0.z), __uint_as_float(sc0.w)};
    const float c1[4] = {__uint_as_float(sc1.x), __uint_as_float(sc1.y), __uint_as_float(sc1.z), __uint_as_float(sc1.w)};
    float s[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const bool second = (i / 2) % 2; // rows r0 (i % 4 < 2) and r0 + 8
        float v = acc[4][i];
#pragma unroll
        for (int b = 0; b < 4; b++)
            v += (second ? c1[b] : c0[b]) * acc[b][i];
        s[i] = v;
    }
    group_softmax(wg, s, xch, m, l, o, wl, g, t4);
    // P' = P x scale of block b, f16, four copies of P^T (K-major: 8-key groups PL apart)
#pragma unroll
    for (int cb = 0; cb < 4; cb++) {
        const uint32_t pt = pcopy + cb * PCOPY + 2u * ((r0 / 8) * (HB / 8) * 64 + ((2 * t4) / 8) * 64 + ((2 * t4) % 8) * 8 + r0 % 8);
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const uint32_t p01 = f16x2_of(s[4 * j + e] * c0[cb], s[4 * j + 2 + e] * c1[cb]);
                st_shared_u16(pt + 2u * (64 * j + 8 * e), (uint16_t)p01);
                st_shared_u16(pt + 2u * (64 * j + 8 * e + (HB / 8) * 64), (uint16_t)(p01 >> 16));
            }
    }
    fence_proxy_async();
    group_sync(wg);
    // O^T += V^T P'^T: a thread's 16 output dims of a key at bytes 16 (8 wl + g) of its row
    // (dim 2 b + half of them: block b's rows r0 and r0 + 8), keys 2 t4 + {0, 1, 8, 9} of
    // each k-step; two k-steps at a time (64 A registers)
#pragma unroll
    for (int kh = 0; kh < 2; kh++) {
        uint32_t a[2][8][4];
#pragma unroll
        for (int k2 = 0; k2 < 2; k2++) {
            const int kk = 2 * kh + k2, key = 16 * kk + 2 * t4;
            const uint32_t off = 16u * (8 * wl + g);
            const uint4 x0 = lds128(raw + key * ENTRY + off), x1 = lds128(raw + (key + 1) * ENTRY + off);
            const uint4 x8 = lds128(raw + (key + 8) * ENTRY + off), x9 = lds128(raw + (key + 9) * ENTRY + off);
            const uint32_t v0[4] = {x0.x, x0.y, x0.z, x0.w}, v1[4] = {x1.x, x1.y, x1.z, x1.w};
            const uint32_t v8[4] = {x8.x, x8.y, x8.z, x8.w}, v9[4] = {x9.x, x9.y, x9.z, x9.w};
#pragma unroll
            for (int b = 0; b < 8; b++) {
                // bytes 2 b, 2 b + 1 of word b / 2 (low or high half) of both keys
                const uint32_t sel = (b % 2) ? 0x7362u : 0x5140u;
                const uint32_t lo = prmt(v0[b / 2], v1[b / 2], sel), hi = prmt(v8[b / 2], v9[b / 2], sel);
                f16x2_of_e4m3x4(lo, a[k2][b][0], a[k2][b][1]); // dims 2 b, 2 b + 1 (rows r0, r0 + 8), keys 2 t4, + 1
                f16x2_of_e4m3x4(hi, a[k2][b][2], a[k2][b][3]); // keys 2 t4 + 8, + 9
            }
        }
#pragma unroll
        for (int b = 0; b < 8; b++)
            wg_pin(o[b]);
        wgmma_fence();
#pragma unroll
        for (int k2 = 0; k2 < 2; k2++) {
            const int kk = 2 * kh + k2;
#pragma unroll
            for (int b = 0; b < 8; b++) {
                const uint64_t pb = wg_desc(pcopy + (b / 2) * PCOPY, PL, 128u);
                wgmma_rs_n16<true>(o[b], a[k2][b], wg_desc_at(pb, 2u * PL * kk / 16));
            }
        }
        wgmma_commit();
        wgmma_wait();
#pragma unroll
        for (int b = 0; b < 8; b++)
            wg_pin(o[b]);
    }
}

// G consumer groups of 128 threads; group wg takes tiles u = wg, wg + G, ... (as dsa_wgmma_t.cuh's
// two groups do), its own O^T, m, l, maxima and (mode 1) P'^T; group barrier 1 + wg
template <int Mode, int G, int WG> __device__ __forceinline__ void group_loop(uint8_t *smem, long long &t_start, float (&o)[8][8], float (&l)[4]);
template <int Mode, int G> __global__ void __launch_bounds__(128 * G, 1) consumer(long long *cycles, float *sink)
{
    extern __shared__ __align__(16) uint8_t smem[];
    const int tid = threadIdx.x;
    // finite fill: bf16 / f16 / e4m3 codes of small magnitude, scales 1
    constexpr int bytes = smem_bytes<Mode, G>;
    for (int i = tid * 4; i < bytes; i += 128 * G * 4)
        *reinterpret_cast<uint32_t *>(smem + i) = 0x3a303a30u ^ (uint32_t)(i * 2654435761u & 0x00070007u);
    if constexpr (Mode == 1)
        for (int i = tid; i < 4 * KT; i += 128 * G) {
            float *sc = reinterpret_cast<float *>(smem + (i / KT) * RAW + (i % KT) * ENTRY + SCALE_OFF);
            sc[0] = sc[1] = sc[2] = sc[3] = 1.0f;
        }
    fence_proxy_async(); // the tiles and Q, read by the tensor cores
    __syncthreads();
    float o[8][8], l[4];
    long long t_start = 0;
    const int wg = tid / 128;
    if (G == 1 || wg == 0)
        group_loop<Mode, G, 0>(smem, t_start, o, l);
    else
        group_loop<Mode, G, 1>(smem, t_start, o, l);
    __syncthreads();
    const long long t = clock64() - t_start;
    sink[blockIdx.x * 128 * G + tid] = state_sum(o, l);
    if (tid == 0)
        cycles[blockIdx.x] = t;
}

template <int Mode, int G, int WG>
__device__ __forceinline__ void group_loop(uint8_t *smem, long long &t_start, float (&o)[8][8], float (&l)[4])
{
    constexpr int wg = WG;
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4, wl = warp;
    const int r0 = 16 * wl + g;
    float m[4];
    state_init(o, m, l);
    const uint32_t base = smem_addr(smem);
    t_start = clock64();
    if constexpr (Mode == 0) {
        float *xch = reinterpret_cast<float *>(smem + 2 * TILE0 + HB * KV * 2 + wg * XCH);
        const uint32_t qb0 = base + 2 * TILE0;
#pragma unroll 1
        for (int u = wg; u < NT; u += G) {
            uint32_t kt = base + (u % 2) * TILE0, qb = qb0;
            asm volatile("" : "+r"(kt), "+r"(qb));
            const uint32_t pt = kt + 2u * ((r0 / 8) * (KV / 8) * 64 + (LAT / 8 + (2 * t4) / 8) * 64 + ((2 * t4) % 8) * 8 + r0 % 8);
            float s[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                s[i] = 0.0f;
            wg_pin(s);
            wgmma_fence();
            const uint64_t ka = wg_desc(kt, 128u, SBO), qd = wg_desc(qb, 128u, SBO);
#pragma unroll
            for (int ks = 0; ks < KV / 16; ks++)
                wgmma_n16<0, 0>(s, wg_desc_at(ka, 16u * ks), wg_desc_at(qd, 16u * ks));
            wgmma_commit();
            wgmma_wait();
            wg_pin(s);
            group_softmax(wg, s, xch, m, l, o, wl, g, t4);
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const uint32_t p01 = bf16x2(s[4 * j + e], s[4 * j + 2 + e]);
                    st_shared_u16(pt + 2u * (64 * j + 8 * e), (uint16_t)p01);
                    st_shared_u16(pt + 2u * (64 * j + 8 * e + KV / 8 * 64), (uint16_t)(p01 >> 16));
                }
            fence_proxy_async();
            group_sync(wg);
#pragma unroll
            for (int b = 0; b < 8; b++)
                wg_pin(o[b]);
            wgmma_fence();
            const uint64_t va = wg_desc(kt, SBO, 128u), pb = wg_desc(kt + (uint32_t)(LAT / 8 * 128), SBO, 128u);
#pragma unroll
            for (int kk = 0; kk < KT / 16; kk++)
#pragma unroll
                for (int b = 0; b < 8; b++)
                    wgmma_n16<0, 1>(o[b], wg_desc_at(va, (1024u * b + 2u * SBO * kk) / 16), wg_desc_at(pb, 2u * SBO * kk / 16));
            wgmma_commit();
            wgmma_wait();
#pragma unroll
            for (int b = 0; b < 8; b++)
                wg_pin(o[b]);
        }
    } else {
        const uint32_t qlat = base + 4 * RAW, qrope = qlat + QLAT, pcopy = qrope + QROPE + wg * (4 * PCOPY + XCH);
        float *xch = reinterpret_cast<float *>(smem + 4 * RAW + QLAT + QROPE + wg * (4 * PCOPY + XCH) + 4 * PCOPY);
#pragma unroll 1
        for (int u = wg; u < NT; u += G) {
            uint32_t raw = base + (u % 4) * RAW;
            asm volatile("" : "+r"(raw));
            rs_tile<WG>(raw, qlat, qrope, pcopy, xch, wl, g, t4, r0, o, m, l);
        }
    }
}

// ---- the ring: a producer warp gathers raw entries by cp.async into 4 raw tiles (full[s] completes
// on its 32 lanes' copies: cp.async.mbarrier.arrive.noinc), G consumer groups (the rs consumer)
// take alternate tiles and free them (empty[s], 128 arrivals), over the benches' access pattern
// (each CTA a row's 2048 keys, or half of them for 64 rows x 2 splits), L2 flushed before each
// call. Compute = false: the consumers only wait and free (the ring's gather alone).
constexpr int LIST_MAX = 2048;
template <int G> constexpr int ring_smem = 4 * RAW + QLAT + QROPE + G * (4 * PCOPY + XCH) + LIST_MAX * 4 + 8 * 8;
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_arrive(uint32_t bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
template <int G, bool Compute, int WG>
__device__ __forceinline__ void ring_consumer(uint8_t *smem, uint32_t base, uint32_t qlat, uint32_t qrope, int tiles,
                                              uint32_t bars, float *sink)
{
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32, g = lane / 4, t4 = lane % 4, wl = warp, r0 = 16 * wl + g;
    const uint32_t pcopy = qrope + QROPE + WG * (4 * PCOPY + XCH);
    float *xch = reinterpret_cast<float *>(smem + 4 * RAW + QLAT + QROPE + WG * (4 * PCOPY + XCH) + 4 * PCOPY);
    float o[8][8], m[4], l[4];
    state_init(o, m, l);
#pragma unroll 1
    for (int u = WG; u < tiles; u += G) {
        const int sl = u % 4;
        mbar_wait(bars + 8 * sl, (u >> 2) & 1);
        if constexpr (Compute) {
            uint32_t raw = base + sl * RAW;
            asm volatile("" : "+r"(raw));
            rs_tile<WG>(raw, qlat, qrope, pcopy, xch, wl, g, t4, r0, o, m, l);
        }
        mbar_arrive(bars + 8 * (4 + sl));
    }
    sink[blockIdx.x * 128 * G + WG * 128 + t] = state_sum(o, l);
}

template <int G, bool Compute>
__global__ void __launch_bounds__(128 * G + 32, 1) ring(const uint8_t *cache, const int *slots, int tiles, float *sink)
{
    extern __shared__ __align__(16) uint8_t smem[];
    const int tid = threadIdx.x, wgi = tid / 128;
    const uint32_t base = smem_addr(smem), qlat = base + 4 * RAW, qrope = qlat + QLAT;
    int *list = reinterpret_cast<int *>(smem + 4 * RAW + QLAT + QROPE + G * (4 * PCOPY + XCH));
    const uint32_t bars = smem_addr(list + LIST_MAX); // full[4] then empty[4]
    for (int i = tid * 4; i < QLAT + QROPE + G * (4 * PCOPY + XCH); i += (128 * G + 32) * 4)
        *reinterpret_cast<uint32_t *>(smem + 4 * RAW + i) = 0x3a303a30u ^ (uint32_t)(i * 2654435761u & 0x00070007u);
    if (tid == 0) {
        for (int b = 0; b < 8; b++)
            mbar_init(bars + 8 * b, b < 4 ? 32 : 128); // full: the producer's lanes; empty: a group's threads
        mbar_init_fence();
    }
    fence_proxy_async(); // Q, read by the tensor cores
    __syncthreads();
    if (wgi == G) { // the producer warp: lane l copies keys l and l + 32 of each tile, 41 chunks each
        const int lane = tid % 32;
        for (int i = lane; i < tiles * KT; i += 32)
            list[i] = slots[(size_t)blockIdx.x * tiles * KT + i];
        __syncwarp();
#pragma unroll 1
        for (int u = 0; u < tiles; u++) {
            const int sl = u % 4;
            if (u >= 4)
                mbar_wait(bars + 8 * (4 + sl), ((u >> 2) - 1) & 1);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const int j = lane + 32 * k;
                const uint8_t *src = cache + (int64_t)list[u * KT + j] * ENTRY;
                const uint32_t dst = base + sl * RAW + j * ENTRY;
#pragma unroll
                for (int c = 0; c < ENTRY / 16; c++)
                    cp_async16(dst + 16 * c, src + 16 * c);
            }
            cp_async_arrive(bars + 8 * sl);
        }
        return;
    }
    static_assert(G == 1, "one consumer group: with two and the producer warp (9 warps) a thread has 168 registers, "
                          "and the group's code needs ~190");
    ring_consumer<G, Compute, 0>(smem, base, qlat, qrope, tiles, bars, sink);
}

// the benches' pattern: each row its own 2048 distinct tokens of its own 16384-token request, 64-token
// blocks of a random block table; 128 CTAs: a row each (rows = 128) or half a row's keys (rows = 64,
// keys k % 2 == split, as the attend kernel's splits take them)
int run_ring(int rows)
{
    const int SEQ = 16384, BS = 64, K = 2048, blocks = SEQ / BS, ctas = 128, per = rows * K / ctas, tiles = per / KT;
    std::mt19937 rng(1);
    std::vector<int> table(rows * blocks), tok(SEQ), slots((size_t)rows * K);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    for (int r = 0; r < rows; r++) {
        std::iota(tok.begin(), tok.end(), 0);
        std::shuffle(tok.begin(), tok.end(), rng);
        for (int k = 0; k < K; k++) {
            const int c = rows == ctas ? r : 2 * r + k % 2, i = rows == ctas ? k : k / 2;
            slots[(size_t)c * per + i] = table[r * blocks + tok[k] / BS] * BS + tok[k] % BS;
        }
    }
    uint8_t *cache;
    int *ds;
    float *sink;
    uint4 *fl;
    const size_t cb = (size_t)rows * SEQ * ENTRY, fln = (256u << 20) / 16;
    CK(cudaMalloc(&cache, cb));
    CK(cudaMemset(cache, 1, cb));
    CK(cudaMalloc(&ds, slots.size() * 4));
    CK(cudaMemcpy(ds, slots.data(), slots.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&sink, ctas * 256 * 4));
    CK(cudaMalloc(&fl, fln * 16));
    CK(cudaFuncSetAttribute(ring<1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_smem<1>));
    CK(cudaFuncSetAttribute(ring<1, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_smem<1>));
    const double bytes = (double)rows * K * ENTRY;
    constexpr int s1 = ring_smem<1>;
    const float g1 = timed([&] { ring<1, false><<<ctas, 160, s1>>>(cache, ds, tiles, sink); }, fl, fln);
    CK(cudaGetLastError());
    const float c1 = timed([&] { ring<1, true><<<ctas, 160, s1>>>(cache, ds, tiles, sink); }, fl, fln);
    CK(cudaGetLastError());
    uint8_t *dst;
    CK(cudaMalloc(&dst, (size_t)bytes));
    const float cp = timed([&] { cudaMemcpyAsync(dst, cache, (size_t)bytes, cudaMemcpyDeviceToDevice); }, fl, fln);
    CK(cudaGetLastError());
    printf("ring, 16 heads x %d rows (%d CTAs x %d tiles), L2 flushed, median of 20: gather only %.1f us | one rs group %.1f us, "
           "key bytes %.0f GB/s, %.2f of the copy's read + write (%.1f us for the same bytes)\n",
           rows, ctas, tiles, g1, c1, bytes / c1 * 1e-3, (bytes / c1) / (2 * bytes / cp), cp);
    cudaFree(cache), cudaFree(ds), cudaFree(sink), cudaFree(fl), cudaFree(dst);
    return 0;
}

template <int Mode, int G> int run(const char *name)
{
    constexpr int smem = smem_bytes<Mode, G>;
    const int ctas = 132;
    long long *cyc;
    float *sink;
    CK(cudaMalloc(&cyc, ctas * sizeof(long long)));
    CK(cudaMalloc(&sink, ctas * 128 * G * sizeof(float)));
    CK(cudaFuncSetAttribute(consumer<Mode, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    std::vector<long long> best;
    for (int rep = 0; rep < 5; rep++) {
        consumer<Mode, G><<<ctas, 128 * G, smem>>>(cyc, sink);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<long long> h(ctas);
        CK(cudaMemcpy(h.data(), cyc, ctas * sizeof(long long), cudaMemcpyDeviceToHost));
        std::sort(h.begin(), h.end());
        best.push_back(h[ctas / 2]);
    }
    std::sort(best.begin(), best.end());
    printf("%s: %lld cycles for %d tiles, %.0f a tile (median CTA, median of 5 launches; smem %d B)\n", name, best[2], NT,
           (double)best[2] / NT, smem);
    CK(cudaFree(cyc));
    CK(cudaFree(sink));
    return 0;
}

int main()
{
    if (run<0, 1>("mode 0 ss, one group (bf16 tiles: the one-consumer layout's consumer)") ||
        run<0, 2>("mode 0 ss, two groups on alternate tiles (today's 16-head consumers)") ||
        run<1, 1>("mode 1 rs, one group (raw fp8 tiles, the consumer converts)") ||
        run<1, 2>("mode 1 rs, two groups on alternate tiles"))
        return 1;
    if (run_ring(128) || run_ring(64))
        return 1;
    return 0;
}
