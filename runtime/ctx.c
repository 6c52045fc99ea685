/* Contexts: creation (the configuration's plan, the device, the DCP transport, the JIT'd modules,
 * the rope table, the workspaces) and destruction. Every size comes from the plan. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "dsa_testing.h"
#include "jit.h"

_Static_assert(offsetof(struct dsa_ctx, err) == 0, "error.c finds a context's message at its start");

static const char *config_names[1024];

static void fill_config_names(void)
{
    int n = 0;
    for (const dsa_plan_t *const *p = dsa_registry; *p && n < 1023; p++)
        config_names[n++] = (*p)->name;
    config_names[n] = NULL;
}

const char *const *dsa_configs(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* callers on several threads see the whole list */
    pthread_once(&once, fill_config_names);
    return config_names;
}

/* The argument checks of the configuration queries: arg (argument 1, named name), then info
 * (argument 2) and its size; errors name fn. ctx: the context whose error text they set (NULL: the
 * thread's). */
static dsa_result_t query_args(dsa_ctx_t ctx, const char *fn, const char *name, const void *arg,
                               const dsa_config_info_t *info)
{
    if (!arg)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "%s: %s (argument 1) is NULL", fn, name);
    if (!info)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: info (argument 2) is NULL", fn);
    if (info->size < sizeof *info)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: info->size is %zu, expected %zu", fn, info->size,
                        sizeof *info);
    return DSA_SUCCESS;
}

dsa_result_t dsa_config_info(const char *config, dsa_config_info_t *info)
{
    dsa_result_t rc = query_args(NULL, "dsa_config_info", "config", config, info);
    if (rc != DSA_SUCCESS)
        return rc;
    char err[1024];
    const dsa_cfg_t *cfg = dsa_cfg_linked(config, err, sizeof err);
    if (!cfg)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_config_info: %s", err);
    *info = cfg->info;
    return DSA_SUCCESS;
}

dsa_result_t dsa_config_info_dir(const char *dir, dsa_config_info_t *info, dsa_config_strings_t *strings)
{
    dsa_err_buf(NULL)[0] = '\0';
    dsa_result_t rc = query_args(NULL, "dsa_config_info_dir", "dir", dir, info);
    if (rc != DSA_SUCCESS)
        return rc;
    if (!strings)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_config_info_dir: strings (argument 3) is NULL");
    dsa_cfg_t *cfg;
    char err[2048];
    rc = dsa_cfg_load_dir(dir, &cfg, err, sizeof err);
    if (rc != DSA_SUCCESS)
        return dsa_fail(NULL, rc, "dsa_config_info_dir: %s", err);
    /* the plan's parser bounds each string by its dsa_cfg_t field, and the fields are these sizes */
    _Static_assert(sizeof strings->name == sizeof cfg->name, "name sizes");
    _Static_assert(sizeof strings->target == sizeof cfg->targets[0], "target sizes");
    _Static_assert(sizeof strings->cache_dtype_name == sizeof cfg->cache_dtype_name, "cache_dtype_name sizes");
    memcpy(strings->name, cfg->info.name, strlen(cfg->info.name) + 1);
    memcpy(strings->target, cfg->info.target, strlen(cfg->info.target) + 1);
    memcpy(strings->cache_dtype_name, cfg->info.cache_dtype_name, strlen(cfg->info.cache_dtype_name) + 1);
    *info = cfg->info;
    info->name = strings->name;
    info->target = strings->target;
    info->cache_dtype_name = strings->cache_dtype_name;
    dsa_cfg_free(cfg);
    return DSA_SUCCESS;
}

dsa_result_t dsa_testing_plan_number(const char *config, const char *key, int64_t *value)
{
    if (!config)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_plan_number: config (argument 1) is NULL");
    if (!key)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_plan_number: key (argument 2) is NULL");
    if (!value)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_plan_number: value (argument 3) is NULL");
    char err[1024];
    const dsa_cfg_t *cfg = dsa_cfg_linked(config, err, sizeof err);
    if (!cfg)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_plan_number: %s", err);
    if (dsa_plan_number(cfg, key, value) != 0)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_testing_plan_number: key (argument 2) '%.64s' is not a whole number of the plan", key);
    return DSA_SUCCESS;
}

dsa_result_t dsa_ctx_config(dsa_ctx_t ctx, dsa_config_info_t *info)
{
    dsa_result_t rc = query_args(ctx, "dsa_ctx_config", "ctx", ctx, info);
    if (rc != DSA_SUCCESS)
        return rc;
    *info = ctx->cfg->info;
    return DSA_SUCCESS;
}

