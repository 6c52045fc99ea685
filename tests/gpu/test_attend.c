/* GPU tests of stage C through libdsa, on the CPU's batch (tests/ref/world.c): for every linked
 * configuration, W = dcp ranks on one GPU (the in-process group, one thread per rank, as DCP
 * ranks would be processes) run dsa_attend on their shards, and each rank's output equals DCP = 1
 * of the CPU reference on the same inputs. Then the edge cases: keys all on one rank, a rank
 * with none, rows with no valid key. `test_attend CONFIG RANK W` (the NCCL test uses it) runs one
 * rank of a group whose ncclUniqueId is read from stdin.
 *
 * Tolerances, as FlashMLA's tests compare bf16 output against an fp32 reference over the same
 * bf16-dequantised keys (its atol/rtol on elements, and a cosine bound): the kernel multiplies
 * bf16 P (softmax weights rounded to bf16, each off by up to 2^-9 of itself) by V, which moves an
 * output by up to 2^-9 of the largest |v| among the row's keys, and rounds the output to bf16
 * (2^-8 of itself, up to an ulp with the fp32 differences): each element within 2^-7 of its value
 * plus 2^-8 of the row's largest key value, and per row cosine similarity >= 0.99999; the LSE
 * comes from fp32 weights and fp32 sums of exact bf16 products: 1e-5 relative (of max(|L|, 1)). */
#include <cuda.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "../ref/ref.h"
#include "../ref/world.h"
#include "dsa.h"
#include "dsa_testing.h"
#include "../ref/geo.h"

