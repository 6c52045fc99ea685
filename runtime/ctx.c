/* libdsa contexts: creation (configuration lookup, JIT, rope tables), errors, and the per-layer
 * calls, which only check arguments and enqueue launches. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kernels/dsa_abi.h"

static _Thread_local char thread_err[DSA_ERRLEN];

const char *dsa_strerror(dsa_result_t r)
{
    switch (r) {
    case DSA_SUCCESS: return "success";
    case DSA_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case DSA_ERROR_CUDA: return "CUDA error";
    case DSA_ERROR_NVRTC: return "NVRTC compilation error";
    case DSA_ERROR_NCCL: return "NCCL error";
    case DSA_ERROR_OUT_OF_MEMORY: return "out of memory";
    case DSA_ERROR_CACHE: return "JIT cache error";
    case DSA_ERROR_UNSUPPORTED: return "unsupported";
    case DSA_ERROR_INTERNAL: return "internal error";
    }
    return "unknown result code";
}

const char *dsa_last_error(dsa_ctx_t ctx)
{
    return ctx ? ctx->err : thread_err;
}

dsa_result_t dsa_fail(dsa_ctx_t ctx, dsa_result_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx ? ctx->err : thread_err, DSA_ERRLEN, fmt, ap);
    va_end(ap);
    if (ctx)
        memcpy(thread_err, ctx->err, DSA_ERRLEN);
    return r;
}

long dsa_fault_after = -1;

static int inject_fault(void)
{
    long left = __atomic_load_n(&dsa_fault_after, __ATOMIC_RELAXED);
    if (left < 0)
        return 0;
    return __atomic_sub_fetch(&dsa_fault_after, 1, __ATOMIC_RELAXED) < 0;
}

void *dsa_malloc(size_t n)
{
    return inject_fault() ? NULL : malloc(n);
}

void *dsa_calloc(size_t n, size_t size)
{
    return inject_fault() ? NULL : calloc(n, size);
}

char *dsa_thread_err(void)
{
    return thread_err;
}

void dsa_log(int threshold, int level, const char *fmt, ...)
{
    if (threshold < level)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs(level == DSA_LOG_WARN ? "dsa: warning: " : "dsa: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const char *const *dsa_configs(void)
{
    static const char *names[256];
    if (!names[0]) {
        int n = 0;
        for (const dsa_plan_t *const *p = dsa_registry; *p && n < 255; p++)
            names[n++] = (*p)->info.name;
        names[n] = NULL;
    }
    return names;
}

void dsa_ctx_destroy(dsa_ctx_t ctx)
{
    if (!ctx)
        return;
    if (ctx->dcp)
        ctx->dcp->destroy(ctx->dcp);
    if (ctx->cu) {
        dsa_cu.cuCtxPushCurrent(ctx->cu);
        for (int i = 0; ctx->kernels && i < ctx->plan->nkernels; i++)
            if (ctx->kernels[i].module)
                dsa_cu.cuModuleUnload(ctx->kernels[i].module);
        if (ctx->rope_cos)
            dsa_cu.cuMemFree(ctx->rope_cos);
        if (ctx->rope_sin)
            dsa_cu.cuMemFree(ctx->rope_sin);
        if (ctx->rejected)
            dsa_cu.cuMemFree(ctx->rejected);
        CUdeviceptr ws[] = {ctx->ws_q, ctx->ws_qg, ctx->ws_po_send, ctx->ws_po_recv, ctx->ws_pl_send, ctx->ws_pl_recv};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i])
                dsa_cu.cuMemFree(ws[i]);
        CUcontext dummy;
        dsa_cu.cuCtxPopCurrent(&dummy);
        dsa_cu.cuDevicePrimaryCtxRelease(ctx->dev);
    }
    free(ctx->kernels);
    free(ctx->info);
    free(ctx);
}

static dsa_result_t create(const dsa_plan_t *plan, const dsa_options_t *opts, dsa_ctx_t *out);

dsa_result_t dsa_ctx_create(const char *config, const dsa_options_t *opts, dsa_ctx_t *out)
{
    thread_err[0] = '\0';
    if (!out)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: ctx (argument 3) is NULL");
    *out = NULL;
    if (!config)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: config (argument 1) is NULL");
    const dsa_plan_t *plan = NULL;
    for (const dsa_plan_t *const *p = dsa_registry; *p; p++)
        if (strcmp((*p)->info.name, config) == 0)
            plan = *p;
    if (!plan)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: no configuration named '%s' in this library (dsa_configs() lists them)",
                        config);
    return create(plan, opts, out);
}

dsa_result_t dsa_ctx_create_plan(const struct dsa_plan *plan, const dsa_options_t *opts, dsa_ctx_t *out)
{
    thread_err[0] = '\0';
    if (!out)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create_plan: ctx (argument 3) is NULL");
    *out = NULL;
    if (!plan)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create_plan: plan (argument 1) is NULL");
    return create(plan, opts, out);
}

static dsa_result_t create(const dsa_plan_t *plan, const dsa_options_t *opts, dsa_ctx_t *out)
{
    dsa_result_t rc = DSA_SUCCESS;
    dsa_ctx_t ctx = NULL;
    CUdeviceptr freq_d = 0;
    int pushed = 0;
    if (opts && opts->size < sizeof(dsa_options_t))
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: opts->size is %zu, expected %zu (initialise with DSA_OPTIONS_INIT)",
                        opts->size, sizeof(dsa_options_t));
    if (plan->abi != DSA_PLAN_ABI)
        return dsa_fail(NULL, DSA_ERROR_INTERNAL, "configuration %s was generated for plan ABI %d, runtime has %d",
                        plan->info.name, plan->abi, DSA_PLAN_ABI);
    dsa_options_t o = DSA_OPTIONS_INIT;
    if (opts)
        o = *opts;
    if (o.max_tokens <= 0)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: opts->max_tokens is %lld, must be > 0",
                        (long long)o.max_tokens);
    if (o.attend_tokens < 0 || o.attend_tokens > 0x7fffffff)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: opts->attend_tokens is %lld, must be 0 (default) to 2^31-1",
                        (long long)o.attend_tokens);
    if (o.max_tokens > 0x7fffffff)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: opts->max_tokens is %lld, at most 2^31-1 per launch", (long long)o.max_tokens);

    ctx = dsa_calloc(1, sizeof *ctx);
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_OUT_OF_MEMORY, "dsa_ctx_create: out of host memory");
    ctx->plan = plan;
    ctx->opts = o;
    snprintf(ctx->target, sizeof ctx->target, "%s", o.target ? o.target : plan->targets[0]);
    ctx->kernels = dsa_calloc((size_t)plan->nkernels, sizeof *ctx->kernels);
    ctx->info = dsa_calloc((size_t)plan->nkernels, sizeof *ctx->info);
    if (!ctx->kernels || !ctx->info) {
        rc = dsa_fail(ctx, DSA_ERROR_OUT_OF_MEMORY, "dsa_ctx_create: out of host memory");
        goto fail;
    }
    char lerr[512];
    if (dsa_load_cuda(lerr, sizeof lerr) != 0) {
        rc = dsa_fail(ctx, DSA_ERROR_CUDA, "dsa_ctx_create: no CUDA driver on this machine (%s)", lerr);
        goto fail;
    }
    CUresult init = dsa_cu.cuInit(0);
    if (init == CUDA_ERROR_NO_DEVICE || init == CUDA_ERROR_STUB_LIBRARY) {
        rc = dsa_fail(ctx, DSA_ERROR_CUDA, "dsa_ctx_create: no usable CUDA device (cuInit returned %d)", (int)init);
        goto fail;
    }
    CU_CHECK(ctx, init);
    int count = 0;
    CU_CHECK(ctx, dsa_cu.cuDeviceGetCount(&count));
    if (o.device < 0 || o.device >= count) {
        rc = dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: opts->device is %d, this machine has %d", o.device,
                      count);
        goto fail;
    }
    CU_CHECK(ctx, dsa_cu.cuDeviceGet(&ctx->dev, o.device));
    int major = 0;
    CU_CHECK(ctx, dsa_cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ctx->dev));
    if (strncmp(ctx->target, "sm_90", 5) == 0 && major != 9) {
        rc = dsa_fail(ctx, DSA_ERROR_UNSUPPORTED, "configuration %s targets %s; device %d has compute capability %d.x",
                      plan->info.name, ctx->target, o.device, major);
        goto fail;
    }
    CU_CHECK(ctx, dsa_cu.cuDevicePrimaryCtxRetain(&ctx->cu, ctx->dev));
    CU_CHECK(ctx, dsa_cu.cuCtxPushCurrent(ctx->cu));
    pushed = 1;

    rc = dsa_transport_create(ctx);
    if (rc != DSA_SUCCESS)
        goto fail;
    rc = dsa_jit_load(ctx);
    if (rc != DSA_SUCCESS)
        goto fail;

    /* The rope table, computed on the GPU from the host's frequencies (a 200K-position table is
     * 13 million sin/cos: milliseconds there, a large part of a warm start on the host). */
    size_t n = (size_t)plan->info.max_positions * (size_t)(plan->info.qk_rope_dim / 2);
    double freq[128], mscale;
    dsa_rope_freqs(plan, freq, &mscale);
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->rope_cos, n * sizeof(float)));
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->rope_sin, n * sizeof(float)));
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&freq_d, sizeof freq));
    CU_CHECK(ctx, dsa_cu.cuMemcpyHtoD(freq_d, freq, sizeof freq));
    CUfunction rope_fn;
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&rope_fn, ctx->kernels[0].module, plan->rope_entry));
    void *rope_args[] = {&freq_d, &mscale, &ctx->rope_cos, &ctx->rope_sin};
    CU_CHECK(ctx, dsa_cu.cuLaunchKernel(rope_fn, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, rope_args,
                                        NULL));
    CU_CHECK(ctx, dsa_cu.cuCtxSynchronize());
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->rejected, 2 * sizeof(uint64_t)));

    /* Stage C: its kernels and the workspaces of one chunk of max_tokens tokens. */
    char fname[256];
    snprintf(fname, sizeof fname, "dsa_pack_q_%s", plan->symbol);
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->pack_fn, ctx->kernels[1].module, fname));
    snprintf(fname, sizeof fname, "dsa_attend_%s", plan->symbol);
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->attend_fn, ctx->kernels[1].module, fname));
    if (plan->info.dcp > 1) {
        snprintf(fname, sizeof fname, "dsa_merge_%s", plan->symbol);
        CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->merge_fn, ctx->kernels[1].module, fname));
    }
    {
        /* shared memory of a CTA: dsa_attend.cuh's AttendLayout computes it, the module exports it */
        snprintf(fname, sizeof fname, "dsa_attend_smem_%s", plan->symbol);
        CUdeviceptr smem_d;
        size_t smem_bytes;
        CU_CHECK(ctx, dsa_cu.cuModuleGetGlobal(&smem_d, &smem_bytes, ctx->kernels[1].module, fname));
        if (smem_bytes != sizeof ctx->attend_smem) {
            rc = dsa_fail(ctx, DSA_ERROR_INTERNAL, "dsa_ctx_create: %s is %zu bytes, expected %zu", fname, smem_bytes,
                     sizeof ctx->attend_smem);
            goto fail;
        }
        CU_CHECK(ctx, dsa_cu.cuMemcpyDtoH(&ctx->attend_smem, smem_d, sizeof ctx->attend_smem));
        int optin = 0;
        CU_CHECK(ctx, dsa_cu.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx->dev));
        if (ctx->attend_smem > (unsigned)optin) {
            rc = dsa_fail(ctx, DSA_ERROR_UNSUPPORTED,
                          "dsa_ctx_create: the sparse MLA kernel of %s needs %u bytes of shared memory per block, "
                          "device %d allows %d",
                          plan->info.name, ctx->attend_smem, o.device, optin);
            goto fail;
        }
        CU_CHECK(ctx, dsa_cu.cuFuncSetAttribute(ctx->attend_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                (int)ctx->attend_smem));
    }
    ctx->ws_tokens = o.attend_tokens ? o.attend_tokens : 2048;
    {
        const size_t T = (size_t)ctx->ws_tokens, W = (size_t)plan->info.dcp, HL = (size_t)plan->info.heads_local;
        const size_t kvd = (size_t)(plan->info.kv_lora_rank + plan->info.qk_rope_dim), lat = (size_t)plan->info.kv_lora_rank;
        CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_q, T * HL * kvd * 2));
        if (W > 1) {
            CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_qg, W * T * HL * kvd * 2));
            CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_po_send, W * T * HL * lat * 4));
            CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_po_recv, W * T * HL * lat * 4));
            CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_pl_send, W * T * HL * 4));
            CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_pl_recv, W * T * HL * 4));
        }
    }
    CU_CHECK(ctx, dsa_cu.cuMemsetD8(ctx->rejected, 0, 2 * sizeof(uint64_t)));
    dsa_cu.cuMemFree(freq_d);
    CUcontext popped;
    dsa_cu.cuCtxPopCurrent(&popped);
    *out = ctx;
    return DSA_SUCCESS;