int dsa_ctx_kernels(dsa_ctx_t ctx, const dsa_kernel_info_t **info)
{
    if (!ctx || !info)
        return 0;
    *info = ctx->info;
    return DSA_NMODULES;
}

void dsa_ctx_destroy(dsa_ctx_t ctx)
{
    if (!ctx)
        return;
    if (ctx->cu)
        dsa_cu.cuCtxPushCurrent(ctx->cu);
    /* the transport first: it frees the DCP buffers it allocated (symmetric windows) */
    const int transport_owns = ctx->dcp && ctx->dcp->alloc;
    if (ctx->dcp)
        ctx->dcp->destroy(ctx->dcp);
    if (ctx->cu) {
        for (int i = 0; i < DSA_NMODULES; i++)
            if (ctx->modules[i])
                dsa_cu.cuModuleUnload(ctx->modules[i]);
        CUdeviceptr mem[] = {ctx->rope_cos, ctx->rope_sin, ctx->rejected,  ctx->ws_so,
                             ctx->ws_sl,    ctx->ws_iq8,   ctx->ws_iwq,    ctx->ws_ikeys,
                             ctx->ws_imerged, ctx->ws_itopk_state, ctx->bar_state};
        for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
            if (mem[i])
                dsa_cu.cuMemFree(mem[i]);
        if (!transport_owns) { /* the buffers of the collectives: plain memory of the context's own */
            CUdeviceptr dcp_mem[] = {ctx->ws_q, ctx->ws_qg, ctx->ws_x_send, ctx->ws_x_recv, ctx->ws_icand,
                                     ctx->ws_icand_recv};
            for (size_t i = 0; i < sizeof dcp_mem / sizeof dcp_mem[0]; i++)
                if (dcp_mem[i])
                    dsa_cu.cuMemFree(dcp_mem[i]);
        }
        CUcontext dummy;
        dsa_cu.cuCtxPopCurrent(&dummy);
        dsa_cu.cuDevicePrimaryCtxRelease(ctx->dev);
    }
    dsa_cfg_free(ctx->owned_cfg);
    free(ctx);
}

/* The barrier kernel's state, for a fused path over a transport that allows it (device_barrier):
 * the flag array (W words, a cache line at least) from the transport's alloc, a window on every
 * rank, and this rank's epoch and error word in plain memory. The flags are zeroed before peers()
 * meets the other ranks for them, and no rank signals before it has passed that meeting, so no
 * signal lands in a copy not yet zeroed. Sets bar_device where every rank's copy is reachable
 * (peers() answers alike on every rank); else the transport's barrier() stays. */
static dsa_result_t prepare_device_barrier(dsa_ctx_t ctx)
{
    dsa_result_t rc = DSA_SUCCESS;
    const int W = ctx->cfg->info.dcp;
    const size_t bytes = ((size_t)W * sizeof(uint64_t) + 127) / 128 * 128;
    CUdeviceptr flags = 0, peer[DSA_MAX_PEERS];
    if ((rc = ctx->dcp->alloc(ctx->dcp, ctx, bytes, &flags)) != DSA_SUCCESS)
        return rc;
    CU_CHECK(ctx, dsa_cu.cuMemsetD8(flags, 0, bytes));
    CU_CHECK(ctx, dsa_cu.cuCtxSynchronize()); /* a memset of device memory may return before it is done */
    rc = ctx->dcp->peers(ctx->dcp, ctx, flags, peer);
    if (rc == DSA_ERROR_UNSUPPORTED)
        return DSA_SUCCESS;
    if (rc != DSA_SUCCESS)
        return rc;
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->bar_state, 2 * sizeof(uint64_t)));
    CU_CHECK(ctx, dsa_cu.cuMemsetD8(ctx->bar_state, 0, 2 * sizeof(uint64_t)));
    memset(&ctx->bar, 0, sizeof ctx->bar);
    for (int r = 0; r < W; r++)
        ctx->bar.flags_peer[r] = (uint64_t *)(uintptr_t)peer[r];
    ctx->bar.flags_own = (uint64_t *)(uintptr_t)flags;
    ctx->bar.epoch = (unsigned long long *)(uintptr_t)ctx->bar_state;
    ctx->bar.error = (unsigned int *)(uintptr_t)(ctx->bar_state + sizeof(uint64_t));
    ctx->bar.rank = ctx->dcp->rank;
    ctx->bar.size = W;
    ctx->bar_device = 1;
fail:
    return rc;
}

