/* Soak of the whole step captured in a CUDA graph: prologue (query norm, this rank's caches, the
 * indexer key), index (stage B, the top-k rows) and attend (stage C) of one layer, on one GPU
 * (`test_soak [REPLAYS]`, glm5.2_tp4_dcp1_i1_fp8_ds_mla) and over NCCL on two (`test_soak nccl
 * [REPLAYS]`, glm5.2_tp2_dcp2_i1_nvfp4_ds_mla, one process per GPU). The graph is replayed REPLAYS
 * times (default 100000); at the end every output (q_c_out, the top-k rows, the attention output and
 * LSE) must be bit-identical to the first replay's, no call or replay may fail (nor, over NCCL, a
 * barrier of the fused exchange time out: dsa_take_rejected), and the device's free memory must not
 * have moved. The inputs are random (this test checks repeatability and resources;
 * test_prologue, test_index and test_attend check the values). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "dsa.h"
#include "harness.h"

enum { NREQ = 8, LEN = 3000 };
#define T ((size_t)NREQ) /* rows of the step: a decode row per request */

typedef struct step {
    dsa_ctx_t ctx;
    dsa_config_info_t info;
    dsa_prologue_args_t pro;
    dsa_index_args_t idx;
    dsa_attend_args_t att;
    CUdeviceptr outs[4];
    size_t out_bytes[4];
} step_t;

static CUdeviceptr rand_bf16(size_t n)
{
    uint16_t *h = malloc(n * 2);
    fill_bf16(h, n, 1.0f, 0.0f);
    CUdeviceptr d = dev_up(h, n * 2);
    free(h);
    return d;
}

/* Inputs of every stage for NREQ requests of LEN tokens, a decode row each, on rank `rank` of W;
 * the caches filled by a prologue over all LEN positions first (outside the graph). */
