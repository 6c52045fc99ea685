// Review check (not part of the library): the old and the patched top-k -> slot logic
// (kernels/dsa_attend.cuh local_slot / SlotOfTopk, and the two call sites of dsa_attend_tiles.cuh)
// copied as host functions over a mock params struct whose loads are bounds-checked and counted,
// compared over exhaustive small grids and random inputs. Build:
//   g++ -O1 -std=c++17 -fsanitize=undefined,address -fno-sanitize-recover=all tests/bench/logs/attend_slots_batched_check.cpp && ./a.out 3000
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <climits>
#include <random>
#include <vector>

static long long n_checks, n_kept, n_reads_oob, why[8], site_kept, site_notmine;

struct Arr {
    const int32_t *d;
    int64_t n;
    const char *name;
    int32_t operator[](int64_t i) const
    {
        if (i < 0 || i >= n) {
            fprintf(stderr, "OOB read %s[%lld] (size %lld)\n", name, (long long)i, (long long)n);
            n_reads_oob++;
            abort();
        }
        return d[i];
    }
};

struct Params { // dsa_attend_params, the fields used
    Arr topk, req_of_token, seq_lens, block_table;
    int64_t num_slots, max_blocks, num_requests, topk_stride;
    int32_t num_tokens, rank, splits;
};

// ---- before the patch (b72f585) ----
template <int W, int I, int BlockSize> int64_t local_slot_old(int32_t g, int32_t req, const Params &p)
{
    if (g < 0)
        return why[0]++, -1;
    if (req < 0 || req >= p.num_requests)
        return why[1]++, -1;
    if (g >= p.seq_lens[req])
        return why[2]++, -1;
    if ((g / I) % W != p.rank)
        return why[3]++, -1;
    const int64_t local = (int64_t)(g / (W * I)) * I + g % I;
    const int64_t b = local / BlockSize;
    if (b >= p.max_blocks)
        return why[4]++, -1;
    const int32_t blk = p.block_table[req * p.max_blocks + b];
    if (blk < 0)
        return why[5]++, -1;
    const int64_t slot = (int64_t)blk * BlockSize + local % BlockSize;
    return slot < p.num_slots ? (why[7]++, slot) : (why[6]++, -1);
}
template <int W, int I, int BS, bool Multi> struct SlotOld {
    const Params &p;
    int64_t row; // offset of the row in topk
    int32_t req, split, mask;
    int t;
    int64_t operator()(int k) const
    {
        if ((k & mask) != split)
            return site_notmine++, -1;
        if (Multi)
            return local_slot_old<W, I, BS>(p.topk[t * p.topk_stride + k], p.req_of_token[t], p);
        return local_slot_old<W, I, BS>(p.topk[row + k], req, p);
    }
};

// ---- after the patch ----
int32_t request_len(int32_t req, const Params &p) { return req >= 0 && req < p.num_requests ? p.seq_lens[req] : 0; }
template <int W, int I, int BlockSize> int64_t local_slot_new(int32_t g, int32_t req, int32_t len, const Params &p)
{
    const int64_t local = (int64_t)(g / (W * I)) * I + g % I, b = local / BlockSize;
    const bool in = g >= 0 && req >= 0 && req < p.num_requests && (g / I) % W == p.rank && b < p.max_blocks;
    const int32_t blk = in ? p.block_table[(int64_t)req * p.max_blocks + b] : -1;
    const int64_t slot = (int64_t)blk * BlockSize + local % BlockSize;
    return blk >= 0 && g < len && slot < p.num_slots ? slot : -1;
}
template <int W, int I, int BS, bool Multi> struct SlotNew {
    const Params &p;
    int64_t row;
    int32_t req, len, split, mask;
    int t;
    int64_t operator()(int k, bool valid) const
    {
        const bool mine = valid && (k & mask) == split;
        if (Multi) {
            const int32_t r = p.req_of_token[t], g = mine ? p.topk[t * p.topk_stride + k] : -1;
            return local_slot_new<W, I, BS>(g, r, request_len(r, p), p);
        }
        return local_slot_new<W, I, BS>(mine ? p.topk[row + k] : -1, req, len, p);
    }
};

