// Stage C building blocks: the top-k entry to local slot mapping, and the sparse MLA of one CTA on
// tensor cores (bf16 operands, fp32 accumulators): S = Q K^T over the 576 query/key dims, online
// softmax in fp32, O += P V over the 512 latent dims. 64 heads per CTA run on warpgroup MMA (wgmma,
// sm_90a: two warpgroups, operands read from shared memory by the tensor cores); 16 or 32 heads on
// mma.sync m16n8k16 with ldmatrix operands (8 warps), since a warpgroup MMA takes 64 rows.
//
// One CTA = HB heads of one token, 8 warps. Per segment of up to 2048 top-k entries, the CTA first
// compacts the entries this rank owns into a list of local slots (order kept), so a DCP rank only
// pays for its own keys. Then, per tile of KT kept keys:
//   1. the tile's raw cache entries, loaded by cp.async while the previous tile was computed, are
//      dequantised to bf16 in shared memory (fp8_ds_mla, nvfp4_ds_mla; bf16 entries are copied by
//      cp.async straight into a double-buffered key tile), as FlashMLA does;
//   2. S = Q K^T: wgmma: each warpgroup all of S over half of the 576 dims; mma.sync: each warp a
//      32 x 32 (16 x 32) tile over a share of the dims; the shares summed in a fixed order (bit-for-bit
//      repeatable), scaled and masked. The next tile's cp.async is issued meanwhile (wgmma) or just
//      before (mma.sync);
//   3. online softmax per head in fp32 (P to bf16);
//   4. O = O * corr + P V, each warpgroup (warp) a block of heads x latent dims held in registers.
// The CPU reference rounds the dequantised keys to bf16 the same way, so both compute one function.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

constexpr int kAttendThreads = 256;
// warpgroup MMA exists on sm_90a only (plain sm_90 and sm_100a targets take the mma.sync path)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool kAttendWgmma = true;
#else
constexpr bool kAttendWgmma = false;
#endif
constexpr int kAttendSegment = 2048; // top-k entries compacted at a time

// The local slot of top-k entry g of a row of request req on this rank, or -1: invalid entries
// (negative, beyond the request, blocks the table does not have, slots beyond the cache) are
// treated as -1 and never read.
template <int W, int I, int BlockSize>
__device__ __forceinline__ int64_t local_slot(int32_t g, int32_t req, const dsa_attend_params &p)
{
    if (g < 0 || req < 0 || req >= p.num_requests || g >= p.seq_lens[req])
        return -1;
    if ((g / I) % W != p.rank)
        return -1;
    const int64_t local = (int64_t)(g / (W * I)) * I + g % I;
    const int64_t b = local / BlockSize;
    if (b >= p.max_blocks)
        return -1;
    const int32_t blk = p.block_table[req * p.max_blocks + b];
    if (blk < 0)
        return -1;
    const int64_t slot = (int64_t)blk * BlockSize + local % BlockSize;
    return slot < p.num_slots ? slot : -1;
}

__device__ __forceinline__ float e2m1_to_float(uint32_t code)
{
    const int ex = (code >> 1) & 3, mant = code & 1; // 0 .5 1 1.5 2 3 4 6
    const float mag = ex == 0 ? 0.5f * (float)mant : (float)(2 + mant) * 0.25f * (float)(1 << ex);
    return code & 8 ? -mag : mag;
}

// Two floats to two bf16 (round to nearest even), lo in bits 0-15.
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// Two e4m3 bytes (lo in bits 0-7) to floats, exactly (through f16x2).
__device__ __forceinline__ void e4m3x2_to_float(uint32_t pair, float &lo, float &hi)
{
    const unsigned short in = (unsigned short)pair;
    asm("{\n\t.reg .b32 h2;\n\t.reg .b16 l, h;\n\t"
        "cvt.rn.f16x2.e4m3x2 h2, %2;\n\tmov.b32 {l, h}, h2;\n\t"
        "cvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
        : "=f"(lo), "=f"(hi)
        : "h"(in));
}

// 16 e4m3 bytes (4 words) times scale to 16 bf16 (two 16-byte vectors).
__device__ __forceinline__ void e4m3x16_to_bf16(uint4 v, float scale, uint4 &out0, uint4 &out1)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float a, b, c, d;
        e4m3x2_to_float(w[i] & 0xffffu, a, b);
        e4m3x2_to_float(w[i] >> 16, c, d);
        o[2 * i] = bf16x2(a * scale, b * scale);
        o[2 * i + 1] = bf16x2(c * scale, d * scale);
    }
    out0 = make_uint4(o[0], o[1], o[2], o[3]);
    out1 = make_uint4(o[4], o[5], o[6], o[7]);
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    uint32_t a;
    asm("{\n\t.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;\n\t}" : "=r"(a) : "l"(p));
    return a;
}