fail:
    if (freq_d)
        dsa_cu.cuMemFree(freq_d);
    if (pushed) {
        CUcontext dummy;
        dsa_cu.cuCtxPopCurrent(&dummy);
    }
    if (ctx)
        memcpy(thread_err, ctx->err, DSA_ERRLEN);
    dsa_ctx_destroy(ctx);
    return rc;
}

int dsa_ctx_kernels(dsa_ctx_t ctx, const dsa_kernel_info_t **info)
{
    if (!ctx || !info)
        return 0;
    *info = ctx->info;
    return ctx->plan->nkernels;
}

static int misaligned(const void *p)
{
    return ((uintptr_t)p & 15u) != 0;
}

#define ARG_FAIL(...) dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_prologue: " __VA_ARGS__)

dsa_result_t dsa_prologue(dsa_ctx_t ctx, const dsa_prologue_args_t *a, void *stream)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_prologue: ctx is NULL");
    if (!a)
        return ARG_FAIL("args is NULL");
    if (a->size < sizeof *a)
        return ARG_FAIL("args->size is %zu, expected %zu", a->size, sizeof *a);
    const dsa_plan_t *p = ctx->plan;
    if (a->num_tokens < 0)
        return ARG_FAIL("args->num_tokens is %lld, must be >= 0", (long long)a->num_tokens);
    if (a->num_tokens == 0)
        return DSA_SUCCESS;
    const struct {
        const void *ptr;
        const char *name;
        int vec;
    } need[] = {{a->q_c, "q_c", 1},           {a->q_c_out, "q_c_out", 1},   {a->kv, "kv", 1},
                {a->positions, "positions", 0}, {a->slot_mapping, "slot_mapping", 0},
                {a->q_norm_w, "q_norm_w", 1},   {a->kv_norm_w, "kv_norm_w", 1}, {a->kv_cache, "kv_cache", 0}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (!need[i].ptr)
            return ARG_FAIL("args->%s is NULL", need[i].name);
        if (need[i].vec && misaligned(need[i].ptr))
            return ARG_FAIL("args->%s is not 16-byte aligned", need[i].name);
    }
    if (a->idx_k && (!a->idx_norm_w || !a->idx_norm_b || !a->idx_cache))
        return ARG_FAIL("args->idx_k is given, so args->%s must be too",
                        !a->idx_norm_w ? "idx_norm_w" : !a->idx_norm_b ? "idx_norm_b" : "idx_cache");
    if (a->clear_topk && !a->topk)
        return ARG_FAIL("args->clear_topk is set but args->topk is NULL");
    if (a->num_cache_blocks <= 0)
        return ARG_FAIL("args->num_cache_blocks is %lld, must be > 0", (long long)a->num_cache_blocks);
    int64_t kv_w = p->info.kv_lora_rank + p->info.qk_rope_dim;
    int64_t qs = a->q_c_stride ? a->q_c_stride : p->info.q_lora_rank, ks = a->kv_stride ? a->kv_stride : kv_w,
            is = a->idx_k_stride ? a->idx_k_stride : p->info.idx_head_dim;
    if (qs < p->info.q_lora_rank || qs % 8)
        return ARG_FAIL("args->q_c_stride is %lld: at least %d and a multiple of 8", (long long)qs, p->info.q_lora_rank);
    if (ks < kv_w || ks % 8)
        return ARG_FAIL("args->kv_stride is %lld: at least %lld and a multiple of 8", (long long)ks, (long long)kv_w);
    if (a->idx_k && is < p->info.idx_head_dim)
        return ARG_FAIL("args->idx_k_stride is %lld: at least %d", (long long)is, p->info.idx_head_dim);

    dsa_prologue_params k = {0};
    k.idx_norm_w = a->idx_norm_w;
    k.idx_norm_b = a->idx_norm_b;
    k.q_norm_w = a->q_norm_w;
    k.kv_norm_w = a->kv_norm_w;
    k.rope_cos = (const float *)(uintptr_t)ctx->rope_cos;
    k.rope_sin = (const float *)(uintptr_t)ctx->rope_sin;
    k.kv_cache = a->kv_cache;
    k.idx_cache = a->idx_cache;
    k.rejected = (unsigned long long *)(uintptr_t)ctx->rejected;
    k.num_slots = a->num_cache_blocks * p->info.block_size;
    k.q_c_stride = qs;
    k.kv_stride = ks;
    k.idx_k_stride = is;
    k.clear_topk = a->clear_topk && a->topk;
    CUresult pr = dsa_cu.cuCtxPushCurrent(ctx->cu);
    if (pr != CUDA_SUCCESS)
        return dsa_fail(ctx, DSA_ERROR_CUDA, "dsa_prologue: cannot make the context current (%d)", (int)pr);
    /* A call larger than max_tokens runs as several launches, never truncated. */
    for (int64_t t0 = 0; t0 < a->num_tokens; t0 += ctx->opts.max_tokens) {
        int64_t n = a->num_tokens - t0 < ctx->opts.max_tokens ? a->num_tokens - t0 : ctx->opts.max_tokens;
        k.q_c = (const uint16_t *)a->q_c + t0 * qs;
        k.q_c_out = (uint16_t *)a->q_c_out + t0 * p->info.q_lora_rank;
        k.kv = (const uint16_t *)a->kv + t0 * ks;
        k.idx_k = a->idx_k ? (const uint16_t *)a->idx_k + t0 * is : NULL;
        k.positions = a->positions + t0;
        k.slot_mapping = a->slot_mapping + t0;
        k.topk = a->topk ? a->topk + t0 * p->info.idx_topk : NULL;
        k.num_tokens = (int32_t)n;
        void *params[] = {&k};
        CUresult r = dsa_cu.cuLaunchKernel(ctx->kernels[0].fn, (unsigned)n, 1, 1, ctx->plan->kernels[0].threads, 1, 1, 0,
                                    (CUstream)stream, params, NULL);
        if (r != CUDA_SUCCESS) {
            const char *s = "?";
            CUcontext dummy;
            dsa_cu.cuGetErrorString(r, &s);
            dsa_cu.cuCtxPopCurrent(&dummy);
            return dsa_fail(ctx, DSA_ERROR_CUDA, "dsa_prologue: launch of %s failed: %s", ctx->plan->kernels[0].entry,
                            s);
        }
    }
    CUcontext dummy;
    dsa_cu.cuCtxPopCurrent(&dummy);
    return DSA_SUCCESS;
}