// one call of each call site, old and new; same result or abort
template <int W, int I, int BS, bool Multi>
void compare_at(const Params &p, int t, int split, int k, bool valid_cs, int topk_n)
{
    // the old attend(): req read at the CTA start (in bounds: t < num_tokens)
    const int32_t req = p.req_of_token[t];
    const SlotOld<W, I, BS, Multi> so{p, t * p.topk_stride, req, split, p.splits - 1, t};
    const SlotNew<W, I, BS, Multi> sn{p, t * p.topk_stride, req, request_len(req, p), split, p.splits - 1, t};
    // compact_segment: (tid*EPT+e < SEG && k < TOPK) ? slot_of(k) : -1  vs  slot_of(k, that)
    const bool v1 = valid_cs && k < topk_n;
    const int64_t a1 = v1 ? so(k) : -1, b1 = sn(k, v1);
    // compact_segment_staged: k < TOPK ? slot_of(k) : -1  vs  slot_of(k, k < TOPK)
    const bool v2 = k < topk_n;
    const int64_t a2 = v2 ? so(k) : -1, b2 = sn(k, v2);
    n_checks += 2;
    n_kept += (a1 >= 0) + (a2 >= 0);
    site_kept += (a1 >= 0) + (a2 >= 0);
    if (a1 != b1 || a2 != b2 || (int32_t)a1 != (int32_t)b1) {
        fprintf(stderr, "MISMATCH W=%d I=%d BS=%d Multi=%d t=%d split=%d k=%d: old %lld/%lld new %lld/%lld\n", W, I,
                BS, (int)Multi, t, split, k, (long long)a1, (long long)a2, (long long)b1, (long long)b2);
        abort();
    }
}

// direct local_slot comparison, for any (g, req): the new with len = request_len(req)
template <int W, int I, int BS> void compare_ls(const Params &p, int32_t g, int32_t req)
{
    const int64_t a = local_slot_old<W, I, BS>(g, req, p), b = local_slot_new<W, I, BS>(g, req, request_len(req, p), p);
    n_checks++;
    n_kept += a >= 0;
    if (a != b) {
        fprintf(stderr, "LS MISMATCH W=%d I=%d BS=%d g=%d req=%d rank=%d: old %lld new %lld\n", W, I, BS, g, req, p.rank,
                (long long)a, (long long)b);
        abort();
    }
}

static const int32_t kSpecial[] = {INT_MIN, INT_MIN + 1, -65537, -4097, -1000, -65, -64, -63, -17, -16, -15, -9, -8,
                                   -7, -3, -2, -1, 0, 1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000,
                                   4095, 4096, 65535, 65536, 1 << 20, INT_MAX / 64, INT_MAX / 64 + 1, INT_MAX / 16 + 1,
                                   INT_MAX - 1, INT_MAX};