// 16 bytes global -> shared, asynchronously; bytes = 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// D = A B + D, m16n8k16, A row-major bf16, B column-major bf16, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Warpgroup MMA (wgmma, sm_90a): 4 warps multiply a 64-row A by B, both read from shared memory by
// the tensor cores through descriptors, fp32 accumulators in registers (the m16n8 fragment layout per
// warp: warp w of the group holds rows 16w + lane/4 and + 8). Tiles are stored as 8 x 8 core matrices
// of 16-byte rows (no swizzle): element (r, c) of a tile with C columns at (r/8)(C/8)64 + (c/8)64 +
// (r%8)8 + c%8 (bf16 units), so one tile serves Q K^T (K-major, row groups SBO = C/8 x 128 bytes
// apart, column groups LBO = 128) and P V (V N-major: the same key tile read with LBO and SBO swapped).
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3ffffu) >> 4) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// the accumulators are (re)defined here: keeps the compiler's reads and writes of them on the right
// side of the asynchronous MMAs
template <int N> __device__ __forceinline__ void wg_pin(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}
// D += A B, m64 x N x k16, A and B by descriptor (TransB = 1: B N-major)
template <int TransB> __device__ __forceinline__ void wgmma_n32(float (&d)[16], uint64_t a, uint64_t b)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %18, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, %19;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(a), "l"(b), "r"(1), "n"(TransB));
}

template <int TransB> __device__ __forceinline__ void wgmma_n64(float (&d)[32], uint64_t a, uint64_t b)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, %35;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(1), "n"(TransB));
}

template <int TransB> __device__ __forceinline__ void wgmma_n256(float (&d)[128], uint64_t a, uint64_t b)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, %131;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(a), "l"(b), "r"(1), "n"(TransB));
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// The shared-memory layout of a sparse MLA CTA (bytes), for HB heads, KV = query/key dims, LAT =
// latent dims, cache Format (0 bf16, 1 fp8_ds_mla, 2 nvfp4_ds_mla) of EntryBytes per key. The
// runtime reads `bytes` from the compiled module (dsa_attend_smem_<config>), so this is the one
// place it is computed.
template <int HB, int KV, int LAT, int Format, int EntryBytes> struct AttendLayout {
    static_assert(HB == 16 || HB == 32 || HB == 64, "heads per CTA");
    static_assert(KV % 16 == 0 && LAT % 64 == 0 && LAT < KV, "dims");
    static_assert(EntryBytes % 16 == 0, "cache entries in 16-byte chunks (cp.async)");
    static constexpr int KT = Format == 0 ? 32 : 64;  // keys per tile
    // 64 heads: two warpgroups on wgmma, tiles of core matrices; fewer: 8 warps on mma.sync, padded rows
    static constexpr bool WG = HB == 64 && kAttendWgmma;
    static constexpr int RS = WG ? KV : KV + 8;       // bf16 per Q/K row: padded, 16-byte chunks odd, so ldmatrix hits distinct banks
    static constexpr int WM = HB < 32 ? HB : 32;      // mma.sync: heads per warp tile
    static constexpr int S_TILES = (HB / WM) * (KT / 32); // mma.sync: warp tiles of S (WM x 32)
    static constexpr int SPLITS = WG ? 2 : kAttendThreads / 32 / S_TILES; // warps (groups) sharing S, each over part of KV
    static constexpr int SS = KT + 8;                 // fp32 per S row
    static constexpr int PS = WG ? KT : KT + 8;       // bf16 per P row
    static constexpr int RG = HB / WM;                // mma.sync P V: warp rows
    static constexpr int DW = WG ? LAT / 2 : LAT / (kAttendThreads / 32 / RG); // P V: latent dims per warp (group)
    static constexpr int ACC = WG ? DW / 2 : (WM / 16) * (DW / 8) * 4; // O accumulators per thread
    static constexpr int KBUF = Format == 0 ? 2 : 1;  // bf16 keys land in the tile directly: two tiles
    static constexpr int q_off = 0;
    static constexpr int k_off = q_off + HB * RS * 2;
    static constexpr int raw_off = k_off + KBUF * KT * RS * 2;
    static constexpr int s_off = raw_off + (Format == 0 ? 0 : KT * EntryBytes);
    static constexpr int p_off = s_off + (SPLITS - 1) * HB * SS * 4;
    static constexpr int stat_off = p_off + HB * PS * 2; // m, l, corr per head
    // wgmma: bytes between 8-row groups of core matrices in a Q or K tile (KV columns) and in P (KT)
    static constexpr uint32_t QK_SBO = KV / 8 * 128, P_SBO = KT / 8 * 128;
    // bf16 offset of element (r, c) of a tile of C columns: core matrices (wgmma) or rows of Pitch
    template <int C, int Pitch> static __device__ __forceinline__ int at(int r, int c)
    {
        return WG ? (r / 8) * (C / 8) * 64 + (c / 8) * 64 + (r % 8) * 8 + c % 8 : r * Pitch + c;
    }
    static __device__ __forceinline__ int qk_at(int r, int c) { return at<KV, RS>(r, c); }
    static __device__ __forceinline__ int p_at(int r, int c) { return at<KT, PS>(r, c); }
    static constexpr int list_off = stat_off + 3 * HB * 4;
    static constexpr int scan_off = list_off + kAttendSegment * 4;
    static constexpr int bytes = scan_off + 16 * 4;
    static_assert(SPLITS >= 2 && DW % 16 == 0 && bytes <= 232448, "fits an sm_90 CTA (227 KiB)");
    static_assert(!WG || (DW % 32 == 0 && DW <= 256 && KV % 8 == 0), "wgmma shapes");
};