static int setup(step_t *s, const char *config, int rank, const void *nccl_id, int device)
{
    dsa_options_t o = harness_options();
    o.device = device;
    o.nccl_id = nccl_id;
    o.dcp_rank = rank;
    if (dsa_ctx_create(config, &o, &s->ctx) != DSA_SUCCESS) {
        printf("FAIL %s: dsa_ctx_create: %s\n", config, dsa_last_error(NULL));
        return -1;
    }
    if (harness_config(config, &s->info) != 0)
        return -1;
    const dsa_config_info_t *g = &s->info;
    const int W = g->dcp, bs = g->block_size;
    /* the geometry as sizes */
    const size_t Q = (size_t)g->q_lora_rank, KVD = (size_t)g->kv_dim, ID = (size_t)g->idx_head_dim;
    const size_t IH = (size_t)g->idx_heads, HL = (size_t)g->heads_local, L = (size_t)g->kv_lora_rank;
    const size_t R = (size_t)g->qk_rope_dim, K = (size_t)g->idx_topk, BPT = (size_t)g->cache_bytes_per_token;
    const size_t PAGE = (size_t)g->idx_page_bytes, BS = (size_t)bs;
    const int64_t maxb = (LEN / W + bs) / bs + 1, nblocks = NREQ * maxb, all = (int64_t)NREQ * LEN;
    /* slots of every position on this rank (-1 where another rank owns it), block table identity */
    int64_t *slot = malloc((size_t)all * 8), *pos = malloc((size_t)all * 8);
    int32_t *table = malloc((size_t)nblocks * 4), lens[NREQ], req[NREQ];
    for (int64_t i = 0; i < nblocks; i++)
        table[i] = (int32_t)i;
    for (int r = 0; r < NREQ; r++) {
        lens[r] = LEN;
        req[r] = r;
        for (int p = 0; p < LEN; p++) {
            const int64_t l = ref_dcp_local_index(p, W, g->interleave);
            const int owner = ref_dcp_owner(p, W, g->interleave);
            pos[(int64_t)r * LEN + p] = p;
            slot[(int64_t)r * LEN + p] = owner == rank ? (r * maxb + l / bs) * bs + l % bs : -1;
        }
    }
    CUdeviceptr d_slot = dev_up(slot, (size_t)all * 8), d_pos = dev_up(pos, (size_t)all * 8);
    CUdeviceptr kv_cache = dev_alloc((size_t)nblocks * BS * BPT);
    CUdeviceptr idx_cache = dev_alloc((size_t)nblocks * PAGE);
    CK(cuMemsetD8(kv_cache, 0, (size_t)nblocks * BS * BPT));
    CK(cuMemsetD8(idx_cache, 0, (size_t)nblocks * PAGE));
    const CUdeviceptr qw = rand_bf16(Q), kvw = rand_bf16(L);
    const CUdeviceptr iw = rand_bf16(ID), ib = rand_bf16(ID);
    dsa_prologue_args_t p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.num_tokens = all;
    p.q_c = (void *)rand_bf16((size_t)all * Q);
    p.q_c_out = (void *)dev_alloc((size_t)all * Q * 2);
    p.kv = (void *)rand_bf16((size_t)all * KVD);
    p.idx_k = (void *)rand_bf16((size_t)all * ID);
    p.positions = (const int64_t *)d_pos;
    p.slot_mapping = (const int64_t *)d_slot;
    p.q_norm_w = (void *)qw, p.kv_norm_w = (void *)kvw, p.idx_norm_w = (void *)iw, p.idx_norm_b = (void *)ib;
    p.kv_cache = (void *)kv_cache, p.idx_cache = (void *)idx_cache;
    p.num_cache_blocks = nblocks;
    if (dsa_prologue(s->ctx, &p, NULL) != DSA_SUCCESS) {
        printf("FAIL prefill prologue: %s\n", dsa_last_error(s->ctx));
        return -1;
    }
    CK(cuCtxSynchronize());
    /* the step: the last position of each request (its decode row), whose inputs are the prefill's */
    const CUdeviceptr topk = dev_alloc(T * K * 4), d_req = dev_up(req, sizeof req);
    const CUdeviceptr d_lens = dev_up(lens, sizeof lens), d_table = dev_up(table, (size_t)nblocks * 4);
    int64_t rpos[NREQ], rslot[NREQ];
    for (int r = 0; r < NREQ; r++)
        rpos[r] = LEN - 1, rslot[r] = slot[(int64_t)r * LEN + LEN - 1];
    s->pro = p;
    s->pro.num_tokens = NREQ;
    s->pro.q_c_stride = (int64_t)LEN * (int64_t)Q; /* row r: request r's last token */
    s->pro.q_c = (const uint16_t *)p.q_c + (size_t)(LEN - 1) * Q;
    s->pro.kv_stride = (int64_t)LEN * (int64_t)KVD;
    s->pro.kv = (const uint16_t *)p.kv + (size_t)(LEN - 1) * KVD;
    s->pro.idx_k_stride = (int64_t)LEN * (int64_t)ID;
    s->pro.idx_k = (const uint16_t *)p.idx_k + (size_t)(LEN - 1) * ID;
    s->pro.positions = (const int64_t *)dev_up(rpos, sizeof rpos);
    s->pro.slot_mapping = (const int64_t *)dev_up(rslot, sizeof rslot);
    s->pro.topk = (int32_t *)topk;
    s->pro.clear_topk = 1;
    memset(&s->idx, 0, sizeof s->idx);
    s->idx.size = sizeof s->idx;
    s->idx.num_tokens = NREQ;
    s->idx.q = (void *)rand_bf16(T * IH * ID);
    float *wts = malloc(T * IH * 4);
    for (size_t i = 0; i < T * IH; i++)
        wts[i] = frand();
    s->idx.weights = (const float *)dev_up(wts, T * IH * 4);
    s->idx.positions = s->pro.positions;
    s->idx.req_of_token = (const int32_t *)d_req, s->idx.seq_lens = (const int32_t *)d_lens;
    s->idx.block_table = (const int32_t *)d_table;
    s->idx.num_requests = NREQ, s->idx.max_blocks = maxb;
    s->idx.idx_cache = (void *)idx_cache, s->idx.num_cache_blocks = nblocks;
    s->idx.topk = (int32_t *)topk;
    memset(&s->att, 0, sizeof s->att);
    s->att.size = sizeof s->att;
    s->att.num_tokens = NREQ;
    s->att.q_lat = (void *)rand_bf16(T * HL * L);
    s->att.q_pe = (void *)rand_bf16(T * HL * R);
    s->att.positions = s->pro.positions, s->att.topk = (const int32_t *)topk;
    s->att.req_of_token = (const int32_t *)d_req, s->att.seq_lens = (const int32_t *)d_lens;
    s->att.block_table = (const int32_t *)d_table, s->att.num_requests = NREQ, s->att.max_blocks = maxb;
    s->att.kv_cache = (void *)kv_cache, s->att.num_cache_blocks = nblocks;
    s->att.out = (void *)dev_alloc(T * HL * L * 2);
    s->att.lse = (float *)dev_alloc(T * HL * 4);
    const CUdeviceptr outs[4] = {(CUdeviceptr)s->pro.q_c_out, topk, (CUdeviceptr)s->att.out, (CUdeviceptr)s->att.lse};
    const size_t ob[4] = {T * Q * 2, T * K * 4, T * HL * L * 2, T * HL * 4};
    memcpy(s->outs, outs, sizeof outs);
    memcpy(s->out_bytes, ob, sizeof ob);
    free(slot), free(pos), free(table), free(wts);
    return 0;
}

static unsigned char *snapshot(const step_t *s)
{
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        n += s->out_bytes[i];
    unsigned char *h = malloc(n), *at = h;
    for (int i = 0; i < 4; i++) {
        dev_get(at, s->outs[i], s->out_bytes[i]);
        at += s->out_bytes[i];
    }
    return h;
}