dsa_result_t dsa_take_rejected(dsa_ctx_t ctx, uint64_t counts[2])
{
    dsa_result_t rc = DSA_SUCCESS;
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_take_rejected: ctx is NULL");
    if (!counts)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_take_rejected: counts is NULL");
    CU_CHECK(ctx, dsa_cu.cuCtxPushCurrent(ctx->cu));
    CU_CHECK(ctx, dsa_cu.cuCtxSynchronize());
    CU_CHECK(ctx, dsa_cu.cuMemcpyDtoH(counts, ctx->rejected, 2 * sizeof(uint64_t)));
    CU_CHECK(ctx, dsa_cu.cuMemsetD8(ctx->rejected, 0, 2 * sizeof(uint64_t)));
fail:;
    CUcontext dummy;
    dsa_cu.cuCtxPopCurrent(&dummy);
    return rc;
}

static dsa_result_t dcp_collective(dsa_ctx_t ctx, int alltoall, const void *send, void *recv, size_t bytes,
                                   void *stream)
{
    const char *fn = alltoall ? "dsa_dcp_alltoall" : "dsa_dcp_allgather";
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (!send || !recv)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, !send ? "send" : "recv");
    if (!ctx->dcp)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: configuration %s has dcp 1", fn, ctx->plan->info.name);
    if (bytes == 0)
        return DSA_SUCCESS;
    CUresult pr = dsa_cu.cuCtxPushCurrent(ctx->cu);
    if (pr != CUDA_SUCCESS)
        return dsa_fail(ctx, DSA_ERROR_CUDA, "%s: cannot make the context current (%d)", fn, (int)pr);
    CUdeviceptr s = (CUdeviceptr)(uintptr_t)send, r = (CUdeviceptr)(uintptr_t)recv;
    dsa_result_t rc = alltoall ? ctx->dcp->alltoall(ctx->dcp, ctx, s, r, bytes, (CUstream)stream)
                               : ctx->dcp->allgather(ctx->dcp, ctx, s, r, bytes, (CUstream)stream);
    CUcontext popped;
    dsa_cu.cuCtxPopCurrent(&popped);
    return rc;
}

