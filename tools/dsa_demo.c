/* dsa-demo: the main job. On a machine with GPUs it runs the whole step of one DSA layer (stage A,
 * the prologue, writing each rank's KV cache from raw activations; then stage C, attend) for the
 * default configuration with DCP = the number of GPUs where the configuration allows it (one
 * process per GPU, NCCL between them), and prints how it agrees with DCP = 1 computed on the CPU
 * from the same cache bytes. Without a GPU it compiles every kernel of the configuration with
 * NVRTC and runs the CPU simulation of DCP ranks, and says so.
 * Usage: dsa-demo [--cpu] [--config NAME]
 *   --cpu          the no-GPU path even where a GPU is present
 *   --config NAME  this configuration instead of the default (it needs dcp GPUs) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tests/gpu/ranks.h"
#include "../tests/ref/geo.h"
#include "../tests/ref/ref.h"
#include "../tests/ref/world.h"
#include "dsa_testing.h"
#include "jit.h"

#define CK(call)                                                                                             \
    do {                                                                                                     \
        CUresult r_ = (call);                                                                                \
        if (r_ != CUDA_SUCCESS) {                                                                            \
            fprintf(stderr, "dsa-demo: %s failed (%d)\n", #call, (int)r_);                                   \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)
#define DSA(call)                                                                                            \
    do {                                                                                                     \
        dsa_result_t r_ = (call);                                                                            \
        if (r_ != DSA_SUCCESS) {                                                                             \
            fprintf(stderr, "dsa-demo: %s: %s: %s\n", #call, dsa_strerror(r_), dsa_last_error(ctx));         \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static unsigned rng = 20261130u;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

/* The plan of a configuration: the JIT (cpu_mode) and the rope values dsa_config_info lacks (geo.h)
 * need it; everything else comes from dsa_config_info. */
static const dsa_plan_t *plan_named(const char *name)
{
    for (const dsa_plan_t *const *p = dsa_registry; *p; p++)
        if (!strcmp((*p)->name, name))
            return *p;
    return NULL;
}

/* With --dir: the configuration read from a generated folder at run time, not linked. */
static const char *dir_arg;
static dsa_cfg_t *dir_cfg;

/* The configuration's geometry, topology, cache format and rope; 0, or -1 when it is not linked
 * (or, with --dir, not the folder's). */
static int demo_geo(const char *config, geo_t *g)
{
    if (dir_cfg) { /* the folder's plan and config.h, as libdsa read them */
        const dsa_plan_t folder = {DSA_PLAN_ABI, dir_cfg->name, 1, &dir_cfg->config_h};
        return strcmp(config, dir_cfg->name) ? -1 : geo_from(&dir_cfg->info, &folder, g);
    }
    dsa_config_info_t info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    if (dsa_config_info(config, &info) != DSA_SUCCESS)
        return -1;
    return geo_from(&info, plan_named(config), g);
}

/* The batch of the demo: the configuration's cache and heads per rank over W DCP ranks. */
static void demo_world(world_t *w, const geo_t *g, int W, unsigned seed)
{
    const world_shape_t shape = {W, g->info.interleave, g->bs, g->fmt, g->L, g->R, g->bpt, g->info.heads_local,
                                 g->topk};
    world_build(w, &shape, TOPK_MIXED, seed);
    w->scale = g->info.softmax_scale;
}

static CUdeviceptr up(const void *h, size_t n)
{
    CUdeviceptr d;
    CK(dsa_cu.cuMemAlloc(&d, n));
    CK(dsa_cu.cuMemcpyHtoD(d, h, n));
    return d;
}

/* Agreement of out/lse (layout of world_expect) with the expectation, over ranks r0..r1. */
static void agreement(const world_t *w, const float *eo, const float *el, const float *go, const float *gl, int r0,
                      int r1, double *rel, double *cosmin, double *lrel)
{
    size_t T = (size_t)w->T, H = (size_t)w->H, L = (size_t)w->latent;
    for (size_t i = (size_t)r0 * T * H; i < (size_t)r1 * T * H; i++) {
        double m = 0, dot = 0, ne = 0, ng = 0;
        for (size_t d = 0; d < L; d++)
            m = fmax(m, fabs(eo[i * L + d]));
        for (size_t d = 0; d < L; d++) {
            double e = eo[i * L + d], g = go[i * L + d];
            *rel = fmax(*rel, m > 0 ? fabs(g - e) / m : fabs(g - e));
            dot += e * g, ne += e * e, ng += g * g;
        }
        if (ne > 0)
            *cosmin = fmin(*cosmin, dot / sqrt(ne * ng));
        if (!isinf(el[i]))
            *lrel = fmax(*lrel, fabs(gl[i] - el[i]) / fmax(fabs(el[i]), 1.0));
    }
}

