/* dsa-demo --bench: the whole decode step of one layer (prologue, index, attend), timed step by step
 * inside one call sequence on each rank, for 1, 64 and 128 decode rows of 16K-token requests.
 *
 * Each rank first fills its shard of the MLA and indexer caches through dsa_prologue (random
 * activations, every position of every request, written by the rank that owns it), then runs the
 * decode step BENCH_REPS times: dsa_prologue for the rows' new tokens, dsa_index, dsa_attend. libdsa
 * records a CUDA event after every kernel and collective it enqueues (dsa_testing_stage_events):
 * an event before the step and those give each step's time on the GPU's own timeline, without
 * synchronising inside the sequence. Rank 0 prints the median of each step over the repetitions
 * (the ranks run the same sequence; a collective's time includes waiting for the slower rank). */
#include <string.h>

#include "demo.h"
#include "dsa_testing.h"

#define BENCH_REPS 25
#define BENCH_MARKS 48
#define BENCH_CONTEXT 16384 /* tokens of each request */

static unsigned brng = 7u;
static uint16_t bf16_rand(void)
{
    brng = brng * 1664525u + 1013904223u;
    return ref_bf16_encode((float)((int)(brng >> 9) - (1 << 22)) / (float)(1 << 22));
}

static CUdeviceptr dev_rand(size_t elems) /* bf16 in [-1, 1) */
{
    uint16_t *h = malloc(elems * 2);
    for (size_t i = 0; i < elems; i++)
        h[i] = bf16_rand();
    CUdeviceptr d = demo_up(h, elems * 2);
    free(h);
    return d;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* The step of B decode rows, each the last token of its own BENCH_CONTEXT-token request. */
static void bench_rows(dsa_ctx_t ctx, const dsa_config_info_t *ci, int rank, int B)
{
    const int W = ci->dcp, I = ci->interleave, bs = ci->block_size;
    const int64_t S = BENCH_CONTEXT, local = (S + (int64_t)W * I - 1) / ((int64_t)W * I) * I;
    const int64_t nb = (local + bs - 1) / bs, nblocks = (int64_t)B * nb;
    const size_t L = (size_t)ci->kv_lora_rank, R = (size_t)ci->qk_rope_dim, H = (size_t)ci->heads_local;
    const size_t IH = (size_t)ci->idx_heads, ID = (size_t)ci->idx_head_dim, K = (size_t)ci->idx_topk;
    /* this rank's block table: request r's local blocks r * nb .. r * nb + nb - 1 */
    int32_t *table = malloc((size_t)nblocks * 4);
    for (int64_t i = 0; i < nblocks; i++)
        table[i] = (int32_t)i;
    CUdeviceptr d_table = demo_up(table, (size_t)nblocks * 4), kv_cache, idx_cache;
    CK(dsa_cu.cuMemAlloc(&kv_cache, (size_t)nblocks * (size_t)bs * (size_t)ci->cache_bytes_per_token));
    CK(dsa_cu.cuMemAlloc(&idx_cache, (size_t)nblocks * (size_t)ci->idx_page_bytes));

    /* fill the caches: the prologue over every position, CHUNK tokens a call, drawn from a random
     * pool at a moving offset (so that chunks differ) */
    const int64_t CHUNK = 16384, POOL = 2 * CHUNK;
    CUdeviceptr d_kv = dev_rand((size_t)POOL * (L + R)), d_k = dev_rand((size_t)POOL * ID), d_qc;
    CUdeviceptr d_w = dev_rand(L + ID), d_nb = dev_rand(ID), d_qw = dev_rand((size_t)ci->q_lora_rank);
    CK(dsa_cu.cuMemAlloc(&d_qc, (size_t)CHUNK * (size_t)ci->q_lora_rank * 2));
    CK(dsa_cu.cuMemsetD8(d_qc, 0, (size_t)CHUNK * (size_t)ci->q_lora_rank * 2));
    int64_t *pos = malloc((size_t)CHUNK * 8), *slot = malloc((size_t)CHUNK * 8);
    CUdeviceptr d_pos, d_slot, d_qo;
    CK(dsa_cu.cuMemAlloc(&d_pos, (size_t)CHUNK * 8));
    CK(dsa_cu.cuMemAlloc(&d_slot, (size_t)CHUNK * 8));
    CK(dsa_cu.cuMemAlloc(&d_qo, (size_t)CHUNK * (size_t)ci->q_lora_rank * 2));
    dsa_prologue_args_t pa;
    memset(&pa, 0, sizeof pa);
    pa.size = sizeof pa;
    pa.q_c = (void *)d_qc, pa.q_c_out = (void *)d_qo, pa.positions = (const int64_t *)d_pos;
    pa.slot_mapping = (const int64_t *)d_slot, pa.q_norm_w = (void *)d_qw, pa.kv_norm_w = (void *)d_w;
    pa.idx_norm_w = (void *)(d_w + L * 2), pa.idx_norm_b = (void *)d_nb;
    pa.kv_cache = (void *)kv_cache, pa.idx_cache = (void *)idx_cache, pa.num_cache_blocks = nblocks;
    for (int64_t t0 = 0; t0 < (int64_t)B * S; t0 += CHUNK) {
        for (int64_t i = 0; i < CHUNK; i++) {
            const int64_t g = t0 + i, r = g / S, p = g % S;
            pos[i] = p;
            slot[i] = ref_dcp_owner(p, W, I) == rank
                          ? ref_dcp_slot(ref_dcp_local_index(p, W, I), table + r * nb, nb, bs)
                          : -1;
        }
        CK(dsa_cu.cuMemcpyHtoD(d_pos, pos, (size_t)CHUNK * 8));
        CK(dsa_cu.cuMemcpyHtoD(d_slot, slot, (size_t)CHUNK * 8));
        const int64_t off = (t0 / CHUNK * 977) % CHUNK;
        pa.num_tokens = CHUNK;
        pa.kv = (void *)(d_kv + (size_t)off * (L + R) * 2);
        pa.idx_k = (void *)(d_k + (size_t)off * ID * 2);
        DSA(dsa_prologue(ctx, &pa, NULL));
    }
    CK(dsa_cu.cuCtxSynchronize());

    /* the decode step's inputs: row r is position S - 1 of request r */
    int32_t *req = malloc((size_t)B * 4), *lens = malloc((size_t)B * 4);
    for (int r = 0; r < B; r++) {
        req[r] = r, lens[r] = (int32_t)S;
        pos[r] = S - 1;
        slot[r] = ref_dcp_owner(S - 1, W, I) == rank
                      ? ref_dcp_slot(ref_dcp_local_index(S - 1, W, I), table + (int64_t)r * nb, nb, bs)
                      : -1;
    }
    CK(dsa_cu.cuMemcpyHtoD(d_pos, pos, (size_t)B * 8));
    CK(dsa_cu.cuMemcpyHtoD(d_slot, slot, (size_t)B * 8));
    CUdeviceptr d_req = demo_up(req, (size_t)B * 4), d_lens = demo_up(lens, (size_t)B * 4);
    CUdeviceptr d_iq = dev_rand((size_t)B * IH * ID), d_ql = dev_rand((size_t)B * H * L), d_qp = dev_rand((size_t)B * H * R);
    float *wts = malloc((size_t)B * IH * 4);
    for (size_t i = 0; i < (size_t)B * IH; i++)
        wts[i] = ref_bf16_decode(bf16_rand());
    CUdeviceptr d_wts = demo_up(wts, (size_t)B * IH * 4), d_topk, d_out, d_lse;
    CK(dsa_cu.cuMemAlloc(&d_topk, (size_t)B * K * 4));
    CK(dsa_cu.cuMemAlloc(&d_out, (size_t)B * H * L * 2));
    CK(dsa_cu.cuMemAlloc(&d_lse, (size_t)B * H * 4));
    dsa_index_args_t ia;
    memset(&ia, 0, sizeof ia);
    ia.size = sizeof ia;
    ia.num_tokens = B;
    ia.q = (void *)d_iq, ia.weights = (const float *)d_wts, ia.positions = (const int64_t *)d_pos;
    ia.req_of_token = (const int32_t *)d_req, ia.seq_lens = (const int32_t *)d_lens;
    ia.block_table = (const int32_t *)d_table, ia.num_requests = B, ia.max_blocks = nb;
    ia.idx_cache = (void *)idx_cache, ia.num_cache_blocks = nblocks, ia.topk = (int32_t *)d_topk;
    dsa_attend_args_t aa;
    memset(&aa, 0, sizeof aa);
    aa.size = sizeof aa;
    aa.num_tokens = B;
    aa.q_lat = (void *)d_ql, aa.q_pe = (void *)d_qp, aa.positions = (const int64_t *)d_pos;
    aa.topk = (const int32_t *)d_topk, aa.req_of_token = (const int32_t *)d_req, aa.seq_lens = (const int32_t *)d_lens;
    aa.block_table = (const int32_t *)d_table, aa.num_requests = B, aa.max_blocks = nb;
    aa.kv_cache = (void *)kv_cache, aa.num_cache_blocks = nblocks, aa.out = (void *)d_out, aa.lse = (float *)d_lse;
    pa.num_tokens = B; /* the rows' own new tokens */
    pa.kv = (void *)d_kv, pa.idx_k = (void *)d_k;

    CUevent ev[BENCH_MARKS + 1];
    for (int i = 0; i <= BENCH_MARKS; i++)
        CK(dsa_cu.cuEventCreate(&ev[i], 0));
    const char *names[BENCH_MARKS];
    float times[BENCH_MARKS][BENCH_REPS], total[BENCH_REPS];
    int count = 0, steps = -1;
    for (int rep = -3; rep < BENCH_REPS; rep++) { /* three warm-ups */
        DSA(dsa_testing_stage_events(ctx, (void *const *)(ev + 1), names, BENCH_MARKS, &count));
        CK(dsa_cu.cuEventRecord(ev[0], NULL));
        DSA(dsa_prologue(ctx, &pa, NULL));
        DSA(dsa_index(ctx, &ia, NULL));
        DSA(dsa_attend(ctx, &aa, NULL));
        DSA(dsa_testing_stage_events(ctx, NULL, NULL, 0, NULL));
        CK(dsa_cu.cuCtxSynchronize());
        if (steps >= 0 && count != steps) {
            fprintf(stderr, "dsa-demo --bench: %d steps in one repetition, %d in another\n", steps, count);
            exit(1);
        }
        steps = count;
        if (rep < 0)
            continue;
        CK(dsa_cu.cuEventElapsedTime(&total[rep], ev[0], ev[count]));
        for (int i = 0; i < count; i++)
            CK(dsa_cu.cuEventElapsedTime(&times[i][rep], ev[i], ev[i + 1]));
    }
    if (rank == 0) {
        qsort(total, BENCH_REPS, sizeof total[0], cmp_float);
        printf("| %s | %d | %d |", ci->name, W, B);
        for (int i = 0; i < steps; i++) {
            qsort(times[i], BENCH_REPS, sizeof times[i][0], cmp_float);
            printf(" %s %.1f%s", names[i], 1e3 * times[i][BENCH_REPS / 2], i + 1 < steps ? ";" : "");
        }
        printf(" | %.1f |\n", 1e3 * total[BENCH_REPS / 2]);
        fflush(stdout);
    }
    for (int i = 0; i <= BENCH_MARKS; i++)
        dsa_cu.cuEventDestroy(ev[i]);
    CUdeviceptr mem[] = {d_table, kv_cache, idx_cache, d_kv, d_k, d_qc, d_w, d_nb, d_qw, d_pos, d_slot, d_qo,
                         d_req, d_lens, d_iq, d_ql, d_qp, d_wts, d_topk, d_out, d_lse};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
        dsa_cu.cuMemFree(mem[i]);
    free(table), free(pos), free(slot), free(req), free(lens), free(wts);
}

void demo_bench_rank(dsa_ctx_t ctx, int rank)
{
    dsa_config_info_t ci;
    ci.size = sizeof ci;
    DSA(dsa_ctx_config(ctx, &ci));
    if (rank == 0) {
        printf("  each row the last token of its own %d-token request; median of %d repetitions; step times in us "
               "on rank 0's GPU timeline (a collective's time includes waiting for the other ranks)\n",
               BENCH_CONTEXT, BENCH_REPS);
        printf("| configuration | DCP | rows | steps (us) | whole step us |\n| --- | --- | --- | --- | --- |\n");
        fflush(stdout);
    }
    const int rows[] = {1, 64, 128};
    for (int i = 0; i < 3; i++)
        bench_rows(ctx, &ci, rank, rows[i]);
}