dsa_result_t dsa_resolve_peers(dsa_ctx_t ctx)
{
    dsa_result_t rc = ctx->dcp->peers(ctx->dcp, ctx, ctx->ws_x_recv, ctx->x_peer);
    if (rc == DSA_SUCCESS)
        rc = ctx->dcp->peers(ctx->dcp, ctx, ctx->ws_qg, ctx->q_peer);
    if (rc == DSA_SUCCESS)
        rc = ctx->dcp->peers(ctx->dcp, ctx, ctx->ws_icand_recv, ctx->c_peer);
    if (rc != DSA_SUCCESS && rc != DSA_ERROR_UNSUPPORTED)
        return rc;
    ctx->x_fused = rc == DSA_SUCCESS;
    /* the same on every rank, as x_fused is: the flags' alloc() and peers() are collective */
    if (ctx->x_fused && ctx->dcp->device_barrier && ctx->dcp->alloc && ctx->barrier_fn &&
        (rc = prepare_device_barrier(ctx)) != DSA_SUCCESS)
        return rc;
    dsa_log(ctx->opts.log_level, DSA_LOG_INFO, "%s: the query gather, the index candidates' gather and the exchange %s%s%s",
            ctx->cfg->info.name,
            ctx->x_fused ? "are fused: pack, the index top-k and attend store into every rank's buffers, then a "
                           "barrier each ("
                         : "are collectives",
            !ctx->x_fused ? "" : ctx->bar_device ? "device flags over NVLink" : ctx->dcp->barrier_path,
            ctx->x_fused ? ")" : "");
    return DSA_SUCCESS;
}

/* A buffer a collective reads or writes (and, at dcp 1, the packed query): the transport's memory
 * where it has its own (NCCL symmetric windows), else plain device memory the context frees. */
static dsa_result_t ws_alloc(dsa_ctx_t ctx, CUdeviceptr *p, size_t bytes)
{
    if (ctx->dcp && ctx->dcp->alloc)
        return ctx->dcp->alloc(ctx->dcp, ctx, bytes, p);
    CUresult r = dsa_cu.cuMemAlloc(p, bytes);
    return r == CUDA_SUCCESS ? DSA_SUCCESS : dsa_cu_fail(ctx, r, "cuMemAlloc", __FILE__, __LINE__);
}

/* The DCP group named by the options: exactly one of nccl_comm, nccl_id, inproc_group at dcp > 1,
 * none at dcp 1. */
static dsa_result_t make_transport(dsa_ctx_t ctx)
{
    const dsa_options_t *o = &ctx->opts;
    const int W = ctx->cfg->info.dcp;
    const char *name = ctx->cfg->info.name;
    int given = (o->nccl_comm != NULL) + (o->nccl_id != NULL) + (o->inproc_group != NULL);
    if (W == 1)
        return given ? dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                                "dsa_ctx_create: configuration %s has dcp 1 and needs no DCP group, but opts names one",
                                name)
                     : DSA_SUCCESS;
    if (given != 1)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: configuration %s has dcp %d: set exactly one of opts->nccl_comm, "
                        "opts->nccl_id, opts->inproc_group (%d set)",
                        name, W, given);
    return o->inproc_group ? dsa_transport_inproc(ctx, name, dsa_plan_layout(ctx->cfg), W, ctx->ws_tokens,
                                                  ctx->idx_tokens, o, &ctx->dcp)
                           : dsa_transport_nccl(ctx, name, W, o, &ctx->dcp);
}

/* The JIT's cubins loaded on the context's device, with each module's register and memory use. */
static dsa_result_t load_modules(dsa_ctx_t ctx)
{
    dsa_result_t rc;
    dsa_jit_out_t out[DSA_NMODULES];
    memset(out, 0, sizeof out);
    rc = dsa_jit_compile(ctx->cfg, ctx->target, ctx->opts.cache_dir, ctx->opts.log_level, out, ctx->err.msg,
                         DSA_ERRLEN);
    if (rc != DSA_SUCCESS)
        goto fail;
    for (int i = 0; i < DSA_NMODULES; i++) {
        CUfunction fn;
        CU_CHECK(ctx, dsa_cu.cuModuleLoadData(&ctx->modules[i], out[i].cubin));
        CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&fn, ctx->modules[i], ctx->cfg->modules[i].entry));
        int regs = 0, local = 0, shared = 0;
        CU_CHECK(ctx, dsa_cu.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
        CU_CHECK(ctx, dsa_cu.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn));
        CU_CHECK(ctx, dsa_cu.cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn));
        out[i].info.registers = regs;
        out[i].info.local_bytes = local;
        out[i].info.shared_bytes = shared;
        ctx->info[i] = out[i].info;
    }
fail:
    for (int i = 0; i < DSA_NMODULES; i++)
        free(out[i].cubin);
    dsa_err_publish(ctx);
    return rc;
}