/* Captures the step into a graph, replays it `replays` times and checks; 0 when all is well. */
static int soak(const char *config, int rank, const void *nccl_id, int device, long replays)
{
    step_t s;
    if (setup(&s, config, rank, nccl_id, device) != 0)
        return 1;
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    int bad = dsa_prologue(s.ctx, &s.pro, st) != DSA_SUCCESS || dsa_index(s.ctx, &s.idx, st) != DSA_SUCCESS ||
              dsa_attend(s.ctx, &s.att, st) != DSA_SUCCESS;
    if (bad)
        printf("FAIL rank %d: a call during capture: %s\n", rank, dsa_last_error(s.ctx));
    CUgraph graph;
    CK(cuStreamEndCapture(st, &graph));
    CUgraphExec exec;
    CK(cuGraphInstantiate(&exec, graph, 0));
    /* the outputs poisoned (bf16 and fp32 NaN, top-k -1) before the first replay and again before
     * the last, so that the two snapshots compare what those replays wrote, not what was left */
    for (int i = 0; i < 4; i++)
        CK(cuMemsetD8(s.outs[i], 0xff, s.out_bytes[i]));
    CK(cuGraphLaunch(exec, st));
    CK(cuStreamSynchronize(st));
    unsigned char *first = snapshot(&s);
    size_t free0, total;
    CK(cuMemGetInfo(&free0, &total));
    for (long i = 1; i < replays - 1; i++) {
        CK(cuGraphLaunch(exec, st));
        if (i % 10000 == 0)
            CK(cuStreamSynchronize(st)); /* a failing replay is reported near where it happened */
    }
    CK(cuStreamSynchronize(st));
    for (int i = 0; i < 4; i++)
        CK(cuMemsetD8(s.outs[i], 0xff, s.out_bytes[i]));
    CK(cuGraphLaunch(exec, st));
    CK(cuStreamSynchronize(st));
    size_t free1;
    CK(cuMemGetInfo(&free1, &total));
    unsigned char *last = snapshot(&s);
    size_t n = s.out_bytes[0] + s.out_bytes[1] + s.out_bytes[2] + s.out_bytes[3];
    const int same = memcmp(first, last, n) == 0;
    int32_t *rows = (int32_t *)(last + s.out_bytes[0]);
    int have = 0;
    for (size_t i = 0; i < T * (size_t)s.info.idx_topk; i++)
        have += rows[i] >= 0;
    printf("%s rank %d: %s, prologue + index + attend in one CUDA graph, %ld replays: outputs %s, free device "
           "memory %zu -> %zu bytes, %d of %d top-k entries set\n",
           !bad && same && free0 == free1 && have > 0 ? "ok  " : "FAIL", rank, config, replays,
           same ? "bit-identical to the first replay" : "DIFFER", free0, free1, have, NREQ * s.info.idx_topk);
    bad |= !same || free0 != free1 || have == 0;
    uint64_t counts[2]; /* over NCCL: no barrier of the fused exchange timed out in any replay */
    if (dsa_take_rejected(s.ctx, counts) != DSA_SUCCESS) {
        printf("FAIL rank %d: %s\n", rank, dsa_last_error(s.ctx));
        bad = 1;
    }
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphDestroy(graph));
    CK(cuStreamDestroy(st));
    dsa_ctx_destroy(s.ctx);
    free(first), free(last);
    return bad;
}

typedef struct nccl_job {
    ncclUniqueId id;
    long replays;
} nccl_job_t;

static int nccl_rank(int rank, int W, void *arg)
{
    (void)W;
    const nccl_job_t *j = arg;
    harness_rng = 20261130u; /* the same inputs on both ranks: the indexer query is the whole group's */
    return soak("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", rank, &j->id, rank, j->replays);
}

int main(int argc, char **argv)
{
    const int nccl = argc > 1 && !strcmp(argv[1], "nccl");
    const long replays = argc > 1 + nccl ? atol(argv[1 + nccl]) : 100000;
    if (replays < 2) { /* the first and the last replay are compared */
        printf("usage: test_soak [nccl] [REPLAYS >= 2]\n");
        return 2;
    }
    if (nccl) { /* before any CUDA call: the ranks fork */
        if (!harness_have_gpus("test_soak nccl", 2))
            return 0;
        nccl_job_t job = {.replays = replays};
        CHECK(harness_nccl_ids(&job.id, 1) == 0);
        CHECK(harness_run_ranks(2, nccl_rank, &job) == 0);
        CHECK_DONE();
    }
    harness_start("test_soak");
    harness_rng = 20261130u;
    CHECK(soak("glm5.2_tp4_dcp1_i1_fp8_ds_mla", 0, NULL, 0, replays) == 0);
    CHECK_DONE();
}