#define CK(call)                                                                                             \
    do {                                                                                                     \
        CUresult r_ = (call);                                                                                \
        if (r_ != CUDA_SUCCESS) {                                                                            \
            printf("FAIL %s:%d: %s: %d\n", __FILE__, __LINE__, #call, (int)r_);                              \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static unsigned rng;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

static CUdeviceptr up(const void *h, size_t n)
{
    CUdeviceptr d;
    CK(cuMemAlloc(&d, n ? n : 1));
    if (n)
        CK(cuMemcpyHtoD(d, h, n));
    return d;
}

typedef struct rank_io {
    dsa_ctx_t ctx;
    CUstream stream;
    dsa_attend_args_t a;
    CUdeviceptr d[10];
    uint16_t *out;
    float *lse;
    dsa_result_t rc;
} rank_io_t;

/* The world's inputs of rank r, on the device. q_lat and q_pe are drawn here (bf16); the packed
 * query the reference sees is rebuilt from them with the reference rope. */
static void setup_rank(world_t *w, const geo_t *g, int r, uint16_t *q_lat, uint16_t *q_pe, rank_io_t *io)
{
    memset(&io->a, 0, sizeof io->a);
    io->a.size = sizeof io->a;
    world_shard_t *sh = &w->shard[r];
    size_t T = (size_t)w->T, H = (size_t)w->H;
    int n = 0;
    io->d[n++] = up(q_lat, T * H * 512 * 2);
    io->d[n++] = up(q_pe, T * H * 64 * 2);
    io->d[n++] = up(w->pos_of, T * 8);
    io->d[n++] = up(w->topk, T * (size_t)w->K * 4);
    io->d[n++] = up(w->req_of, T * 4);
    io->d[n++] = up(w->len, (size_t)w->nreq * 4);
    io->d[n++] = up(sh->table, (size_t)(w->nreq * sh->max_blocks) * 4);
    io->d[n++] = up(sh->cache, (size_t)(sh->num_blocks * w->bs * w->bpt));
    CK(cuMemAlloc(&io->d[n], T * H * 512 * 2));
    CK(cuMemsetD8(io->d[n++], 0xff, T * H * 512 * 2)); /* poison: NaN */
    CK(cuMemAlloc(&io->d[n], T * H * 4));
    CK(cuMemsetD8(io->d[n++], 0xff, T * H * 4));
    dsa_attend_args_t *a = &io->a;
    a->num_tokens = w->T;
    a->q_lat = (void *)io->d[0];
    a->q_pe = (void *)io->d[1];
    a->positions = (const int64_t *)io->d[2];
    a->topk = (const int32_t *)io->d[3];
    a->req_of_token = (const int32_t *)io->d[4];
    a->seq_lens = (const int32_t *)io->d[5];
    a->block_table = (const int32_t *)io->d[6];
    a->num_requests = w->nreq;
    a->max_blocks = sh->max_blocks;
    a->kv_cache = (void *)io->d[7];
    a->num_cache_blocks = sh->num_blocks;
    a->out = (void *)io->d[8];
    a->lse = (float *)io->d[9];
    (void)g;
}

static void make_queries(world_t *w, const geo_t *g, uint16_t **q_lat, uint16_t **q_pe)
{
    size_t T = (size_t)w->T, H = (size_t)w->H;
    for (int r = 0; r < w->W; r++) {
        q_lat[r] = malloc(T * H * 512 * 2);
        q_pe[r] = malloc(T * H * 64 * 2);
        for (size_t i = 0; i < T * H * 512; i++)
            q_lat[r][i] = ref_bf16_encode(frand());
        for (size_t i = 0; i < T * H * 64; i++)
            q_pe[r][i] = ref_bf16_encode(frand());
        for (size_t t = 0; t < T; t++) {
            float c[32], s[32];
            ref_rope_cos_sin(&g->rope, (int)w->pos_of[t], c, s);
            for (size_t h = 0; h < H; h++) {
                float *q = w->q + (((size_t)r * T + t) * H + h) * 576;
                for (int d = 0; d < 512; d++)
                    q[d] = ref_bf16_decode(q_lat[r][(t * H + h) * 512 + (size_t)d]);
                for (int d = 0; d < 64; d++)
                    q[512 + d] = ref_bf16_decode(q_pe[r][(t * H + h) * 64 + (size_t)d]);
                ref_rope_apply(q + 512, 64, c, s, g->rope_interleaved);
                for (int d = 512; d < 576; d++)
                    q[d] = ref_bf16_round(q[d]); /* the packed query is bf16 */
            }
        }
    }
}

static void *run_rank(void *arg)
{
    rank_io_t *io = arg;
    io->rc = dsa_attend(io->ctx, &io->a, io->stream);
    return NULL;
}

/* Compares rank r's output and LSE with the DCP = 1 reference; returns the number of bad values. */
static int compare(const world_t *w, int r, const rank_io_t *io, const float *eo, const float *el, double *worst)
{
    size_t T = (size_t)w->T, H = (size_t)w->H;
    uint16_t *o = malloc(T * H * 512 * 2);
    float *l = malloc(T * H * 4);
    CK(cuMemcpyDtoH(o, io->d[8], T * H * 512 * 2));
    CK(cuMemcpyDtoH(l, io->d[9], T * H * 4));
    float *smax = malloc(T * H * 4), *vmax = malloc(T * sizeof(float)); /* per (row, head) and per row */
    for (size_t t = 0; t < T; t++) {
        world_score_absmax(w, r, (int)t, smax + t * H);
        vmax[t] = world_row_vmax(w, (int)t);
    }
    int bad = 0;
    for (size_t i = 0; i < T * H; i++) {
        const float *e = eo + ((size_t)r * T * H + i) * 512;
        float el_i = el[(size_t)r * T * H + i];
        const double row_vmax = vmax[i / H];
        double m = 0, dot = 0, ne = 0, ng = 0;
        for (int d = 0; d < 512; d++)
            m = fmax(m, fabs(e[d]));
        for (int d = 0; d < 512; d++) {
            float got = ref_bf16_decode(o[i * 512 + (size_t)d]);
            double err = fabs(got - e[d]);
            worst[0] = fmax(worst[0], m > 0 ? err / m : err);
            bad += !(err <= 0x1p-7 * fabs(e[d]) + 0x1p-8 * row_vmax);
            dot += (double)got * e[d];
            ne += (double)e[d] * e[d];
            ng += (double)got * got;
        }
        if (ne > 0) {
            double cs = dot / sqrt(ne * ng);
            worst[1] = fmin(worst[1], cs);
            bad += !(cs >= 0.99999);
        } else {
            bad += ng != 0; /* no key: exactly 0 */
        }
        if (isinf(el_i)) {
            bad += !(l[i] == el_i);
        } else {
            /* 1e-5 relative, plus the scores' own rounding: a score is a 576-term fp32 dot product
             * that the tensor cores accumulate in 36 steps of 16 products (plus the split-K sum),
             * each addition truncating (round toward zero), so its error is a few ulp of its largest
             * partial sum, at most scale * sum |q_d k_d| (smax); the LSE moves by at most the largest
             * score error. 2^-20 * smax is 16 ulp of that bound. The two misses seen on an H200
             * (5.5e-5 and 9.8e-5 relative to max(|L|, 1)) were not this: the query's RoPE had been
             * contracted into an FMA and a bf16 query element rounded the other way than here; the
             * packing now rounds like the reference and the worst seen since is 3e-6. */
            double err = fabs(l[i] - el_i) / fmax(fabs(el_i), 1.0);
            worst[2] = fmax(worst[2], err);
            if (!(fabs(l[i] - el_i) <= 1e-5 * fmax(fabs(el_i), 1.0) + 0x1p-20 * smax[i])) {
                if (bad < 4) /* enough to tell a rounding outlier from a wrong row */
                    printf("  rank %d row %zu head %zu: LSE %.7g, expected %.7g (score bound %.4g)\n", r, i / H, i % H,
                           (double)l[i], (double)el_i, (double)smax[i]);
                bad++;
            }
        }
    }
    free(o);
    free(l);
    free(smax);
    free(vmax);
    return bad;
}

/* nccl_id NULL: all W ranks in this process (in-process group, one thread each). Otherwise only
 * rank `only_rank`, on GPU only_rank, in a group over NCCL that the other processes join. */
static void run_world(const char *name, int mode, unsigned seed, const void *nccl_id, int only_rank)
{
    geo_t g;
    if (geo_of(name, &g) != 0) {
        printf("FAIL %s: unknown geometry\n", name);
        check_failed++;
        return;
    }
    int W = name_value(name, "_dcp"), I = name_value(name, "_i"), tp = name_value(name, "_tp");
    int H = (strncmp(name, "deepseek", 8) == 0 ? 128 : strncmp(name, "glm", 3) == 0 ? 64 : 16) / tp;
    world_t w;
    rng = seed;
    world_build(&w, W, I, g.bs, g.fmt, H, g.topk, mode, seed);
    w.scale = 0; /* set from the configuration below */
    w.scale = strncmp(name, "deepseek", 8) == 0 ? 0.135233779f : strncmp(name, "glm", 3) == 0 ? 0.0625f
                                                                                                 : 0.0f;
    if (w.scale == 0) /* tiny: (32 + 64)^-0.5 * mscale(4, 1)^2 */
        w.scale = (float)(pow(96.0, -0.5) * pow(0.1 * log(4.0) + 1.0, 2.0));
    uint16_t *q_lat[8], *q_pe[8];
    make_queries(&w, &g, q_lat, q_pe);
    size_t n = (size_t)W * (size_t)w.T * (size_t)H;
    float *eo = malloc(n * 512 * 4), *el = malloc(n * 4);
    world_expect(&w, eo, el);

    dsa_inproc_group_t group = NULL;
    if (W > 1 && !nccl_id)
        dsa_inproc_group_create(W, &group);
    rank_io_t io[8];
    memset(io, 0, sizeof io);
    CUstream stream;
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    int ok = 1;
    const int r0 = nccl_id ? only_rank : 0, r1 = nccl_id ? only_rank + 1 : W;
    for (int r = r0; r < r1; r++) {
        dsa_options_t o = DSA_OPTIONS_INIT;
        o.cache_dir = getenv("DSA_TEST_CACHE");
        o.attend_tokens = 4; /* 11 rows: three chunks, so chunking is exercised */
        o.inproc_group = group;
        o.nccl_id = nccl_id;
        o.device = nccl_id ? only_rank : 0;
        o.dcp_rank = r;
        if (dsa_ctx_create(name, &o, &io[r].ctx) != DSA_SUCCESS) {
            printf("FAIL %s: dsa_ctx_create: %s\n", name, dsa_last_error(NULL));
            ok = 0;
            break;
        }
        io[r].stream = stream;
        setup_rank(&w, &g, r, q_lat[r], q_pe[r], &io[r]);
    }
    pthread_t th[8];
    for (int r = r0; ok && r < r1; r++)
        pthread_create(&th[r], NULL, run_rank, &io[r]);
    for (int r = r0; ok && r < r1; r++)
        pthread_join(th[r], NULL);
    CK(cuStreamSynchronize(stream));
    double worst[3] = {0, 1, 0};
    int bad = 0;
    for (int r = r0; ok && r < r1; r++) {
        if (io[r].rc != DSA_SUCCESS) {
            printf("FAIL %s rank %d: %s\n", name, r, dsa_last_error(io[r].ctx));
            ok = 0;
            continue;
        }
        bad += compare(&w, r, &io[r], eo, el, worst);
    }
    CHECK(ok && bad == 0);
    printf("%s %s mode %d%s: %d bad; worst rel err %.2e, min cosine %.7f, worst lse rel %.2e\n",
           ok && bad == 0 ? "ok  " : "FAIL", name, mode, nccl_id ? " (NCCL rank)" : "", bad, worst[0], worst[1],
           worst[2]);
    for (int r = r0; r < r1; r++) {
        for (int k = 0; k < 10; k++)
            if (io[r].d[k])
                cuMemFree(io[r].d[k]);
        dsa_ctx_destroy(io[r].ctx);
    }
    for (int r = 0; r < W; r++) {
        free(q_lat[r]);
        free(q_pe[r]);
    }
    dsa_inproc_group_destroy(group);
    cuStreamDestroy(stream);
    free(eo);
    free(el);
    world_free(&w);
}

static void test_config(const char *name, int mode, unsigned seed)
{
    run_world(name, mode, seed, NULL, 0);
}

/* dsa_attend's argument checks: each bad argument gives DSA_ERROR_INVALID_ARGUMENT and a message
 * naming it, and nothing runs (the poisoned output stays as it was). */
static void test_bad_arguments(void)
{
    const char *name = "tiny_tp4_dcp1_i1_fp8_ds_mla";
    geo_t g;
    CHECK(geo_of(name, &g) == 0);
    world_t w;
    rng = 7;
    world_build(&w, 1, 1, g.bs, g.fmt, 4, g.topk, TOPK_MIXED, 7);
    uint16_t *q_lat[1], *q_pe[1];
    make_queries(&w, &g, q_lat, q_pe);
    rank_io_t io;
    memset(&io, 0, sizeof io);
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.cache_dir = getenv("DSA_TEST_CACHE");
    CHECK(dsa_ctx_create(name, &o, &io.ctx) == DSA_SUCCESS);
    setup_rank(&w, &g, 0, q_lat[0], q_pe[0], &io);
    const dsa_attend_args_t good = io.a;
    struct {
        const char *want; /* a part of the message */
        dsa_attend_args_t a;
    } c[8];
    int nc = 0;
    for (int i = 0; i < 8; i++)
        c[i].a = good;
    c[nc].want = "dsa_attend: args->kv_cache is NULL";
    c[nc++].a.kv_cache = NULL;
    c[nc].want = "dsa_attend: args->num_tokens is -1, must be >= 0";
    c[nc++].a.num_tokens = -1;
    c[nc].want = "dsa_attend: args->kv_cache is not 16-byte aligned";
    c[nc++].a.kv_cache = (const char *)good.kv_cache + 8;
    c[nc].want = "dsa_attend: args->num_cache_blocks is 0, must be 1..";
    c[nc++].a.num_cache_blocks = 0;
    c[nc].want = "dsa_attend: args->num_cache_blocks is 2147483647, must be 1..";
    c[nc++].a.num_cache_blocks = 2147483647;
    c[nc].want = "dsa_attend: args->topk_stride is 1, at least idx_topk";
    c[nc++].a.topk_stride = 1;
    c[nc].want = "dsa_attend: args->size is 8, expected";
    c[nc++].a.size = 8;
    c[nc].want = "dsa_attend: args->seq_lens is NULL";
    c[nc++].a.seq_lens = NULL;
    for (int i = 0; i < nc; i++) {
        CHECK(dsa_attend(io.ctx, &c[i].a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
        if (!strstr(dsa_last_error(io.ctx), c[i].want)) {
            printf("FAIL bad argument %d: got '%s', want '%s'\n", i, dsa_last_error(io.ctx), c[i].want);
            check_failed++;
        }
    }
    CHECK(dsa_attend(NULL, &io.a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_attend(io.ctx, NULL, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(dsa_last_error(io.ctx), "dsa_attend: args is NULL") == 0);
    CK(cuCtxSynchronize());
    size_t bytes = (size_t)w.T * 4 * 512 * 2;
    unsigned char *out = malloc(bytes);
    CK(cuMemcpyDtoH(out, io.d[8], bytes));
    int untouched = 1;
    for (size_t i = 0; i < bytes; i++)
        untouched &= out[i] == 0xff;
    CHECK(untouched);
    CHECK(dsa_attend(io.ctx, &io.a, NULL) == DSA_SUCCESS); /* the good arguments still work */
    CK(cuCtxSynchronize());
    printf("%s dsa_attend bad arguments: %d cases\n", untouched ? "ok  " : "FAIL", nc + 3);
    free(out);
    for (int k = 0; k < 10; k++)
        if (io.d[k])
            cuMemFree(io.d[k]);
    dsa_ctx_destroy(io.ctx);
    free(q_lat[0]);
    free(q_pe[0]);
    world_free(&w);
}

/* The whole step over NCCL, one process per GPU: the production path. */
static int test_nccl(const char *name, unsigned seed)
{
    int W = name_value(name, "_dcp");
    pid_t counter = fork(); /* CUDA does not survive fork: this process never initialises it */
    if (counter == 0) {
        int c = 0;
        if (cuInit(0) == CUDA_SUCCESS)
            cuDeviceGetCount(&c);
        _exit(c);
    }
    int st;
    waitpid(counter, &st, 0);
    int n = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    if (n < W) {
        printf("SKIPPED: test_attend --nccl %s: needs %d GPUs, this machine has %d\n", name, W, n);
        return 0;
    }
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
        printf("FAIL: ncclGetUniqueId\n");
        return 1;
    }
    pid_t pid[8];
    for (int r = 0; r < W; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm(120); /* a rank that fails leaves its peer waiting in NCCL: end both, not hang */
            CUdevice dev;
            CUcontext cu;
            CK(cuInit(0));
            CK(cuDeviceGet(&dev, r));
            CK(cuDevicePrimaryCtxRetain(&cu, dev));
            CK(cuCtxSetCurrent(cu));
            run_world(name, TOPK_MIXED, seed, &id, r);
            printf("%d passed, %d failed\n", check_passed, check_failed);
            fflush(stdout); /* _exit does not flush */
            _exit(check_failed ? 1 : 0);
        }
    }
    int failed = 0;
    for (int r = 0; r < W; r++) {
        waitpid(pid[r], &st, 0);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    printf("%s whole stage C over NCCL, %d processes, %s\n", failed ? "FAIL" : "ok  ", W, name);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--nccl")) {
        unsigned seed = (unsigned)time(NULL);
        printf("test_attend --nccl: seed %u\n", seed);
        return test_nccl(argv[2], seed);
    }
    if (cuInit(0) != CUDA_SUCCESS) {
        printf("SKIPPED: test_attend: no CUDA device\n");
        return 0;
    }
    CUdevice dev;
    CUcontext cu;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&cu, dev));
    CK(cuCtxSetCurrent(cu));
    const char *env_seed = getenv("DSA_TEST_SEED"); /* reproduce a run: the seed it printed */
    unsigned seed = env_seed ? (unsigned)strtoul(env_seed, NULL, 10) : (unsigned)time(NULL);
    printf("test_attend: seed %u\n", seed);
    const char *only = argc > 1 ? argv[1] : NULL;
    for (const char *const *n = dsa_configs(); *n; n++)
        if (!only || strstr(*n, only))
            test_config(*n, TOPK_MIXED, seed++);
    if (!only) {
        test_config("tiny_tp4_dcp4_i2_fp8_ds_mla", TOPK_ONE_RANK, seed++);
        test_config("glm5.2_tp4_dcp4_i1_fp8_ds_mla", TOPK_SKIP_LAST, seed++);
        test_config("tiny_tp4_dcp2_i2_nvfp4_ds_mla", TOPK_EMPTY, seed++);
        test_config("tiny_tp4_dcp1_i1_bf16", TOPK_EMPTY, seed++);
    }
    if (!only || !strcmp(only, "args"))
        test_bad_arguments();
    CHECK_DONE();
}