/* The rope table, computed on the GPU from the plan's frequencies (a 200K-position table is 13
 * million sin/cos: milliseconds there, a large part of a warm start on the host). */
static dsa_result_t make_rope_table(dsa_ctx_t ctx)
{
    const dsa_cfg_t *cfg = ctx->cfg;
    dsa_result_t rc = DSA_SUCCESS;
    CUdeviceptr freq_d = 0;
    const size_t n = (size_t)cfg->rope_entries;
    double mscale = cfg->rope_mscale;
    CUfunction fn;
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&fn, ctx->modules[DSA_MODULE_PROLOGUE], cfg->entry_rope_table));
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->rope_cos, n * sizeof(float)));
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->rope_sin, n * sizeof(float)));
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&freq_d, sizeof cfg->rope_freq));
    CU_CHECK(ctx, dsa_cu.cuMemcpyHtoD(freq_d, cfg->rope_freq, sizeof cfg->rope_freq));
    void *args[] = {&freq_d, &mscale, &ctx->rope_cos, &ctx->rope_sin};
    const size_t ctas = (n + cfg->rope_threads - 1) / cfg->rope_threads;
    CU_CHECK(ctx, dsa_cu.cuLaunchKernel(fn, (unsigned)ctas, 1, 1, cfg->rope_threads, 1, 1, 0, NULL, args, NULL));
    CU_CHECK(ctx, dsa_cu.cuCtxSynchronize());
fail:
    if (freq_d)
        dsa_cu.cuMemFree(freq_d);
    return rc;
}

/* *out = the unsigned global `name` of module m: a number its kernels' build fixed (a shared memory
 * size, a thread count), which the runtime takes from the module rather than the plan. */
static dsa_result_t module_unsigned(dsa_ctx_t ctx, CUmodule m, const char *name, unsigned *out)
{
    dsa_result_t rc = DSA_SUCCESS;
    CUdeviceptr d;
    size_t bytes;
    CU_CHECK(ctx, dsa_cu.cuModuleGetGlobal(&d, &bytes, m, name));
    if (bytes != sizeof *out)
        return dsa_fail(ctx, DSA_ERROR_INTERNAL, "dsa_ctx_create: %s is %zu bytes, expected %zu", name, bytes,
                        sizeof *out);
    CU_CHECK(ctx, dsa_cu.cuMemcpyDtoH(out, d, sizeof *out));
fail:
    return rc;
}

/* Lets kernel fn (what, for the message) use `bytes` of dynamic shared memory per block, or says
 * that this device cannot give them. */
static dsa_result_t allow_smem(dsa_ctx_t ctx, CUfunction fn, unsigned bytes, const char *what)
{
    dsa_result_t rc = DSA_SUCCESS;
    int optin = 0;
    CU_CHECK(ctx, dsa_cu.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx->dev));
    if (bytes > (unsigned)optin)
        return dsa_fail(ctx, DSA_ERROR_UNSUPPORTED,
                        "dsa_ctx_create: the %s kernel of %s needs %u bytes of shared memory per block, device %d "
                        "allows %d",
                        what, ctx->cfg->info.name, bytes, ctx->opts.device, optin);
    CU_CHECK(ctx, dsa_cu.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes));
fail:
    return rc;
}

/* Stage A and C entries, the sparse MLA kernel's shared memory (its layout computes it; the
 * module exports it), and the workspaces of one attend chunk. */