static int cpu_mode(const char *config, const char *why)
{
    printf("dsa-demo: %s: generating, compiling and simulating on the CPU\n", why);
    char err[DSA_ERRLEN];
    const dsa_cfg_t *cfg = dir_cfg ? dir_cfg : dsa_cfg_linked(config, err, sizeof err);
    if (!cfg) {
        printf("dsa-demo: %s\n", err);
        return 1;
    }
    dsa_jit_out_t out[DSA_NMODULES];
    dsa_result_t rc = dsa_jit_compile(cfg, cfg->targets[0], "", DSA_LOG_WARN, out, err, sizeof err);
    if (rc != DSA_SUCCESS) {
        printf("dsa-demo: NVRTC: %s\n", err);
        return 1;
    }
    for (int k = 0; k < DSA_NMODULES; k++) {
        printf("  NVRTC: %s kernel %s: %d registers, %d local bytes, %zu-byte cubin, %.0f ms\n", config,
               out[k].info.name, out[k].info.registers, out[k].info.local_bytes, out[k].len, out[k].info.compile_ms);
        free(out[k].cubin);
    }
    geo_t g;
    demo_geo(config, &g); /* main checked it */
    world_t w;
    demo_world(&w, &g, g.info.dcp, rng);
    size_t n = (size_t)w.W * (size_t)w.T * (size_t)w.H, L = (size_t)g.L;
    float *eo = malloc(n * L * 4), *el = malloc(n * 4), *so = malloc(n * L * 4), *sl = malloc(n * 4);
    world_expect(&w, eo, el);
    world_simulate(&w, so, sl);
    double rel = 0, cs = 1, lrel = 0;
    agreement(&w, eo, el, so, sl, 0, w.W, &rel, &cs, &lrel);
    printf("  CPU simulation of %s: %d DCP ranks x %d heads, %d rows (decode and prefill), top-k %d:\n"
           "  DCP = %d vs DCP = 1: max error %.2e of the row's largest value, min cosine %.7f, max LSE error %.2e\n",
           config, w.W, w.H, w.T, w.K, w.W, rel, cs, lrel);
    int agree = rel < 1e-5 && cs > 0.999999 && lrel < 1e-5;
    printf("dsa-demo: %s\n", agree ? "DCP = W agrees with DCP = 1" : "DISAGREES");
    world_free(&w);
    free(eo), free(el), free(so), free(sl);
    return agree ? 0 : 1;
}

/* One rank (process) of the GPU run: prologue into its cache and the unsharded one, then attend.
 * Writes its output and the cache bytes the CPU reference needs into a pipe for the parent. */
typedef struct demo_job {
    const char *config;
    const void *nccl_id; /* NULL at dcp 1 */
} demo_job_t;