// Dequantise the raw entries of keys [0, KT) (zeros for missing keys) into the bf16 key tile.
template <class Lay, int KV, int LAT, int Format, int EntryBytes, int ScaleOffset, int RopeOffset>
__device__ __forceinline__ void dequant_tile(const uint8_t *raw, uint16_t *k_s)
{
    constexpr int R = KV - LAT;
    if constexpr (Format == 1) { // fp8_ds_mla: e4m3 latent x fp32 scale per 128, bf16 rope
        constexpr int CL = LAT / 16, CR = R / 8, C = CL + CR;
        static_assert(R % 8 == 0 && RopeOffset % 16 == 0, "fp8_ds_mla rope chunks");
        // a warp per 8 keys, lane l on key l % 8 and 16-byte chunks l / 8, + 4, ...: the 8 lanes of a
        // 16-byte access phase touch 8 keys, distinct banks in either tile layout
        const int w = threadIdx.x / 32, ln = threadIdx.x % 32;
        static_assert(Lay::KT % 8 == 0, "keys per warp");
#pragma unroll 1
        for (int j8 = w; j8 < Lay::KT / 8; j8 += kAttendThreads / 32) {
            const int j = 8 * j8 + ln % 8;
            const uint8_t *e = raw + j * EntryBytes;
#pragma unroll
            for (int c = ln / 8; c < C; c += 4) {
                if (c < CL) {
                    const float scale = reinterpret_cast<const float *>(e + ScaleOffset)[c / 8];
                    uint4 o0, o1;
                    e4m3x16_to_bf16(load16(e + 16 * c), scale, o0, o1);
                    store16(k_s + Lay::qk_at(j, 16 * c), o0);
                    store16(k_s + Lay::qk_at(j, 16 * c + 8), o1);
                } else {
                    store16(k_s + Lay::qk_at(j, LAT + 8 * (c - CL)), load16(e + RopeOffset + 16 * (c - CL)));
                }
            }
        }
    } else { // nvfp4_ds_mla: e2m1 latent x e4m3 scale per 16 (4 interleaved rows), e4m3 rope
        constexpr int CL = LAT / 32, CR = R / 16, C = CL + CR;
        static_assert(R % 16 == 0 && RopeOffset % 16 == 0, "nvfp4_ds_mla rope chunks");
#pragma unroll 1
        for (int i = threadIdx.x; i < Lay::KT * C; i += kAttendThreads) {
            const int j = 8 * (i / 8 / C) + i % 8, c = i / 8 % C; // 8 neighbouring threads on 8 keys
            const uint8_t *e = raw + j * EntryBytes;
            if (c < CL) { // 32 values, scale blocks 2c and 2c + 1
                const uint4 v = load16(e + 16 * c);
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
                uint32_t o[16];
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    const int s = 2 * c + half;
                    const float scale = e4m3_to_float(e[ScaleOffset + (LAT / 64) * (s & 3) + (s >> 2)]);
#pragma unroll
                    for (int b = 0; b < 8; b++) {
                        const uint32_t byte = (w[2 * half + b / 4] >> (8 * (b % 4))) & 0xffu;
                        o[8 * half + b] = bf16x2(e2m1_to_float(byte & 0xf) * scale, e2m1_to_float(byte >> 4) * scale);
                    }
                }
#pragma unroll
                for (int q = 0; q < 4; q++)
                    store16(k_s + Lay::qk_at(j, 32 * c + 8 * q), make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]));
            } else {
                const uint4 v = load16(e + RopeOffset + 16 * (c - CL));
                uint4 o0, o1;
                e4m3x16_to_bf16(v, 1.0f, o0, o1);
                store16(k_s + Lay::qk_at(j, LAT + 16 * (c - CL)), o0);
                store16(k_s + Lay::qk_at(j, LAT + 16 * (c - CL) + 8), o1);
            }
        }
    }
}