static dsa_result_t prepare_calls(dsa_ctx_t ctx)
{
    const dsa_cfg_t *cfg = ctx->cfg;
    dsa_result_t rc = DSA_SUCCESS;
    CUmodule pro = ctx->modules[DSA_MODULE_PROLOGUE], att = ctx->modules[DSA_MODULE_ATTEND];
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->prologue_fn, pro, cfg->entry_prologue));
    if (cfg->entry_pack_q[0]) /* DCP > 1: at DCP = 1 attend forms its query itself */
        CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->pack_fn, att, cfg->entry_pack_q));
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->attend_fn, att, cfg->entry_attend));
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->split_merge_fn, att, cfg->entry_split_merge));
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->split_merge_few_fn, att, cfg->entry_split_merge_few));
    if (cfg->entry_merge[0])
        CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->merge_fn, att, cfg->entry_merge));
    if (cfg->entry_barrier[0])
        CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->barrier_fn, att, cfg->entry_barrier));
    /* the sparse MLA kernel's shared memory and threads, as its module was compiled */
    if ((rc = module_unsigned(ctx, att, cfg->entry_attend_smem, &ctx->attend_smem)) != DSA_SUCCESS ||
        (rc = module_unsigned(ctx, att, cfg->entry_attend_threads, &ctx->attend_threads)) != DSA_SUCCESS)
        return rc;
    if (ctx->attend_threads < 32 || ctx->attend_threads > 1024 || ctx->attend_threads % 32)
        return dsa_fail(ctx, DSA_ERROR_INTERNAL, "dsa_ctx_create: %s is %u, not a whole number of warps up to 1024",
                        cfg->entry_attend_threads, ctx->attend_threads);
    if (ctx->attend_threads > 256) {
        /* a warp-specialised CTA (more threads than the one-role kernels' 256): its roles trade
         * registers with setmaxnreg, which only balances when the CTA starts with as many as its
         * threads can have (a consumer's increase would otherwise wait for registers that never
         * come, and the kernel hang): refuse, never hang */
        int regs = 0, per_block = 0;
        CU_CHECK(ctx, dsa_cu.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, ctx->attend_fn));
        CU_CHECK(ctx, dsa_cu.cuDeviceGetAttribute(&per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, ctx->dev));
        const int full = per_block / (int)ctx->attend_threads / 8 * 8;
        if (regs != full)
            return dsa_fail(ctx, DSA_ERROR_INTERNAL,
                            "dsa_ctx_create: the sparse MLA kernel of %u threads has %d registers a thread, expected "
                            "%d (%d a block): its warp-specialised roles could not trade them",
                            ctx->attend_threads, regs, full, per_block);
    }
    if ((rc = allow_smem(ctx, ctx->attend_fn, ctx->attend_smem, "sparse MLA")) != DSA_SUCCESS)
        return rc;
    /* Splitting a row's keys over CTAs fills at most one wave of the device (dsa_attend_splits), so
     * its workspaces hold attend_slots / ctas-per-row (row, split) partials at most. */
    int per_sm = 0;
    CU_CHECK(ctx, dsa_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ctx->attend_fn, (int)ctx->attend_threads,
                                                                     ctx->attend_smem));
    ctx->attend_slots = ctx->sms * (per_sm > 0 ? per_sm : 1);
    /* clusters of a row's split CTAs that merge the row among themselves (cluster_merge,
     * kernels/dsa_wgmma_t.cuh): how many of each size the device holds at once, which the call's
     * clusters must not exceed (the runtime then launches the split merge kernel instead); above 8
     * CTAs a cluster is not portable, and a device that refuses it merges such splits the other way */
    if ((rc = module_unsigned(ctx, att, cfg->entry_attend_cluster_merge, &ctx->attend_cluster_merge)) != DSA_SUCCESS)
        return rc;
    if (ctx->attend_cluster_merge > 16 || (ctx->attend_cluster_merge & (ctx->attend_cluster_merge - 1)))
        return dsa_fail(ctx, DSA_ERROR_INTERNAL, "dsa_ctx_create: %s is %u, not 0 or a power of two up to 16",
                        cfg->entry_attend_cluster_merge, ctx->attend_cluster_merge);
    if (ctx->attend_cluster_merge > 8 &&
        dsa_cu.cuFuncSetAttribute(ctx->attend_fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) != CUDA_SUCCESS)
        ctx->attend_cluster_merge = 8;
    for (unsigned k = 1, size = 2; size <= ctx->attend_cluster_merge; k++, size *= 2) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = 1, attr.value.clusterDim.y = 1, attr.value.clusterDim.z = size;
        CUlaunchConfig lc;
        memset(&lc, 0, sizeof lc);
        lc.gridDimX = 1, lc.gridDimY = 1, lc.gridDimZ = size;
        lc.blockDimX = ctx->attend_threads, lc.blockDimY = 1, lc.blockDimZ = 1;
        lc.sharedMemBytes = ctx->attend_smem;
        lc.attrs = &attr;
        lc.numAttrs = 1;
        int n = 0;
        if (dsa_cu.cuOccupancyMaxActiveClusters(&n, ctx->attend_fn, &lc) != CUDA_SUCCESS)
            n = 0; /* a size the device does not run: the split merge kernel */
        ctx->attend_clusters[k] = n;
    }
    if (ctx->attend_cluster_merge > 1)
        dsa_log(ctx->opts.log_level, DSA_LOG_INFO,
                "%s: split rows merged in the cluster of their CTAs, clusters of 2 / 4 / 8 / 16 held at once: %d / %d "
                "/ %d / %d (0: the split merge kernel merges)",
                cfg->info.name, ctx->attend_clusters[1], ctx->attend_clusters[2], ctx->attend_clusters[3],
                ctx->attend_clusters[4]);
    ctx->split_rows = cfg->attend_max_splits > 1 ? ctx->attend_slots / (int64_t)cfg->attend_ctas_per_token : 0;
    if (ctx->split_rows >= 2) {
        CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_so, (size_t)ctx->split_rows * (size_t)cfg->ws_partial_out));
        CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_sl, (size_t)ctx->split_rows * (size_t)cfg->ws_partial_lse));
    }
    const size_t T = (size_t)ctx->ws_tokens;
    if (cfg->info.dcp > 1) { /* DCP = 1: attend packs its query itself, no packed copy */
        if ((rc = ws_alloc(ctx, &ctx->ws_q, T * (size_t)cfg->ws_q_packed)) != DSA_SUCCESS ||
            (rc = ws_alloc(ctx, &ctx->ws_qg, T * (size_t)cfg->ws_q_gathered)) != DSA_SUCCESS ||
            (rc = ws_alloc(ctx, &ctx->ws_x_send, T * (size_t)cfg->ws_exchange)) != DSA_SUCCESS ||
            (rc = ws_alloc(ctx, &ctx->ws_x_recv, T * (size_t)cfg->ws_exchange)) != DSA_SUCCESS)
            goto fail;
        dsa_log(ctx->opts.log_level, DSA_LOG_INFO, "%s: DCP collectives over %s", cfg->info.name, ctx->dcp->path);
    }
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->rejected, 2 * sizeof(uint64_t)));
    CU_CHECK(ctx, dsa_cu.cuMemsetD8(ctx->rejected, 0, 2 * sizeof(uint64_t)));