static int gpu_rank(int rank, int fd, void *arg)
{
    const demo_job_t *job = arg;
    const char *config = job->config;
    CUdevice dev;
    CUcontext cu;
    CK(dsa_cu.cuInit(0));
    CK(dsa_cu.cuDeviceGet(&dev, rank));
    CK(dsa_cu.cuDevicePrimaryCtxRetain(&cu, dev));
    CK(dsa_cu.cuCtxPushCurrent(cu));
    geo_t g;
    demo_geo(config, &g); /* main checked it */
    world_t w;
    demo_world(&w, &g, g.info.dcp, 20261130u);
    dsa_ctx_t ctx = NULL;
    dsa_options_t opts = DSA_OPTIONS_INIT;
    opts.device = rank;
    opts.nccl_id = job->nccl_id;
    opts.dcp_rank = rank;
    if (dir_arg)
        DSA(dsa_ctx_create_dir(dir_arg, &opts, &ctx));
    else
        DSA(dsa_ctx_create(config, &opts, &ctx));

    /* Stage A: raw KV activations of every position; each rank writes the positions it owns into
     * its shard (slot -1 elsewhere), and rank 0 also the unsharded DCP = 1 cache the reference reads */
    const size_t Q = (size_t)g.q, L = (size_t)g.L, R = (size_t)g.R, KVD = L + R;
    int64_t npos = 0;
    for (int r = 0; r < w.nreq; r++)
        npos += w.len[r];
    uint16_t *kv = malloc((size_t)npos * KVD * 2), *qc = malloc((size_t)npos * Q * 2);
    int64_t *pos = malloc((size_t)npos * 8), *mine = malloc((size_t)npos * 8), *full = malloc((size_t)npos * 8);
    uint16_t *qw = malloc(Q * 2), *kvw = malloc(L * 2);
    for (size_t i = 0; i < Q; i++)
        qw[i] = ref_bf16_encode(1.0f + 0.25f * frand());
    for (size_t i = 0; i < L; i++)
        kvw[i] = ref_bf16_encode(1.0f + 0.25f * frand());
    int64_t at = 0;
    for (int r = 0; r < w.nreq; r++)
        for (int64_t p = 0; p < w.len[r]; p++, at++) {
            for (size_t d = 0; d < KVD; d++)
                kv[(size_t)at * KVD + d] = ref_bf16_encode(frand());
            for (size_t d = 0; d < Q; d++)
                qc[(size_t)at * Q + d] = ref_bf16_encode(frand());
            pos[at] = p;
            const world_shard_t *sh = &w.shard[rank];
            mine[at] = ref_dcp_owner(p, w.W, w.I) == rank
                           ? ref_dcp_slot(ref_dcp_local_index(p, w.W, w.I), sh->table + r * sh->max_blocks,
                                          sh->max_blocks, w.bs)
                           : -1;
            full[at] = ref_dcp_slot(p, w.shard[w.W].table + r * w.shard[w.W].max_blocks, w.shard[w.W].max_blocks,
                                    w.bs);
        }
    CUdeviceptr d_kv = up(kv, (size_t)npos * KVD * 2), d_qc = up(qc, (size_t)npos * Q * 2),
                d_pos = up(pos, (size_t)npos * 8), d_qw = up(qw, Q * 2), d_kvw = up(kvw, L * 2), d_qo;
    CK(dsa_cu.cuMemAlloc(&d_qo, (size_t)npos * Q * 2));
    CUdeviceptr d_cache[2], d_slots[2];
    const world_shard_t *shards[2] = {&w.shard[rank], &w.shard[w.W]};
    const int64_t *maps[2] = {mine, full};
    for (int c = 0; c < 2; c++) {
        size_t bytes = (size_t)(shards[c]->num_blocks * w.bs * w.bpt);
        CK(dsa_cu.cuMemAlloc(&d_cache[c], bytes));
        CK(dsa_cu.cuMemsetD8(d_cache[c], 0, bytes));
        d_slots[c] = up(maps[c], (size_t)npos * 8);
        dsa_prologue_args_t a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.num_tokens = npos;
        a.q_c = (void *)d_qc, a.q_c_out = (void *)d_qo, a.kv = (void *)d_kv;
        a.positions = (const int64_t *)d_pos, a.slot_mapping = (const int64_t *)d_slots[c];
        a.q_norm_w = (void *)d_qw, a.kv_norm_w = (void *)d_kvw;
        a.kv_cache = (void *)d_cache[c], a.num_cache_blocks = shards[c]->num_blocks;
        DSA(dsa_prologue(ctx, &a, NULL));
        CK(dsa_cu.cuCtxSynchronize());
        CK(dsa_cu.cuMemcpyDtoH(shards[c]->cache, d_cache[c], bytes)); /* the reference reads these bytes */
    }
    /* Stage C with this rank's queries */
    size_t T = (size_t)w.T, H = (size_t)w.H;
    uint16_t *q_lat = malloc(T * H * L * 2), *q_pe = malloc(T * H * R * 2);
    for (int r = 0; r < w.W; r++) /* every rank draws all ranks' queries: the same stream of numbers */
        for (size_t i = 0; i < T * H * KVD; i++) {
            uint16_t b = ref_bf16_encode(frand());
            if (r == rank) {
                size_t tt = i / (H * KVD), h = (i / KVD) % H, d = i % KVD;
                if (d < L)
                    q_lat[(tt * H + h) * L + d] = b;
                else
                    q_pe[(tt * H + h) * R + d - L] = b;
            }
        }
    dsa_attend_args_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.num_tokens = w.T;
    a.q_lat = (void *)up(q_lat, T * H * L * 2), a.q_pe = (void *)up(q_pe, T * H * R * 2);
    a.positions = (const int64_t *)up(w.pos_of, T * 8);
    a.topk = (const int32_t *)up(w.topk, T * (size_t)w.K * 4);
    a.req_of_token = (const int32_t *)up(w.req_of, T * 4);
    a.seq_lens = (const int32_t *)up(w.len, (size_t)w.nreq * 4);
    a.block_table = (const int32_t *)up(w.shard[rank].table, (size_t)(w.nreq * w.shard[rank].max_blocks) * 4);
    a.num_requests = w.nreq, a.max_blocks = w.shard[rank].max_blocks;
    a.kv_cache = (void *)d_cache[0], a.num_cache_blocks = w.shard[rank].num_blocks;
    CUdeviceptr d_out, d_lse;
    CK(dsa_cu.cuMemAlloc(&d_out, T * H * L * 2));
    CK(dsa_cu.cuMemAlloc(&d_lse, T * H * 4));
    a.out = (void *)d_out, a.lse = (float *)d_lse;
    DSA(dsa_attend(ctx, &a, NULL));
    CK(dsa_cu.cuCtxSynchronize());
    uint16_t *o = malloc(T * H * L * 2);
    float *l = malloc(T * H * 4);
    CK(dsa_cu.cuMemcpyDtoH(o, d_out, T * H * L * 2));
    CK(dsa_cu.cuMemcpyDtoH(l, d_lse, T * H * 4));
    /* to the parent: output, LSE, queries, and the unsharded cache (rank 0) */
    size_t full_bytes = (size_t)(w.shard[w.W].num_blocks * w.bs * w.bpt);
    int ok = write(fd, o, T * H * L * 2) == (ssize_t)(T * H * L * 2) &&
             write(fd, l, T * H * 4) == (ssize_t)(T * H * 4) &&
             write(fd, q_lat, T * H * L * 2) == (ssize_t)(T * H * L * 2) &&
             write(fd, q_pe, T * H * R * 2) == (ssize_t)(T * H * R * 2) &&
             (rank != 0 || write(fd, w.shard[w.W].cache, full_bytes) == (ssize_t)full_bytes);
    dsa_ctx_destroy(ctx);
    return ok ? 0 : 1;
}