dsa_result_t dsa_dcp_allgather(dsa_ctx_t ctx, const void *send, void *recv, size_t bytes, void *stream)
{
    return dcp_collective(ctx, 0, send, recv, bytes, stream);
}

dsa_result_t dsa_dcp_alltoall(dsa_ctx_t ctx, const void *send, void *recv, size_t bytes, void *stream)
{
    return dcp_collective(ctx, 1, send, recv, bytes, stream);
}

#define ATTEND_FAIL(...) dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_attend: " __VA_ARGS__)

static dsa_result_t launch(dsa_ctx_t ctx, CUfunction fn, unsigned gx, unsigned gy, unsigned threads, unsigned smem,
                           void *params, CUstream stream, const char *what)
{
    void *args[] = {params};
    CUresult r = dsa_cu.cuLaunchKernel(fn, gx, gy, 1, threads, 1, 1, smem, stream, args, NULL);
    if (r != CUDA_SUCCESS) {
        const char *s = "?";
        dsa_cu.cuGetErrorString(r, &s);
        return dsa_fail(ctx, DSA_ERROR_CUDA, "dsa_attend: launch of the %s kernel of %s failed: %s", what,
                        ctx->plan->info.name, s);
    }
    return DSA_SUCCESS;
}

static dsa_result_t attend_chunk(dsa_ctx_t ctx, const dsa_attend_args_t *a, int64_t t0, int64_t n, int64_t qls,
                                 int64_t qps, int64_t ts, CUstream stream)
{
    const dsa_plan_t *p = ctx->plan;
    const size_t HL = (size_t)p->info.heads_local, W = (size_t)p->info.dcp, lat = (size_t)p->info.kv_lora_rank;
    const size_t kvd = lat + (size_t)p->info.qk_rope_dim;
    dsa_result_t rc;
    dsa_pack_params pk = {0};
    pk.q_lat = (const uint16_t *)a->q_lat + t0 * qls;
    pk.q_pe = (const uint16_t *)a->q_pe + t0 * qps;
    pk.positions = a->positions + t0;
    pk.rope_cos = (const float *)(uintptr_t)ctx->rope_cos;
    pk.rope_sin = (const float *)(uintptr_t)ctx->rope_sin;
    pk.q_packed = (uint16_t *)(uintptr_t)ctx->ws_q;
    pk.rejected = (unsigned long long *)(uintptr_t)ctx->rejected;
    pk.q_lat_stride = qls;
    pk.q_pe_stride = qps;
    pk.num_tokens = (int32_t)n;
    if ((rc = launch(ctx, ctx->pack_fn, (unsigned)n, (unsigned)((HL * (kvd / 8) + 255) / 256), 256, 0, &pk, stream,
                     "pack")) != DSA_SUCCESS)
        return rc;
    /* 2. the query all-gather: every rank attends for the whole group's heads */
    if (W > 1 && (rc = ctx->dcp->allgather(ctx->dcp, ctx, ctx->ws_q, ctx->ws_qg, (size_t)n * HL * kvd * 2, stream)) !=
                     DSA_SUCCESS)
        return rc;
    dsa_attend_params at = {0};
    at.q = (const uint16_t *)(uintptr_t)(W > 1 ? ctx->ws_qg : ctx->ws_q);
    at.topk = a->topk + t0 * ts;
    at.req_of_token = a->req_of_token + t0;
    at.seq_lens = a->seq_lens;
    at.block_table = a->block_table;
    at.kv_cache = a->kv_cache;
    at.out = (uint16_t *)a->out + (size_t)t0 * HL * lat;
    at.lse = a->lse ? a->lse + (size_t)t0 * HL : NULL;
    at.part_out = (float *)(uintptr_t)ctx->ws_po_send;
    at.part_lse = (float *)(uintptr_t)ctx->ws_pl_send;
    at.num_slots = a->num_cache_blocks * p->info.block_size;
    at.max_blocks = a->max_blocks;
    at.num_requests = a->num_requests;
    at.topk_stride = ts;
    at.num_tokens = (int32_t)n;
    at.rank = ctx->dcp ? ctx->dcp->rank : 0;
    const int hb = p->attend_heads_per_cta;
    if ((rc = launch(ctx, ctx->attend_fn, (unsigned)n, (unsigned)((p->info.heads_gathered + hb - 1) / hb), 256, ctx->attend_smem, &at,
                     stream, "attend")) != DSA_SUCCESS)
        return rc;
    if (W == 1)
        return DSA_SUCCESS;
    /* 5. the exchange (each rank receives every rank's partials of its own heads), then the merge */
    if ((rc = ctx->dcp->alltoall(ctx->dcp, ctx, ctx->ws_po_send, ctx->ws_po_recv, (size_t)n * HL * lat * 4, stream)) !=
        DSA_SUCCESS)
        return rc;
    if ((rc = ctx->dcp->alltoall(ctx->dcp, ctx, ctx->ws_pl_send, ctx->ws_pl_recv, (size_t)n * HL * 4, stream)) !=
        DSA_SUCCESS)
        return rc;
    dsa_merge_params mg = {0};
    mg.part_out = (const float *)(uintptr_t)ctx->ws_po_recv;
    mg.part_lse = (const float *)(uintptr_t)ctx->ws_pl_recv;
    mg.out = at.out;
    mg.lse = at.lse;
    mg.num_tokens = (int32_t)n;
    return launch(ctx, ctx->merge_fn, (unsigned)n, (unsigned)HL, 128, 0, &mg, stream, "merge");
}