fail:
    return rc;
}

/* Stage B's entries and the workspaces of one index chunk. */
static dsa_result_t prepare_index(dsa_ctx_t ctx)
{
    const dsa_cfg_t *cfg = ctx->cfg;
    dsa_result_t rc = DSA_SUCCESS;
    CUmodule m = ctx->modules[DSA_MODULE_INDEX];
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->index_q_fn, m, cfg->entry_index_q));
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->index_score_fn, m, cfg->entry_index_score));
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->index_score_few_fn, m, cfg->entry_index_score_few));
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->index_score_group_fn, m, cfg->entry_index_score_group));
    /* the grouped score kernel's shared memory, as its module was compiled: 0 where the target has
     * no warpgroup MMA (the entry is then index_score's kernel, and groups no rows) */
    if ((rc = module_unsigned(ctx, m, cfg->entry_index_score_group_smem, &ctx->score_group_smem)) != DSA_SUCCESS ||
        (ctx->score_group_smem > 0 &&
         (rc = allow_smem(ctx, ctx->index_score_group_fn, ctx->score_group_smem, "grouped index score")) != DSA_SUCCESS))
        return rc;
    ctx->score_group_rows =
        ctx->score_group_smem > 0 && cfg->index_score_group_rows >= 2 ? (int)cfg->index_score_group_rows : 0;
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->index_topk_fn, m, cfg->entry_index_topk));
    if (cfg->entry_index_merge[0]) {
        CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->index_merge_fn, m, cfg->entry_index_merge));
        /* the merge builds its lists and merged list in dynamic shared memory (the plan's bytes) */
        if ((rc = allow_smem(ctx, ctx->index_merge_fn, cfg->index_merge_smem, "index merge")) != DSA_SUCCESS)
            return rc;
    }
    CU_CHECK(ctx, dsa_cu.cuModuleGetFunction(&ctx->index_topk_split_fn, m, cfg->entry_index_topk_split));
    int per_sm = 0, coop = 0;
    CU_CHECK(ctx, dsa_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ctx->index_score_fn,
                                                                     (int)cfg->index_score_threads, 0));
    ctx->score_slots = ctx->sms * (per_sm > 0 ? per_sm : 1);
    CU_CHECK(ctx, dsa_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ctx->index_score_few_fn,
                                                                     (int)cfg->index_score_threads, 0));
    ctx->score_few_slots = ctx->sms * (per_sm > 0 ? per_sm : 1);
    CU_CHECK(ctx, dsa_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                      &per_sm, ctx->index_score_group_fn, (int)cfg->index_score_threads, ctx->score_group_smem));
    ctx->score_group_slots = ctx->sms * (per_sm > 0 ? per_sm : 1);
    /* The split top-k's CTAs of a row wait for each other, so its grid must be resident at once: a
     * cooperative launch of at most the CTAs the device holds (the call's split comes from this). */
    CU_CHECK(ctx, dsa_cu.cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, ctx->dev));
    CU_CHECK(ctx, dsa_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ctx->index_topk_split_fn,
                                                                     (int)cfg->index_topk_split_threads, 0));
    ctx->topk_slots = coop && per_sm > 0 ? ctx->sms * per_sm : 0;
    const size_t T = (size_t)ctx->idx_tokens;
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_iq8, T * (size_t)cfg->ws_idx_q8));
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_iwq, T * (size_t)cfg->ws_idx_wq));
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_ikeys, T * (size_t)cfg->ws_idx_keys));
    CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_itopk_state, T * (size_t)cfg->ws_idx_topk_state));
    CU_CHECK(ctx, dsa_cu.cuMemsetD8(ctx->ws_itopk_state, 0, T * (size_t)cfg->ws_idx_topk_state));
    if (cfg->info.dcp > 1) {
        const size_t W = (size_t)cfg->info.dcp;
        if ((rc = ws_alloc(ctx, &ctx->ws_icand, T * (size_t)cfg->ws_idx_cand)) != DSA_SUCCESS ||
            (rc = ws_alloc(ctx, &ctx->ws_icand_recv, W * T * (size_t)cfg->ws_idx_cand)) != DSA_SUCCESS)
            goto fail;
        CU_CHECK(ctx, dsa_cu.cuMemAlloc(&ctx->ws_imerged, T * (size_t)cfg->ws_idx_merged));
    }