static int read_all(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

static int count_gpus(void) /* in a child process (ranks.h) */
{
    int n = 0;
    if (dsa_cu.cuInit(0) == CUDA_SUCCESS)
        dsa_cu.cuDeviceGetCount(&n);
    return n;
}

int main(int argc, char **argv)
{
    const char *config = "glm5.2_tp4_dcp4_i1_fp8_ds_mla";
    int cpu = 0, chosen = 0;
    char err[512];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu")) {
            cpu = 1;
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[++i];
            chosen = 1;
        } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir_arg = argv[++i];
        } else {
            fprintf(stderr, "usage: dsa-demo [--cpu] [--config NAME | --dir FOLDER]\n"
                            "  --dir FOLDER: a configuration generated by dsagen, loaded at run time\n");
            return 2;
        }
    }
    if (dir_arg) {
        char derr[2048];
        if (dsa_cfg_load_dir(dir_arg, &dir_cfg, derr, sizeof derr) != DSA_SUCCESS) {
            fprintf(stderr, "dsa-demo: %s\n", derr);
            return 2;
        }
        config = dir_cfg->name;
        chosen = 1;
        printf("dsa-demo: configuration %s read from %s at run time (not linked into libdsa)\n", config, dir_arg);
    }
    geo_t g;
    if (demo_geo(config, &g) != 0) {
        fprintf(stderr, "dsa-demo: no configuration named '%s' (dsa_configs() lists them)\n", config);
        return 2;
    }
    if (cpu)
        return cpu_mode(config, "--cpu");
    if (dsa_load_cuda(err, sizeof err) != 0)
        return cpu_mode(config, "no CUDA driver on this machine");
    /* count GPUs in a child: CUDA does not survive fork, and the ranks are forked */
    int ngpu = ranks_count_devices(count_gpus);
    if (ngpu == 0)
        return cpu_mode(config, "no GPU on this machine");
    /* DCP = the number of GPUs where the default configuration allows it, else one that fits */
    if (!chosen && ngpu < 4)
        config = ngpu >= 2 ? "glm5.2_tp2_dcp2_i1_nvfp4_ds_mla" : "glm5.2_tp4_dcp1_i1_fp8_ds_mla";
    if (demo_geo(config, &g) != 0) {
        fprintf(stderr, "dsa-demo: no configuration named '%s' (dsa_configs() lists them)\n", config);
        return 2;
    }
    int W = g.info.dcp;
    if (W > ngpu) {
        printf("dsa-demo: %s needs %d GPUs, this machine has %d\n", config, W, ngpu);
        return 1;
    }
    printf("dsa-demo: %d GPU(s): the whole step (prologue, then attend) of %s on %d GPU(s)%s\n", ngpu, config, W,
           W > 1 ? ", one process each, NCCL between them" : "");
    fflush(stdout);
    char id[128] = {0};
    if (W > 1) {
        if (dsa_load_nccl(err, sizeof err) != 0) {
            printf("dsa-demo: %s\n", err);
            return 1;
        }
        if (dsa_nccl.ncclGetUniqueId((ncclUniqueId *)id) != ncclSuccess) {
            printf("dsa-demo: ncclGetUniqueId failed\n");
            return 1;
        }
    }
    demo_job_t job = {config, W > 1 ? id : NULL};
    ranks_t ranks;
    if (ranks_fork(&ranks, W, 1, 0, gpu_rank, &job) != 0) {
        ranks_wait(&ranks);
        printf("dsa-demo: cannot start %d rank processes\n", W);
        return 1;
    }
    world_t w;
    demo_world(&w, &g, W, 20261130u);
    const size_t L = (size_t)g.L, R = (size_t)g.R, KVD = L + R;
    size_t T = (size_t)w.T, H = (size_t)w.H, n = (size_t)W * T * H;
    float *go = malloc(n * L * 4), *gl = malloc(n * 4), *eo = malloc(n * L * 4), *el = malloc(n * 4);
    uint16_t *o = malloc(T * H * L * 2), *q_lat = malloc(T * H * L * 2), *q_pe = malloc(T * H * R * 2);
    int failed = 0;
    for (int r = 0; r < W; r++) {
        size_t full_bytes = (size_t)(w.shard[W].num_blocks * w.bs * w.bpt);
        int fd = ranks.fd[r];
        if (read_all(fd, o, T * H * L * 2) || read_all(fd, gl + (size_t)r * T * H, T * H * 4) ||
            read_all(fd, q_lat, T * H * L * 2) || read_all(fd, q_pe, T * H * R * 2) ||
            (r == 0 && read_all(fd, w.shard[W].cache, full_bytes))) {
            failed = 1;
            continue;
        }
        for (size_t i = 0; i < T * H * L; i++)
            go[(size_t)r * T * H * L + i] = ref_bf16_decode(o[i]);
        for (size_t t = 0; t < T; t++) { /* the packed query, as the reference sees it */
            float cc[R / 2], ss[R / 2];
            ref_rope_cos_sin(&g.rope, (int)w.pos_of[t], cc, ss);
            for (size_t h = 0; h < H; h++) {
                float *q = w.q + (((size_t)r * T + t) * H + h) * KVD;
                for (size_t d = 0; d < L; d++)
                    q[d] = ref_bf16_decode(q_lat[(t * H + h) * L + d]);
                for (size_t d = 0; d < R; d++)
                    q[L + d] = ref_bf16_decode(q_pe[(t * H + h) * R + d]);
                ref_rope_apply(q + L, g.R, cc, ss, g.rope_interleaved);
                for (size_t d = L; d < KVD; d++)
                    q[d] = ref_bf16_round(q[d]);
            }
        }
    }
    failed |= ranks_wait(&ranks);
    if (failed) {
        printf("dsa-demo: a rank failed\n");
        return 1;
    }
    world_expect(&w, eo, el); /* DCP = 1 on the CPU, from the cache bytes the GPU prologue wrote */
    double rel = 0, cs = 1, lrel = 0;
    agreement(&w, eo, el, go, gl, 0, W, &rel, &cs, &lrel);
    int agree = cs >= 0.99999 && lrel <= 1e-5;
    printf("  %d rows (decode and prefill mixed), %d heads per rank, top-k %d\n"
           "  DCP = %d on the GPU vs DCP = 1 on the CPU: max error %.2e of the row's largest value (bf16 output),\n"
           "  min cosine %.7f, max LSE error %.2e\n",
           w.T, w.H, w.K, W, rel, cs, lrel);
    printf("dsa-demo: %s\n", agree ? "DCP = W agrees with DCP = 1" : "DISAGREES");
    world_free(&w);
    return agree ? 0 : 1;
}