template <int W, int I, int BS> void run_config(std::mt19937_64 &rng, int rounds)
{
    auto pick = [&](int64_t lo, int64_t hi) { return (int64_t)(lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1))); };
    auto special = [&] { return kSpecial[rng() % (sizeof kSpecial / sizeof kSpecial[0])]; };
    for (int round = 0; round < rounds; round++) {
        // a random world
        const int nreq = (int)pick(0, 5);          // 0 requests too
        const int64_t max_blocks = pick(0, 6);     // 0 blocks too
        const int T = (int)pick(1, 4);
        const int topk_n = (int)pick(1, 40);       // TOPK
        const int64_t stride = topk_n + pick(0, 3);
        const int splits = 1 << pick(0, 3);
        std::vector<int32_t> lens(nreq), table((size_t)(nreq * max_blocks)), req_of(T), topk((size_t)(T * stride));
        const int span = W * I * BS * (int)(max_blocks + 1); // positions that reach past the table
        for (auto &l : lens) {
            const int c = (int)pick(0, 9);
            l = c == 0 ? special() : c == 1 ? 0 : (int32_t)pick(-3, span + 3);
        }
        const int64_t num_slots = pick(0, 3) == 0 ? (int64_t)special() * (pick(0, 1) ? 1 : 64) : pick(0, 20 * BS);
        for (auto &b : table) {
            const int c = (int)pick(0, 9);
            b = c == 0 ? special() : c == 1 ? -1 : (int32_t)pick(0, 24);
        }
        for (auto &r : req_of) {
            const int c = (int)pick(0, 9);
            r = c == 0 ? special() : c == 1 ? nreq : c == 2 ? -1 : (nreq ? (int32_t)pick(0, nreq - 1) : 0);
        }
        for (auto &g : topk) {
            const int c = (int)pick(0, 9);
            g = c == 0 ? special() : c == 1 ? -1 : (int32_t)pick(-2, span + 2);
        }
        Params p{{topk.data(), (int64_t)topk.size(), "topk"},
                 {req_of.data(), T, "req_of_token"},
                 {lens.data(), nreq, "seq_lens"},
                 {table.data(), (int64_t)table.size(), "block_table"},
                 num_slots,
                 max_blocks,
                 nreq,
                 stride,
                 T,
                 (int32_t)(pick(0, 7) == 0 ? pick(-1, W) : pick(0, W - 1)), // a rank out of range now and then
                 splits};
        for (int t = 0; t < T; t++)
            for (int split = 0; split < splits; split++)
                for (int k = 0; k < topk_n + 8; k++) // k past the row too
                    for (int vc = 0; vc < 2; vc++) {
                        compare_at<W, I, BS, false>(p, t, split, k, vc, topk_n);
                        compare_at<W, I, BS, true>(p, t, split, k, vc, topk_n);
                    }
        // local_slot itself over every g of the span and special g, every req incl. out of range
        for (int32_t req : {INT_MIN, -2, -1, 0, 1, nreq - 1, nreq, nreq + 1, INT_MAX}) {
            for (int32_t g = -W * I * BS - 3; g < span + 3; g++)
                compare_ls<W, I, BS>(p, g, req);
            for (int32_t g : kSpecial)
                compare_ls<W, I, BS>(p, g, req);
            for (int j = 0; j < 64; j++)
                compare_ls<W, I, BS>(p, (int32_t)rng(), req);
        }
    }
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    std::mt19937_64 rng(12345);
    // the specs' (dcp, interleave, block_size) and more, non-powers of two included
    run_config<1, 1, 64>(rng, rounds);
    run_config<1, 1, 16>(rng, rounds);
    run_config<2, 1, 64>(rng, rounds);
    run_config<2, 2, 64>(rng, rounds);
    run_config<4, 1, 64>(rng, rounds);
    run_config<4, 2, 16>(rng, rounds);
    run_config<4, 4, 64>(rng, rounds);
    run_config<8, 1, 64>(rng, rounds);
    run_config<8, 64, 64>(rng, rounds);
    run_config<3, 5, 7>(rng, rounds);
    run_config<1, 1, 1>(rng, rounds);
    run_config<2, 3, 1>(rng, rounds);
    printf("old code's outcomes: g<0 %lld, req out of range %lld, g>=len %lld, other rank %lld, b>=max_blocks %lld, blk<0 %lld, slot>=num_slots %lld, kept %lld; call sites: kept %lld, other split %lld\n",
           why[0], why[1], why[2], why[3], why[4], why[5], why[6], why[7], site_kept, site_notmine);
    printf("OK: %lld comparisons, %lld with a kept slot, 0 mismatches, 0 out-of-bounds reads\n", n_checks, n_kept);
    return 0;
}