fail:
    return rc;
}

/* The fused gathers and exchange (DCP > 1): where every rank's buffers are load/store reachable,
 * pack stores the query, the index top-k its candidates and attend the partials straight into
 * their ranks' buffers, and a barrier replaces each collective. peers() is collective: every rank
 * of the group calls it, and all get the same answer. After prepare_calls and prepare_index, which
 * allocate the buffers. */
static dsa_result_t prepare_fused(dsa_ctx_t ctx)
{
    if (ctx->cfg->info.dcp < 2 || !ctx->dcp->peers || !ctx->dcp->barrier || ctx->cfg->info.dcp > DSA_MAX_PEERS)
        return DSA_SUCCESS;
    if (ctx->dcp->peers_at_first_call) {
        ctx->x_fused = 2;
        return DSA_SUCCESS;
    }
    return dsa_resolve_peers(ctx);
}

static dsa_result_t check_options(const dsa_options_t *opts, dsa_options_t *o)
{
    if (opts && opts->size < sizeof(dsa_options_t))
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: opts->size is %zu, expected %zu (initialise with DSA_OPTIONS_INIT)",
                        opts->size, sizeof(dsa_options_t));
    *o = (dsa_options_t)DSA_OPTIONS_INIT;
    if (opts)
        *o = *opts;
    if (o->max_tokens <= 0)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: opts->max_tokens is %lld, must be > 0",
                        (long long)o->max_tokens);
    if (o->max_tokens > 0x7fffffff)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: opts->max_tokens is %lld, at most 2^31-1 per launch",
                        (long long)o->max_tokens);
    if (o->attend_tokens < 0 || o->attend_tokens > 0x7fffffff)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: opts->attend_tokens is %lld, must be 0 (default) to 2^31-1",
                        (long long)o->attend_tokens);
    if (o->index_tokens < 0 || o->index_tokens > 0x7fffffff)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: opts->index_tokens is %lld, must be 0 (default) to 2^31-1",
                        (long long)o->index_tokens);
    /* checked here, before the context's target[16] would cut a long one to a valid-looking name */
    if (o->target && !dsa_target_ok(o->target))
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: opts->target '%s' is not an architecture like sm_90a",
                        dsa_escape(o->target, (char[37]){0}, 37)); /* 32 characters at most */
    return DSA_SUCCESS;
}

/* The device of opts, checked against the target: compute capability 9.x for sm_90*. */
static dsa_result_t open_device(dsa_ctx_t ctx)
{
    dsa_result_t rc = DSA_SUCCESS;
    char lerr[512];
    if (dsa_load_cuda(lerr, sizeof lerr) != 0)
        return dsa_fail(ctx, DSA_ERROR_CUDA, "dsa_ctx_create: no CUDA driver on this machine (%s)", lerr);
    CUresult init = dsa_cu.cuInit(0);
    if (init == CUDA_ERROR_NO_DEVICE || init == CUDA_ERROR_STUB_LIBRARY)
        return dsa_fail(ctx, DSA_ERROR_CUDA, "dsa_ctx_create: no usable CUDA device (cuInit returned %d)", (int)init);
    CU_CHECK(ctx, init);
    int count = 0, major = 0;
    CU_CHECK(ctx, dsa_cu.cuDeviceGetCount(&count));
    if (ctx->opts.device < 0 || ctx->opts.device >= count)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: opts->device is %d, this machine has %d",
                        ctx->opts.device, count);
    CU_CHECK(ctx, dsa_cu.cuDeviceGet(&ctx->dev, ctx->opts.device));
    CU_CHECK(ctx, dsa_cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ctx->dev));
    CU_CHECK(ctx, dsa_cu.cuDeviceGetAttribute(&ctx->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->dev));
    if (strncmp(ctx->target, "sm_90", 5) == 0 && major != 9)
        return dsa_fail(ctx, DSA_ERROR_UNSUPPORTED, "configuration %s targets %s; device %d has compute capability %d.x",
                        ctx->cfg->info.name, ctx->target, ctx->opts.device, major);
    CU_CHECK(ctx, dsa_cu.cuDevicePrimaryCtxRetain(&ctx->cu, ctx->dev));