dsa_result_t dsa_attend(dsa_ctx_t ctx, const dsa_attend_args_t *a, void *stream)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_attend: ctx is NULL");
    if (!a)
        return ATTEND_FAIL("args is NULL");
    if (a->size < sizeof *a)
        return ATTEND_FAIL("args->size is %zu, expected %zu", a->size, sizeof *a);
    const dsa_plan_t *p = ctx->plan;
    if (a->num_tokens < 0)
        return ATTEND_FAIL("args->num_tokens is %lld, must be >= 0", (long long)a->num_tokens);
    if (a->num_tokens == 0)
        return DSA_SUCCESS;
    const struct {
        const void *ptr;
        const char *name;
        int vec; /* read in 16-byte chunks by the kernels */
    } need[] = {{a->q_lat, "q_lat", 0},   {a->q_pe, "q_pe", 0},           {a->positions, "positions", 0},
                {a->topk, "topk", 0},     {a->req_of_token, "req_of_token", 0}, {a->seq_lens, "seq_lens", 0},
                {a->block_table, "block_table", 0}, {a->kv_cache, "kv_cache", 1}, {a->out, "out", 0}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (!need[i].ptr)
            return ATTEND_FAIL("args->%s is NULL", need[i].name);
        if (need[i].vec && misaligned(need[i].ptr))
            return ATTEND_FAIL("args->%s is not 16-byte aligned", need[i].name);
    }
    if (a->num_requests <= 0 || a->num_requests > 0x7fffffff)
        return ATTEND_FAIL("args->num_requests is %lld, must be 1..2^31-1", (long long)a->num_requests);
    if (a->max_blocks <= 0)
        return ATTEND_FAIL("args->max_blocks is %lld, must be > 0", (long long)a->max_blocks);
    if (a->num_cache_blocks <= 0 || a->num_cache_blocks > INT32_MAX / p->info.block_size)
        return ATTEND_FAIL("args->num_cache_blocks is %lld, must be 1..%d (slots are 32-bit in the attend kernel)",
                           (long long)a->num_cache_blocks, INT32_MAX / p->info.block_size);
    const int64_t HL = p->info.heads_local;
    int64_t qls = a->q_lat_stride ? a->q_lat_stride : HL * p->info.kv_lora_rank;
    int64_t qps = a->q_pe_stride ? a->q_pe_stride : HL * p->info.qk_rope_dim;
    int64_t ts = a->topk_stride ? a->topk_stride : p->info.idx_topk;
    if (qls < HL * p->info.kv_lora_rank)
        return ATTEND_FAIL("args->q_lat_stride is %lld, at least %lld", (long long)qls, (long long)(HL * p->info.kv_lora_rank));
    if (qps < HL * p->info.qk_rope_dim)
        return ATTEND_FAIL("args->q_pe_stride is %lld, at least %lld", (long long)qps, (long long)(HL * p->info.qk_rope_dim));
    if (ts < p->info.idx_topk)
        return ATTEND_FAIL("args->topk_stride is %lld, at least idx_topk (%d)", (long long)ts, p->info.idx_topk);
    CUresult pr = dsa_cu.cuCtxPushCurrent(ctx->cu);
    if (pr != CUDA_SUCCESS)
        return dsa_fail(ctx, DSA_ERROR_CUDA, "dsa_attend: cannot make the context current (%d)", (int)pr);
    dsa_result_t rc = DSA_SUCCESS;
    /* A batch larger than the workspaces runs in chunks, never truncated; every rank of the group
     * makes the same chunks, since they all have the same num_tokens. */
    for (int64_t t0 = 0; t0 < a->num_tokens && rc == DSA_SUCCESS; t0 += ctx->ws_tokens) {
        int64_t n = a->num_tokens - t0 < ctx->ws_tokens ? a->num_tokens - t0 : ctx->ws_tokens;
        rc = attend_chunk(ctx, a, t0, n, qls, qps, ts, (CUstream)stream);
    }
    CUcontext popped;
    dsa_cu.cuCtxPopCurrent(&popped);
    return rc;
}

static dsa_result_t fill_info(const dsa_plan_t *plan, dsa_config_info_t *info, const char *fn)
{
    if (info->size < sizeof *info)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "%s: info->size is %zu, expected %zu", fn, info->size,
                        sizeof *info);
    *info = plan->info;
    return DSA_SUCCESS;
}

dsa_result_t dsa_config_info(const char *config, dsa_config_info_t *info)
{
    if (!config)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_config_info: config (argument 1) is NULL");
    if (!info)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_config_info: info (argument 2) is NULL");
    for (const dsa_plan_t *const *p = dsa_registry; *p; p++)
        if (strcmp((*p)->info.name, config) == 0)
            return fill_info(*p, info, "dsa_config_info");
    return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                    "dsa_config_info: no configuration named '%s' in this library (dsa_configs() lists them)", config);
}

dsa_result_t dsa_ctx_config(dsa_ctx_t ctx, dsa_config_info_t *info)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_config: ctx (argument 1) is NULL");
    if (!info)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_config: info (argument 2) is NULL");
    dsa_result_t rc = fill_info(ctx->plan, info, "dsa_ctx_config");
    if (rc != DSA_SUCCESS)
        memcpy(ctx->err, dsa_thread_err(), DSA_ERRLEN);
    return rc;
}
