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
#include <sys/wait.h>
#include <unistd.h>

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

static const dsa_cfg_t *plan_named(const char *name)
{
    char err[1024];
    return dsa_cfg_linked(name, err, sizeof err);
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
    size_t T = (size_t)w->T, H = (size_t)w->H;
    for (size_t i = (size_t)r0 * T * H; i < (size_t)r1 * T * H; i++) {
        double m = 0, dot = 0, ne = 0, ng = 0;
        for (int d = 0; d < 512; d++)
            m = fmax(m, fabs(eo[i * 512 + (size_t)d]));
        for (int d = 0; d < 512; d++) {
            double e = eo[i * 512 + (size_t)d], g = go[i * 512 + (size_t)d];
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
    const dsa_cfg_t *plan = plan_named(config);
    dsa_jit_out_t out[4];
    char err[DSA_ERRLEN];
    dsa_result_t rc = dsa_jit_compile(plan, plan->targets[0], "", DSA_LOG_WARN, out, err, sizeof err);
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
    geo_of(config, &g);
    world_t w;
    world_build(&w, plan->info.dcp, plan->info.interleave, plan->info.block_size, g.fmt, plan->info.heads_local, plan->info.idx_topk,
                TOPK_MIXED, rng);
    w.scale = plan->info.softmax_scale;
    size_t n = (size_t)w.W * (size_t)w.T * (size_t)w.H;
    float *eo = malloc(n * 512 * 4), *el = malloc(n * 4), *so = malloc(n * 512 * 4), *sl = malloc(n * 4);
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
static int gpu_rank(const char *config, int rank, const void *nccl_id, int fd)
{
    CUdevice dev;
    CUcontext cu;
    CK(dsa_cu.cuInit(0));
    CK(dsa_cu.cuDeviceGet(&dev, rank));
    CK(dsa_cu.cuDevicePrimaryCtxRetain(&cu, dev));
    CK(dsa_cu.cuCtxPushCurrent(cu));
    const dsa_cfg_t *plan = plan_named(config);
    geo_t g;
    geo_of(config, &g);
    world_t w;
    world_build(&w, plan->info.dcp, plan->info.interleave, plan->info.block_size, g.fmt, plan->info.heads_local, plan->info.idx_topk,
                TOPK_MIXED, 20261130u);
    dsa_ctx_t ctx = NULL;
    dsa_options_t opts = DSA_OPTIONS_INIT;
    opts.device = rank;
    opts.nccl_id = nccl_id;
    opts.dcp_rank = rank;
    DSA(dsa_ctx_create(config, &opts, &ctx));

    /* Stage A: raw KV activations of every position; each rank writes the positions it owns into
     * its shard (slot -1 elsewhere), and rank 0 also the unsharded DCP = 1 cache the reference reads */
    int64_t npos = 0;
    for (int r = 0; r < w.nreq; r++)
        npos += w.len[r];
    uint16_t *kv = malloc((size_t)npos * 576 * 2), *qc = malloc((size_t)npos * (size_t)plan->info.q_lora_rank * 2);
    int64_t *pos = malloc((size_t)npos * 8), *mine = malloc((size_t)npos * 8), *full = malloc((size_t)npos * 8);
    uint16_t qw[4096], kvw[512];
    for (int i = 0; i < plan->info.q_lora_rank; i++)
        qw[i] = ref_bf16_encode(1.0f + 0.25f * frand());
    for (int i = 0; i < 512; i++)
        kvw[i] = ref_bf16_encode(1.0f + 0.25f * frand());
    int64_t at = 0;
    for (int r = 0; r < w.nreq; r++)
        for (int64_t p = 0; p < w.len[r]; p++, at++) {
            for (int d = 0; d < 576; d++)
                kv[at * 576 + d] = ref_bf16_encode(frand());
            for (int d = 0; d < plan->info.q_lora_rank; d++)
                qc[at * plan->info.q_lora_rank + d] = ref_bf16_encode(frand());
            pos[at] = p;
            const world_shard_t *sh = &w.shard[rank];
            mine[at] = ref_dcp_owner(p, w.W, w.I) == rank
                           ? ref_dcp_slot(ref_dcp_local_index(p, w.W, w.I), sh->table + r * sh->max_blocks,
                                          sh->max_blocks, w.bs)
                           : -1;
            full[at] = ref_dcp_slot(p, w.shard[w.W].table + r * w.shard[w.W].max_blocks, w.shard[w.W].max_blocks,
                                    w.bs);
        }
    CUdeviceptr d_kv = up(kv, (size_t)npos * 1152), d_qc = up(qc, (size_t)npos * (size_t)plan->info.q_lora_rank * 2),
                d_pos = up(pos, (size_t)npos * 8), d_qw = up(qw, sizeof qw), d_kvw = up(kvw, sizeof kvw), d_qo;
    CK(dsa_cu.cuMemAlloc(&d_qo, (size_t)npos * (size_t)plan->info.q_lora_rank * 2));
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
    uint16_t *q_lat = malloc(T * H * 1024), *q_pe = malloc(T * H * 128);
    for (int r = 0; r < w.W; r++) /* every rank draws all ranks' queries: the same stream of numbers */
        for (size_t i = 0; i < T * H * 576; i++) {
            uint16_t b = ref_bf16_encode(frand());
            if (r == rank) {
                size_t tt = i / (H * 576), h = (i / 576) % H, d = i % 576;
                if (d < 512)
                    q_lat[(tt * H + h) * 512 + d] = b;
                else
                    q_pe[(tt * H + h) * 64 + d - 512] = b;
            }
        }
    dsa_attend_args_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.num_tokens = w.T;
    a.q_lat = (void *)up(q_lat, T * H * 1024), a.q_pe = (void *)up(q_pe, T * H * 128);
    a.positions = (const int64_t *)up(w.pos_of, T * 8);
    a.topk = (const int32_t *)up(w.topk, T * (size_t)w.K * 4);
    a.req_of_token = (const int32_t *)up(w.req_of, T * 4);
    a.seq_lens = (const int32_t *)up(w.len, (size_t)w.nreq * 4);
    a.block_table = (const int32_t *)up(w.shard[rank].table, (size_t)(w.nreq * w.shard[rank].max_blocks) * 4);
    a.num_requests = w.nreq, a.max_blocks = w.shard[rank].max_blocks;
    a.kv_cache = (void *)d_cache[0], a.num_cache_blocks = w.shard[rank].num_blocks;
    CUdeviceptr d_out, d_lse;
    CK(dsa_cu.cuMemAlloc(&d_out, T * H * 1024));
    CK(dsa_cu.cuMemAlloc(&d_lse, T * H * 4));
    a.out = (void *)d_out, a.lse = (float *)d_lse;
    DSA(dsa_attend(ctx, &a, NULL));
    CK(dsa_cu.cuCtxSynchronize());
    uint16_t *o = malloc(T * H * 1024);
    float *l = malloc(T * H * 4);
    CK(dsa_cu.cuMemcpyDtoH(o, d_out, T * H * 1024));
    CK(dsa_cu.cuMemcpyDtoH(l, d_lse, T * H * 4));
    /* to the parent: output, LSE, queries, and the unsharded cache (rank 0) */
    size_t full_bytes = (size_t)(w.shard[w.W].num_blocks * w.bs * w.bpt);
    int ok = write(fd, o, T * H * 1024) == (ssize_t)(T * H * 1024) && write(fd, l, T * H * 4) == (ssize_t)(T * H * 4) &&
             write(fd, q_lat, T * H * 1024) == (ssize_t)(T * H * 1024) &&
             write(fd, q_pe, T * H * 128) == (ssize_t)(T * H * 128) &&
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
        } else {
            fprintf(stderr, "usage: dsa-demo [--cpu] [--config NAME]\n");
            return 2;
        }
    }
    geo_t geo;
    if (!plan_named(config) || geo_of(config, &geo) != 0) {
        fprintf(stderr, "dsa-demo: no configuration named '%s' (dsa_configs() lists them)\n", config);
        return 2;
    }
    if (cpu)
        return cpu_mode(config, "--cpu");
    if (dsa_load_cuda(err, sizeof err) != 0)
        return cpu_mode(config, "no CUDA driver on this machine");
    /* count GPUs in a child: CUDA does not survive fork, and the ranks are forked */
    pid_t c = fork();
    if (c == 0) {
        int n = 0;
        if (dsa_cu.cuInit(0) == CUDA_SUCCESS)
            dsa_cu.cuDeviceGetCount(&n);
        _exit(n > 250 ? 250 : n);
    }
    int st;
    waitpid(c, &st, 0);
    int ngpu = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    if (ngpu == 0)
        return cpu_mode(config, "no GPU on this machine");
    /* DCP = the number of GPUs where the default configuration allows it, else one that fits */
    if (!chosen && ngpu < 4)
        config = ngpu >= 2 ? "glm5.2_tp2_dcp2_i1_nvfp4_ds_mla" : "glm5.2_tp4_dcp1_i1_fp8_ds_mla";
    const dsa_cfg_t *plan = plan_named(config);
    int W = plan->info.dcp;
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
    int fds[8][2];
    pid_t pid[8];
    for (int r = 0; r < W; r++) {
        if (pipe(fds[r]) != 0)
            return 1;
        pid[r] = fork();
        if (pid[r] == 0) {
            close(fds[r][0]);
            _exit(gpu_rank(config, r, W > 1 ? id : NULL, fds[r][1]));
        }
        close(fds[r][1]);
    }
    geo_t g;
    geo_of(config, &g);
    world_t w;
    world_build(&w, W, plan->info.interleave, plan->info.block_size, g.fmt, plan->info.heads_local, plan->info.idx_topk, TOPK_MIXED,
                20261130u);
    size_t T = (size_t)w.T, H = (size_t)w.H, n = (size_t)W * T * H;
    float *go = malloc(n * 512 * 4), *gl = malloc(n * 4), *eo = malloc(n * 512 * 4), *el = malloc(n * 4);
    uint16_t *o = malloc(T * H * 1024), *q_lat = malloc(T * H * 1024), *q_pe = malloc(T * H * 128);
    int failed = 0;
    for (int r = 0; r < W; r++) {
        size_t full_bytes = (size_t)(w.shard[W].num_blocks * w.bs * w.bpt);
        if (read_all(fds[r][0], o, T * H * 1024) || read_all(fds[r][0], gl + (size_t)r * T * H, T * H * 4) ||
            read_all(fds[r][0], q_lat, T * H * 1024) || read_all(fds[r][0], q_pe, T * H * 128) ||
            (r == 0 && read_all(fds[r][0], w.shard[W].cache, full_bytes))) {
            failed = 1;
            continue;
        }
        for (size_t i = 0; i < T * H * 512; i++)
            go[(size_t)r * T * H * 512 + i] = ref_bf16_decode(o[i]);
        for (size_t t = 0; t < T; t++) { /* the packed query, as the reference sees it */
            float cc[32], ss[32];
            ref_rope_cos_sin(&g.rope, (int)w.pos_of[t], cc, ss);
            for (size_t h = 0; h < H; h++) {
                float *q = w.q + (((size_t)r * T + t) * H + h) * 576;
                for (int d = 0; d < 512; d++)
                    q[d] = ref_bf16_decode(q_lat[(t * H + h) * 512 + (size_t)d]);
                for (int d = 0; d < 64; d++)
                    q[512 + d] = ref_bf16_decode(q_pe[(t * H + h) * 64 + (size_t)d]);
                ref_rope_apply(q + 512, 64, cc, ss, g.rope_interleaved);
                for (int d = 512; d < 576; d++)
                    q[d] = ref_bf16_round(q[d]);
            }
        }
    }
    for (int r = 0; r < W; r++) {
        waitpid(pid[r], &st, 0);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    if (failed) {
        printf("dsa-demo: a rank failed\n");
        return 1;
    }
    w.scale = plan->info.softmax_scale;
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