fail:
    return rc;
}

/* Takes cfg (and frees it on failure when owned). */
static dsa_result_t create(const dsa_cfg_t *cfg, dsa_cfg_t *owned, const dsa_options_t *opts, dsa_ctx_t *out)
{
    dsa_options_t o;
    dsa_result_t rc = check_options(opts, &o);
    if (rc != DSA_SUCCESS) {
        dsa_cfg_free(owned);
        return rc;
    }
    dsa_ctx_t ctx = dsa_calloc(1, sizeof *ctx);
    if (!ctx) {
        dsa_cfg_free(owned);
        return dsa_fail(NULL, DSA_ERROR_OUT_OF_MEMORY, "dsa_ctx_create: out of host memory");
    }
    ctx->cfg = cfg;
    ctx->owned_cfg = owned;
    ctx->opts = o;
    ctx->ws_tokens = o.attend_tokens ? o.attend_tokens : 2048;
    ctx->idx_tokens = o.index_tokens ? o.index_tokens : 64;
    snprintf(ctx->target, sizeof ctx->target, "%s", o.target ? o.target : cfg->targets[0]);
    int pushed = 0;
    CHECK_RC(open_device(ctx));
    CU_CHECK(ctx, dsa_cu.cuCtxPushCurrent(ctx->cu));
    pushed = 1;
    CHECK_RC(make_transport(ctx));
    CHECK_RC(load_modules(ctx));
    CHECK_RC(make_rope_table(ctx));
    CHECK_RC(prepare_calls(ctx));
    CHECK_RC(prepare_index(ctx));
    CHECK_RC(prepare_fused(ctx));
    CUcontext popped;
    dsa_cu.cuCtxPopCurrent(&popped);
    *out = ctx;
    return DSA_SUCCESS;
fail:
    if (pushed) {
        CUcontext dummy;
        dsa_cu.cuCtxPopCurrent(&dummy);
    }
    dsa_err_publish(ctx);
    dsa_ctx_destroy(ctx);
    return rc;
}

dsa_result_t dsa_ctx_create(const char *config, const dsa_options_t *opts, dsa_ctx_t *out)
{
    dsa_err_buf(NULL)[0] = '\0';
    if (!out)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: ctx (argument 3) is NULL");
    *out = NULL;
    if (!config)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: config (argument 1) is NULL");
    char err[1024];
    const dsa_cfg_t *cfg = dsa_cfg_linked(config, err, sizeof err);
    if (!cfg)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: %s", err);
    return create(cfg, NULL, opts, out);
}

dsa_result_t dsa_ctx_create_plan(const struct dsa_plan *plan, const dsa_options_t *opts, dsa_ctx_t *out)
{
    dsa_err_buf(NULL)[0] = '\0';
    if (!out)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create_plan: ctx (argument 3) is NULL");
    *out = NULL;
    if (!plan)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create_plan: plan (argument 1) is NULL");
    char err[1024];
    const dsa_cfg_t *cfg = dsa_cfg_of_plan(plan, err, sizeof err);
    if (!cfg)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create_plan: %s", err);
    return create(cfg, NULL, opts, out);
}

dsa_result_t dsa_ctx_create_dir(const char *dir, const dsa_options_t *opts, dsa_ctx_t *out)
{
    dsa_err_buf(NULL)[0] = '\0';
    if (!out)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create_dir: ctx (argument 3) is NULL");
    *out = NULL;
    if (!dir)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create_dir: dir (argument 1) is NULL");
    dsa_cfg_t *cfg;
    char err[2048];
    dsa_result_t rc = dsa_cfg_load_dir(dir, &cfg, err, sizeof err);
    if (rc != DSA_SUCCESS)
        return dsa_fail(NULL, rc, "dsa_ctx_create_dir: %s", err);
    return create(cfg, cfg, opts, out);
}