// Sparse MLA of HB heads (heads >= the real ones come as zero queries and are never stored) of one
// token over its kept keys. q_chunk(h, c) gives bf16 q[h][8c .. 8c + 8) as 16 bytes; slot_of(k)
// the local slot of top-k entry k or -1; store(h, d, x0, x1) takes O / l at (h, d), (h, d + 1),
// and with d = -1 the LSE of head h (natural log; -inf for a head with no kept key, output 0).
template <int HB, int KV, int LAT, int TOPK, int Format, int EntryBytes, int ScaleOffset, int RopeOffset,
          class QChunk, class SlotOf, class Store>
__device__ __forceinline__ void sparse_mla(uint8_t *smem, const uint8_t *cache, float softmax_scale,
                                           QChunk q_chunk, SlotOf slot_of, Store store)
{
    using Lay = AttendLayout<HB, KV, LAT, Format, EntryBytes>;
    constexpr int KT = Lay::KT, RS = Lay::RS, WM = Lay::WM, SS = Lay::SS, PS = Lay::PS;
    constexpr int MB = WM / 16;     // 16-row blocks per warp tile
    constexpr int NB = Lay::DW / 8; // 8-dim blocks per warp in P V
    constexpr int KSTEPS = KV / 16;
    constexpr int CPK = EntryBytes / 16; // 16-byte chunks per cache entry
    uint16_t *q_s = reinterpret_cast<uint16_t *>(smem + Lay::q_off);
    uint16_t *k_s = reinterpret_cast<uint16_t *>(smem + Lay::k_off);
    uint8_t *raw_s = smem + Lay::raw_off;
    float *s_s = reinterpret_cast<float *>(smem + Lay::s_off);
    uint16_t *p_s = reinterpret_cast<uint16_t *>(smem + Lay::p_off);
    float *m_s = reinterpret_cast<float *>(smem + Lay::stat_off), *l_s = m_s + HB, *corr_s = l_s + HB;
    int32_t *list = reinterpret_cast<int32_t *>(smem + Lay::list_off);
    int32_t *scan = reinterpret_cast<int32_t *>(smem + Lay::scan_off);

    constexpr bool WG = Lay::WG;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    for (int i = tid; i < HB * (KV / 8); i += kAttendThreads) { // 8 neighbouring threads on 8 heads
        const int h = 8 * (i / 8 / (KV / 8)) + i % 8, c = i / 8 % (KV / 8);
        store16(q_s + Lay::qk_at(h, 8 * c), q_chunk(h, c));
    }
    if constexpr (WG)
        fence_proxy_async(); // the tensor cores read q_s after the segment's first barrier
    if (tid < HB) {
        m_s[tid] = neg_inf();
        l_s[tid] = 0.0f;
    }
    // ldmatrix lane offsets: A (row-major 16 x 16) and B of S (keys x dims): row, column of this lane
    const int a_row = (lane % 8) + 8 * ((lane / 8) % 2), a_col = 8 * (lane / 16);
    const int b_row = (lane % 8) + 8 * (lane / 16), b_col = 8 * ((lane / 8) % 2);
    // S: warp tile (tr, tc) of WM x 32, over k-steps [ks0, ks1) of the KV dims
    const int s_tile = warp % Lay::S_TILES, split = warp / Lay::S_TILES;
    const int tr = s_tile / (KT / 32), tc = s_tile % (KT / 32);
    const int ks0 = split * KSTEPS / Lay::SPLITS, ks1 = (split + 1) * KSTEPS / Lay::SPLITS;
    // P V: warp rows rg, latent dims [dg * DW, (dg + 1) * DW)
    const int rg = warp % Lay::RG, dg = warp / Lay::RG;
    // wgmma: warpgroup wg takes k-steps [wg KSTEPS / 2, ...) of S and latent dims [wg DW, ...) of O;
    // its warp wl holds rows 16 wl + g and + 8
    const int wg = warp / 4, wl = warp % 4;
    float acc[MB][NB][4]; // mma.sync O
    float oacc[Lay::ACC]; // wgmma O: (row, dim 8 j + 2 t4 + {0, 1}) at 4 j + {0, 1} (row 16 wl + g), + {2, 3} (+ 8)
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
            acc[mb][nb][0] = acc[mb][nb][1] = acc[mb][nb][2] = acc[mb][nb][3] = 0.0f;
#pragma unroll
    for (int i = 0; i < Lay::ACC; i++)
        oacc[i] = 0.0f;

    for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
        // 0. compact this rank's entries of the segment into list[], in top-k order
        constexpr int SEG = TOPK < kAttendSegment ? TOPK : kAttendSegment;
        constexpr int EPT = (SEG + kAttendThreads - 1) / kAttendThreads;
        int32_t mine[EPT];
        int cnt = 0;
#pragma unroll
        for (int e = 0; e < EPT; e++) {
            const int k = seg0 + tid * EPT + e;
            const int64_t s = (tid * EPT + e < SEG && k < TOPK) ? slot_of(k) : -1;
            mine[e] = (int32_t)s;
            cnt += s >= 0;
        }
        int incl = cnt; // inclusive scan over the warp, then over the warps
#pragma unroll
        for (int o = 1; o < 32; o *= 2) {
            const int v = __shfl_up_sync(0xffffffffu, incl, o);
            incl += lane >= o ? v : 0;
        }
        __syncthreads(); // list[] and scan[] of the previous segment are no longer read
        if (lane == 31)
            scan[warp] = incl;
        __syncthreads();
        int base = incl - cnt, n = 0;
        for (int w = 0; w < kAttendThreads / 32; w++) {
            base += w < warp ? scan[w] : 0;
            n += scan[w];
        }
#pragma unroll
        for (int e = 0; e < EPT; e++)
            if (mine[e] >= 0)
                list[base++] = mine[e];
        __syncthreads();

        // the raw entries (or, for bf16, the key rows) of the tile starting at kept key t0
        auto issue = [&](int t0, int buf) {
            for (int j = warp; j < KT; j += kAttendThreads / 32) {
                const bool ok = t0 + j < n;
                const uint8_t *e = cache + (ok ? (int64_t)list[t0 + j] * EntryBytes : 0);
#pragma unroll
                for (int c = lane; c < CPK; c += 32)
                    cp_async16(Format == 0 ? smem_addr(k_s + buf * KT * RS + Lay::qk_at(j, 8 * c)) : smem_addr(raw_s + j * EntryBytes + 16 * c),
                               e + 16 * c, ok ? 16 : 0);
            }
            cp_async_commit();
        };
        if (n > 0)
            issue(0, 0);
        for (int t0 = 0, it = 0; t0 < n; t0 += KT, it++) {
            const int nk = n - t0 < KT ? n - t0 : KT; // keys in this tile; the rest are zero rows
            const uint16_t *kt = k_s + (Format == 0 ? (it % 2) * KT * RS : 0);
            cp_async_wait_all();
            if constexpr (WG && Format == 0)
                fence_proxy_async(); // key rows written by this thread's copies, read by the tensor cores
            __syncthreads(); // the raw tile has landed; the previous tile's P V is done
            if constexpr (Format != 0) {
                dequant_tile<Lay, KV, LAT, Format, EntryBytes, ScaleOffset, RopeOffset>(raw_s, k_s);
                if constexpr (WG)
                    fence_proxy_async();
                __syncthreads();
            }
            if (!WG && t0 + KT < n)
                issue(t0 + KT, (it + 1) % 2); // lands while this tile is computed

            // 2. S = Q K^T
            if constexpr (WG) { // warpgroup wg: all of S over its half of the dims; group 0 adds them
                float sacc[KT / 2]; // (row, key 8 j + 2 t4 + {0, 1}) at 4 j + {0, 1} (row 16 wl + g), + {2, 3} (+ 8)
#pragma unroll
                for (int i = 0; i < KT / 2; i++)
                    sacc[i] = 0.0f;
                wg_pin(sacc);
                wgmma_fence();
                const uint32_t qa = smem_addr(q_s), kb = smem_addr(kt);
                constexpr uint32_t SBO = Lay::QK_SBO;
                // k-steps [0, KH0) to group 0, [KH0, KSTEPS) to group 1: with an even count a trip count
                // the compiler sees as uniform (an odd one costs a branch, and serialized wgmmas)
                constexpr int KH0 = KSTEPS / 2, KH1 = KSTEPS - KH0;
#pragma unroll
                for (int i = 0; i < KH1; i++) {
                    const int ks = wg * KH0 + i;
                    if (KSTEPS % 2 == 0 || wg == 1 || i < KH0) {
                        const uint64_t da = wg_desc(qa + 256u * ks, 128u, SBO), db = wg_desc(kb + 256u * ks, 128u, SBO);
                        if constexpr (KT == 64)
                            wgmma_n64<0>(sacc, da, db);
                        else
                            wgmma_n32<0>(sacc, da, db);
                    }
                }
                wgmma_commit();
                if (t0 + KT < n)
                    issue(t0 + KT, (it + 1) % 2); // while the tensor cores work; lands while this tile is computed
                wgmma_wait();
                wg_pin(sacc);
                const int r0 = 16 * wl + g;
                if (wg == 1)
#pragma unroll
                    for (int j = 0; j < KT / 8; j++) {
                        float *r = s_s + r0 * SS + 8 * j + 2 * t4;
                        *reinterpret_cast<float2 *>(r) = make_float2(sacc[4 * j], sacc[4 * j + 1]);
                        *reinterpret_cast<float2 *>(r + 8 * SS) = make_float2(sacc[4 * j + 2], sacc[4 * j + 3]);
                    }
                __syncthreads();
                if (wg == 0)
#pragma unroll
                    for (int j = 0; j < KT / 8; j++) {
                        const int col = 8 * j + 2 * t4;
#pragma unroll
                        for (int hh = 0; hh < 2; hh++) {
                            float *r = s_s + (r0 + 8 * hh) * SS + col;
                            const float2 v = *reinterpret_cast<const float2 *>(r);
                            const float x0 = sacc[4 * j + 2 * hh] + v.x, x1 = sacc[4 * j + 2 * hh + 1] + v.y;
                            *reinterpret_cast<float2 *>(r) = make_float2(col < nk ? x0 * softmax_scale : neg_inf(),
                                                                         col + 1 < nk ? x1 * softmax_scale : neg_inf());
                        }
                    }
                __syncthreads();
            } else { // this warp's share of the dims of its WM x 32 tile
                float c[MB][4][4];
#pragma unroll
                for (int mb = 0; mb < MB; mb++)
#pragma unroll
                    for (int nb = 0; nb < 4; nb++)
                        c[mb][nb][0] = c[mb][nb][1] = c[mb][nb][2] = c[mb][nb][3] = 0.0f;
                const uint32_t qa = smem_addr(q_s + (tr * WM + a_row) * RS + a_col);
                const uint32_t kb = smem_addr(kt + (tc * 32 + b_row) * RS + b_col);
                constexpr int KPS = (KSTEPS + Lay::SPLITS - 1) / Lay::SPLITS;
#pragma unroll
                for (int kq = 0; kq < KPS; kq++) {
                    const int ks = ks0 + kq;
                    if (ks >= ks1)
                        break;
                    uint32_t a[MB][4];
#pragma unroll
                    for (int mb = 0; mb < MB; mb++)
                        ldsm_x4(a[mb], qa + (uint32_t)((mb * 16 * RS + ks * 16) * 2));
#pragma unroll
                    for (int h = 0; h < 2; h++) { // keys 16h .. 16h + 15: two 8-key blocks
                        uint32_t b[4];
                        ldsm_x4(b, kb + (uint32_t)((h * 16 * RS + ks * 16) * 2));
#pragma unroll
                        for (int mb = 0; mb < MB; mb++) {
                            mma_bf16(c[mb][2 * h], a[mb], b[0], b[1]);
                            mma_bf16(c[mb][2 * h + 1], a[mb], b[2], b[3]);
                        }
                    }
                }
                // splits 1.. leave partials; split 0 adds them in split order, scales and masks
                if (split > 0) {
                    float *sp = s_s + (split - 1) * HB * SS;
#pragma unroll
                    for (int mb = 0; mb < MB; mb++)
#pragma unroll
                        for (int nb = 0; nb < 4; nb++) {
                            float *r0 = sp + (tr * WM + mb * 16 + g) * SS + tc * 32 + nb * 8 + 2 * t4;
                            *reinterpret_cast<float2 *>(r0) = make_float2(c[mb][nb][0], c[mb][nb][1]);
                            *reinterpret_cast<float2 *>(r0 + 8 * SS) = make_float2(c[mb][nb][2], c[mb][nb][3]);
                        }
                }
                __syncthreads();
                if (split == 0) {
#pragma unroll
                    for (int mb = 0; mb < MB; mb++)
#pragma unroll
                        for (int nb = 0; nb < 4; nb++) {
                            const int off = (tr * WM + mb * 16 + g) * SS + tc * 32 + nb * 8 + 2 * t4;
                            const int col = tc * 32 + nb * 8 + 2 * t4;
#pragma unroll
                            for (int hh = 0; hh < 2; hh++) {
                                float x0 = c[mb][nb][2 * hh], x1 = c[mb][nb][2 * hh + 1];
#pragma unroll
                                for (int sp = 1; sp < Lay::SPLITS; sp++) {
                                    const float2 v = *reinterpret_cast<const float2 *>(
                                        s_s + (sp - 1) * HB * SS + off + hh * 8 * SS);
                                    x0 += v.x;
                                    x1 += v.y;
                                }
                                *reinterpret_cast<float2 *>(s_s + off + hh * 8 * SS) =
                                    make_float2(col < nk ? x0 * softmax_scale : neg_inf(),
                                                col + 1 < nk ? x1 * softmax_scale : neg_inf());
                            }
                        }
                }
                __syncthreads();
            }
            // 3. online softmax per head: TPR threads per row, columns interleaved
            {
                constexpr int TPR = kAttendThreads / HB, PPT = KT / 2 / TPR;
                const int row = tid / TPR, part = tid % TPR;
                float2 s[PPT];
                float mt = neg_inf();
#pragma unroll
                for (int i = 0; i < PPT; i++) {
                    s[i] = *reinterpret_cast<const float2 *>(s_s + row * SS + 2 * (part + TPR * i));
                    mt = fmaxf(mt, fmaxf(s[i].x, s[i].y));
                }
                mt = group_max<TPR>(mt);
                const float m_old = m_s[row], m_new = fmaxf(m_old, mt);
                float sum = 0.0f;
#pragma unroll
                for (int i = 0; i < PPT; i++) {
                    const float p0 = m_new == neg_inf() ? 0.0f : __expf(s[i].x - m_new);
                    const float p1 = m_new == neg_inf() ? 0.0f : __expf(s[i].y - m_new);
                    sum += p0 + p1;
                    *reinterpret_cast<uint32_t *>(p_s + Lay::p_at(row, 2 * (part + TPR * i))) = bf16x2(p0, p1);
                }
                sum = group_sum<TPR>(sum);
                const float corr = m_new == neg_inf() ? 1.0f : __expf(m_old - m_new); // m_old = -inf: 0
                __syncwarp();
                if (part == 0) {
                    corr_s[row] = corr;
                    m_s[row] = m_new;
                    l_s[row] = l_s[row] * corr + sum;
                }
                if constexpr (WG)
                    fence_proxy_async(); // P is read by the tensor cores
            }
            __syncthreads();
            // 4. O = O * corr + P V over this warp's (group's) rows and latent dims
            if constexpr (WG) {
                // always rescaled: registers the tensor cores accumulate into must not change on a
                // path the compiler cannot prove uniform (it would serialize every wgmma)
                const float c_lo = corr_s[16 * wl + g], c_hi = corr_s[16 * wl + g + 8];
#pragma unroll
                for (int j = 0; j < Lay::ACC / 4; j++) {
                    oacc[4 * j] *= c_lo, oacc[4 * j + 1] *= c_lo;
                    oacc[4 * j + 2] *= c_hi, oacc[4 * j + 3] *= c_hi;
                }
                wg_pin(oacc);
                wgmma_fence();
                // A = P (K-major, 8-row groups KT/8 x 128 bytes apart); B = V, the key tile's latent
                // columns [wg DW, ...) read N-major: 8-key groups (k) SBO apart, 8-dim groups 128 bytes
                constexpr uint32_t KSBO = Lay::QK_SBO, PSBO = Lay::P_SBO;
                const uint32_t pa = smem_addr(p_s), vb = smem_addr(kt) + (uint32_t)(wg * Lay::DW / 8 * 128);
#pragma unroll
                for (int kk = 0; kk < KT / 16; kk++) {
                    const uint64_t da = wg_desc(pa + 256u * kk, 128u, PSBO);
                    if constexpr (Lay::DW == 256) {
                        wgmma_n256<1>(oacc, da, wg_desc(vb + 2u * KSBO * kk, KSBO, 128u));
                    } else {
#pragma unroll
                        for (int c = 0; c < Lay::DW / 32; c++)
                            wgmma_n32<1>(*reinterpret_cast<float(*)[16]>(oacc + 16 * c), da,
                                         wg_desc(vb + 512u * c + 2u * KSBO * kk, KSBO, 128u));
                    }
                }
                wgmma_commit();
                wgmma_wait();
                wg_pin(oacc);
            } else {
#pragma unroll
                for (int mb = 0; mb < MB; mb++) {
                    const float c_lo = corr_s[rg * WM + mb * 16 + g], c_hi = corr_s[rg * WM + mb * 16 + g + 8];
                    if (__any_sync(0xffffffffu, c_lo != 1.0f || c_hi != 1.0f))
#pragma unroll
                    for (int nb = 0; nb < NB; nb++) {
                        acc[mb][nb][0] *= c_lo, acc[mb][nb][1] *= c_lo;
                        acc[mb][nb][2] *= c_hi, acc[mb][nb][3] *= c_hi;
                    }
                }
                const uint32_t pa = smem_addr(p_s + (rg * WM + a_row) * PS + a_col);
                // V = the key rows: keys along k, latent dims along n (transposed loads)
                const uint32_t vb = smem_addr(kt + a_row * RS + dg * Lay::DW + a_col);
#pragma unroll 1
                for (int kk = 0; kk < KT / 16; kk++) {
                    uint32_t a[MB][4];
#pragma unroll
                    for (int mb = 0; mb < MB; mb++)
                        ldsm_x4(a[mb], pa + (uint32_t)((mb * 16 * PS + kk * 16) * 2));
#pragma unroll
                    for (int nb2 = 0; nb2 < NB / 2; nb2++) {
                        uint32_t b[4];
                        ldsm_x4_trans(b, vb + (uint32_t)((kk * 16 * RS + nb2 * 16) * 2));
#pragma unroll
                        for (int mb = 0; mb < MB; mb++) {
                            mma_bf16(acc[mb][2 * nb2], a[mb], b[0], b[1]);
                            mma_bf16(acc[mb][2 * nb2 + 1], a[mb], b[2], b[3]);
                        }
                    }
                }
            }
        }
    }
    __syncthreads(); // the last tile's l
    // O / l and LSE = m + ln l; an empty row is 0 and -inf
    if constexpr (WG) {
        const int h_lo = 16 * wl + g, h_hi = h_lo + 8;
        const float l_lo = l_s[h_lo], l_hi = l_s[h_hi];
        const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f, inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
#pragma unroll
        for (int j = 0; j < Lay::ACC / 4; j++) {
            const int d = wg * Lay::DW + 8 * j + 2 * t4;
            store(h_lo, d, oacc[4 * j] * inv_lo, oacc[4 * j + 1] * inv_lo);
            store(h_hi, d, oacc[4 * j + 2] * inv_hi, oacc[4 * j + 3] * inv_hi);
        }
    } else
#pragma unroll
    for (int mb = 0; mb < MB; mb++) {
        const int h_lo = rg * WM + mb * 16 + g, h_hi = h_lo + 8;
        const float l_lo = l_s[h_lo], l_hi = l_s[h_hi];
        const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f, inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            const int d = dg * Lay::DW + nb * 8 + 2 * t4;
            store(h_lo, d, acc[mb][nb][0] * inv_lo, acc[mb][nb][1] * inv_lo);
            store(h_hi, d, acc[mb][nb][2] * inv_hi, acc[mb][nb][3] * inv_hi);
        }
    }
    if (tid < HB)
        store(tid, -1, l_s[tid] > 0.0f ? m_s[tid] + logf(l_s[tid]) : neg_inf(), 0.0f); // d = -1: the LSE
}

} // namespace dsa
