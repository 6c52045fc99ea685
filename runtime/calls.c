/* The per-layer calls: arguments checked (args.c), then launches enqueued on the host's stream,
 * with no allocation, synchronisation or compilation, so a host can capture them in a CUDA graph.
 * Launch shapes and workspace bytes come from the plan. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "dsa_testing.h"
#include "kernels/dsa_abi.h"

/* Makes ctx's CUDA context current for the scope of a call. */
static dsa_result_t push(dsa_ctx_t ctx, const char *fn)
{
    CUresult r = dsa_cu.cuCtxPushCurrent(ctx->cu);
    return r == CUDA_SUCCESS ? DSA_SUCCESS
                             : dsa_fail(ctx, DSA_ERROR_CUDA, "%s: cannot make the context current (%d)", fn, (int)r);
}

static void pop(void)
{
    CUcontext dummy;
    dsa_cu.cuCtxPopCurrent(&dummy);
}

/* Stage timing (dsa_testing.h): the next of the caller's events, recorded after step `what`. */
static dsa_result_t mark(dsa_ctx_t ctx, CUstream stream, const char *what)
{
    if (!ctx->marks || *ctx->mark_count >= ctx->mark_cap)
        return DSA_SUCCESS;
    ctx->mark_names[*ctx->mark_count] = what;
    CUresult r = dsa_cu.cuEventRecord(ctx->marks[(*ctx->mark_count)++], stream);
    return r == CUDA_SUCCESS
               ? DSA_SUCCESS
               : dsa_fail(ctx, DSA_ERROR_CUDA, "stage timing: cuEventRecord after %s failed (%d)", what, (int)r);
}

dsa_result_t dsa_testing_stage_events(dsa_ctx_t ctx, void *const *events, const char **names, int capacity, int *count)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_stage_events: ctx is NULL");
    if (events && (!names || !count || capacity < 1))
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_testing_stage_events: with events, names and count must be given and capacity >= 1");
    ctx->marks = (CUevent const *)events;
    ctx->mark_names = names;
    ctx->mark_cap = events ? capacity : 0;
    ctx->mark_count = count;
    if (count)
        *count = 0;
    return DSA_SUCCESS;
}

/* A collective of the DCP group (all-to-all or all-gather), then its stage mark. */
static dsa_result_t collective(dsa_ctx_t ctx, int alltoall, CUdeviceptr send, CUdeviceptr recv, size_t bytes,
                               CUstream stream, const char *what)
{
    dsa_result_t rc = alltoall ? ctx->dcp->alltoall(ctx->dcp, ctx, send, recv, bytes, stream)
                               : ctx->dcp->allgather(ctx->dcp, ctx, send, recv, bytes, stream);
    return rc == DSA_SUCCESS ? mark(ctx, stream, what) : rc;
}

/* A cooperative launch (coop) guarantees that every CTA of the grid is resident at once, for
 * kernels whose CTAs wait for each other; it fails rather than start a grid the device cannot hold.
 * Every other launch is a programmatic dependent launch (sm_90 on): the kernel may start launching
 * while the one ahead of it in the stream is finishing, and waits at its top for that kernel's
 * completion and memory (dsa::after_prior_grid, kernels/dsa_launch.cuh), so only the launch's
 * latency overlaps. A cooperative grid is launched plainly: it must find the device free. */
static dsa_result_t launch_as(dsa_ctx_t ctx, const char *fn, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                              unsigned threads, unsigned smem, void *params, CUstream stream, const char *what, int coop,
                              unsigned cluster_y, unsigned cluster_z)
{
    void *args[] = {params};
    CUresult r;
    if (coop) {
        r = dsa_cu.cuLaunchCooperativeKernel(f, gx, gy, gz, threads, 1, 1, smem, stream, args);
    } else {
        /* cluster_y > 1: clusters of that many CTAs along y (the sparse MLA's CTAs of a row that
         * share key tiles, attend_cluster); cluster_z > 1: along z (a row's split CTAs that merge it,
         * attend_cluster_merge); listed first so that it survives without PDL */
        CUlaunchAttribute attr[2];
        unsigned na = 0;
        memset(attr, 0, sizeof attr);
        if (cluster_y > 1 || cluster_z > 1) {
            attr[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attr[na].value.clusterDim.x = 1, attr[na].value.clusterDim.y = cluster_y, attr[na].value.clusterDim.z = cluster_z;
            na++;
        }
        if (!ctx->no_pdl) {
            attr[na].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr[na].value.programmaticStreamSerializationAllowed = 1;
            na++;
        }
        CUlaunchConfig lc;
        memset(&lc, 0, sizeof lc);
        lc.gridDimX = gx, lc.gridDimY = gy, lc.gridDimZ = gz;
        lc.blockDimX = threads, lc.blockDimY = 1, lc.blockDimZ = 1;
        lc.sharedMemBytes = smem;
        lc.hStream = stream;
        lc.attrs = attr;
        lc.numAttrs = na;
        r = dsa_cu.cuLaunchKernelEx(&lc, f, args, NULL);
    }
    if (r != CUDA_SUCCESS) {
        char code[256];
        return dsa_fail(ctx, DSA_ERROR_CUDA, "%s: launch of the %s kernel of %s failed: %s", fn, what,
                        ctx->cfg->info.name, dsa_cu_describe(r, code, sizeof code));
    }
    return mark(ctx, stream, what);
}

static dsa_result_t launch(dsa_ctx_t ctx, const char *fn, CUfunction f, unsigned gx, unsigned gy, unsigned threads,
                           unsigned smem, void *params, CUstream stream, const char *what)
{
    return launch_as(ctx, fn, f, gx, gy, 1, threads, smem, params, stream, what, 0, 1, 1);
}

/* The barrier of the group that replaces a collective of the fused gather and exchange, then its
 * stage mark: the barrier kernel (kernels/dsa_barrier.cuh) where dsa_resolve_peers chose it, else
 * the transport's barrier() (an NCCL all-gather of one word; the in-process group's rendezvous). */
static dsa_result_t dcp_barrier(dsa_ctx_t ctx, const char *fn, CUstream stream, const char *what)
{
    if (ctx->bar_device && !ctx->bar_device_off)
        return launch(ctx, fn, ctx->barrier_fn, 1, 1, DSA_BARRIER_THREADS, 0, &ctx->bar, stream, what);
    dsa_result_t rc = ctx->dcp->barrier(ctx->dcp, ctx, stream);
    return rc == DSA_SUCCESS ? mark(ctx, stream, what) : rc;
}

dsa_result_t dsa_prologue(dsa_ctx_t ctx, const dsa_prologue_args_t *a, void *stream)
{
    dsa_prologue_strides_t st;
    dsa_result_t rc = dsa_check_prologue(ctx, a, &st);
    if (rc != DSA_SUCCESS || a->num_tokens == 0)
        return rc;
    const dsa_cfg_t *cfg = ctx->cfg;
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
    k.num_slots = a->num_cache_blocks * cfg->info.block_size;
    k.q_c_stride = st.q_c;
    k.kv_stride = st.kv;
    k.idx_k_stride = st.idx_k;
    k.clear_topk = a->clear_topk && a->topk;
    if ((rc = push(ctx, "dsa_prologue")) != DSA_SUCCESS)
        return rc;
    /* A call larger than max_tokens runs as several launches, never truncated. */
    const int64_t chunk = ctx->opts.max_tokens;
    for (int64_t t0 = 0; t0 < a->num_tokens && rc == DSA_SUCCESS; t0 += chunk) {
        int64_t n = a->num_tokens - t0 < chunk ? a->num_tokens - t0 : chunk;
        k.q_c = (const uint16_t *)a->q_c + t0 * st.q_c;
        k.q_c_out = (uint16_t *)a->q_c_out + t0 * cfg->info.q_lora_rank;
        k.kv = (const uint16_t *)a->kv + t0 * st.kv;
        k.idx_k = a->idx_k ? (const uint16_t *)a->idx_k + t0 * st.idx_k : NULL;
        k.positions = a->positions + t0;
        k.slot_mapping = a->slot_mapping + t0;
        k.topk = a->topk ? a->topk + t0 * cfg->info.idx_topk : NULL;
        k.num_tokens = (int32_t)n;
        rc = launch(ctx, "dsa_prologue", ctx->prologue_fn, (unsigned)n, 1, cfg->prologue_threads, 0, &k,
                    (CUstream)stream, "prologue");
    }
    pop();
    return rc;
}

dsa_result_t dsa_take_rejected(dsa_ctx_t ctx, uint64_t counts[2])
{
    dsa_result_t rc = DSA_SUCCESS;
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_take_rejected: ctx is NULL");
    if (!counts)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_take_rejected: counts is NULL");
    if ((rc = push(ctx, "dsa_take_rejected")) != DSA_SUCCESS)
        return rc;
    CU_CHECK(ctx, dsa_cu.cuCtxSynchronize());
    CU_CHECK(ctx, dsa_cu.cuMemcpyDtoH(counts, ctx->rejected, 2 * sizeof(uint64_t)));
    CU_CHECK(ctx, dsa_cu.cuMemsetD8(ctx->rejected, 0, 2 * sizeof(uint64_t)));
    /* the one call that synchronises is where a barrier kernel that gave up on a peer is heard of
     * (kernels/dsa_barrier.cuh); taken like the counts, so each time-out is reported once */
    if (ctx->bar_state) {
        unsigned peer = 0;
        CU_CHECK(ctx, dsa_cu.cuMemcpyDtoH(&peer, ctx->bar_state + sizeof(uint64_t), sizeof peer));
        if (peer) {
            CU_CHECK(ctx, dsa_cu.cuMemsetD8(ctx->bar_state + sizeof(uint64_t), 0, sizeof peer));
            rc = dsa_fail(ctx, DSA_ERROR_NCCL,
                          "DCP barrier: rank %d waited more than %d s for rank %u (a rank stopped, or the ranks made "
                          "different calls); dsa_index and dsa_attend outputs since the last dsa_take_rejected are not to be "
                          "trusted",
                          ctx->dcp->rank, DSA_BARRIER_TIMEOUT_S, peer - 1);
        }
    }
fail:
    pop();
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
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: configuration %s has dcp 1", fn, ctx->cfg->info.name);
    if (bytes == 0)
        return DSA_SUCCESS;
    dsa_result_t rc = push(ctx, fn);
    if (rc != DSA_SUCCESS)
        return rc;
    rc = collective(ctx, alltoall, (CUdeviceptr)(uintptr_t)send, (CUdeviceptr)(uintptr_t)recv, bytes, (CUstream)stream,
                    fn);
    pop();
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

/* The CTAs each row's top-k is split over in a chunk of n rows: the largest power of two up to the
 * plan's attend_max_splits that keeps the launch within one wave (attend_slots CTAs resident at
 * once), so a split only ever adds CTAs to a device that rows alone leave idle. Every rank of a
 * DCP group computes the same number from the same n on the same kind of device; the choice
 * changes the rounding of the result, never its repeatability. */
static int attend_splits(const dsa_ctx_t ctx, int64_t n)
{
    if (ctx->force_splits)
        return ctx->force_splits;
    const int64_t ctas = n * (int64_t)ctx->cfg->attend_ctas_per_token;
    int s = 1;
    while (s < (int)ctx->cfg->attend_max_splits && ctas * 2 * s <= ctx->attend_slots)
        s *= 2;
    return s;
}

/* Whether the `splits` CTAs of each row of a chunk of n rows merge the row in their cluster (the
 * module's cluster_merge, kernels/dsa_wgmma_t.cuh) rather than the split merge kernel after them:
 * where the kernel can (attend_cluster_merge), and the device holds the chunk's clusters at once
 * (queried at context creation), so the launch stays one wave. */
static int attend_cluster_merges(const dsa_ctx_t ctx, int64_t n, int splits)
{
    if (splits < 2 || (unsigned)splits > ctx->attend_cluster_merge || ctx->cluster_merge_off)
        return 0;
    int k = 0;
    while ((1 << k) < splits)
        k++;
    return n * (int64_t)ctx->cfg->attend_ctas_per_token <= (int64_t)ctx->attend_clusters[k];
}

/* The rows of the first chunk of a dsa_attend call of `rows` rows (ctx not NULL, rows > 0). */
static int64_t first_chunk(const dsa_ctx_t ctx, int64_t rows) { return rows < ctx->ws_tokens ? rows : ctx->ws_tokens; }

int dsa_testing_attend_splits(dsa_ctx_t ctx, int64_t rows)
{
    return ctx && rows > 0 ? attend_splits(ctx, first_chunk(ctx, rows)) : 0;
}

int dsa_testing_attend_merges_in_cluster(dsa_ctx_t ctx, int64_t rows)
{
    if (!ctx || rows <= 0)
        return 0;
    const int64_t n = first_chunk(ctx, rows);
    return attend_cluster_merges(ctx, n, attend_splits(ctx, n));
}

dsa_result_t dsa_testing_force_attend_splits(dsa_ctx_t ctx, int splits)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_force_attend_splits: ctx is NULL");
    const int max = (int)ctx->cfg->attend_max_splits;
    if (splits < 0 || splits > max || (splits & (splits - 1)))
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_testing_force_attend_splits: splits is %d, must be 0 (automatic) or a power of two up to %d",
                        splits, max);
    if (splits > 1 && ctx->ws_tokens * splits > ctx->split_rows)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_testing_force_attend_splits: %d splits of %lld-row chunks need %lld split partials, the "
                        "workspace holds %lld (a smaller attend_tokens)",
                        splits, (long long)ctx->ws_tokens, (long long)(ctx->ws_tokens * splits), (long long)ctx->split_rows);
    ctx->force_splits = splits;
    return DSA_SUCCESS;
}

/* Whether this call's DCP gathers and exchange are fused (stores into the peers' buffers, then a
 * barrier each). The in-process group finds its peers at its first index or attend call (every
 * rank makes it, each on its own thread). */
static dsa_result_t fused_now(dsa_ctx_t ctx, int *fused)
{
    *fused = 0;
    if (ctx->cfg->info.dcp < 2 || ctx->x_fused_off)
        return DSA_SUCCESS;
    dsa_result_t rc;
    if (ctx->x_fused == 2 && (rc = dsa_resolve_peers(ctx)) != DSA_SUCCESS)
        return rc;
    if (ctx->x_fused == 1 && ctx->dcp->check && (rc = ctx->dcp->check(ctx->dcp, ctx)) != DSA_SUCCESS)
        return rc; /* before the call stores into a peer's buffers */
    *fused = ctx->x_fused == 1;
    return DSA_SUCCESS;
}

/* One chunk of n rows from t0: pack, (gather), attend, (split merge), (exchange, merge). */
static dsa_result_t attend_chunk(dsa_ctx_t ctx, const dsa_attend_args_t *a, const dsa_attend_strides_t *st,
                                 int64_t t0, int64_t n, CUstream stream)
{
    const dsa_cfg_t *cfg = ctx->cfg;
    const int dcp = cfg->info.dcp > 1;
    dsa_result_t rc;
    dsa_pack_params pk = {0};
    pk.q_lat = (const uint16_t *)a->q_lat + t0 * st->q_lat;
    pk.q_pe = (const uint16_t *)a->q_pe + t0 * st->q_pe;
    pk.positions = a->positions + t0;
    pk.rope_cos = (const float *)(uintptr_t)ctx->rope_cos;
    pk.rope_sin = (const float *)(uintptr_t)ctx->rope_sin;
    pk.q_packed = (uint16_t *)(uintptr_t)ctx->ws_q;
    pk.rejected = (unsigned long long *)(uintptr_t)ctx->rejected;
    pk.q_lat_stride = st->q_lat;
    pk.q_pe_stride = st->q_pe;
    pk.num_tokens = (int32_t)n;
    /* DCP > 1, fused: pack stores the query into every rank's gathered queries and attend each
     * partial into its owner's receive buffer; a barrier replaces each collective */
    int fused;
    if ((rc = fused_now(ctx, &fused)) != DSA_SUCCESS)
        return rc;
    pk.rank = ctx->dcp ? ctx->dcp->rank : 0;
    pk.qfused = fused;
    for (int r = 0; fused && r < cfg->info.dcp; r++)
        pk.qdest[r] = (uint16_t *)(uintptr_t)ctx->q_peer[r];
    /* DCP = 1: attend packs its query itself from pk (kernels/dsa_attend.cuh, QueryChunks) */
    if (dcp && (rc = launch(ctx, "dsa_attend", ctx->pack_fn, (unsigned)n, cfg->pack_ctas_per_token, cfg->pack_threads,
                            0, &pk, stream, "pack")) != DSA_SUCCESS)
        return rc;
    /* 2. the query all-gather: every rank attends for the whole group's heads */
    if (fused) {
        if ((rc = dcp_barrier(ctx, "dsa_attend", stream, "gather")) != DSA_SUCCESS)
            return rc;
    } else if (dcp && (rc = collective(ctx, 0, ctx->ws_q, ctx->ws_qg, (size_t)n * (size_t)cfg->ws_q_packed, stream,
                                       "gather")) != DSA_SUCCESS) {
        return rc;
    }
    dsa_attend_params at = {0};
    at.q = (const uint16_t *)(uintptr_t)ctx->ws_qg; /* DCP > 1 */
    at.pack = pk;                                    /* DCP = 1 */
    at.topk = a->topk + t0 * st->topk;
    at.req_of_token = a->req_of_token + t0;
    at.seq_lens = a->seq_lens;
    at.block_table = a->block_table;
    at.kv_cache = a->kv_cache;
    at.out = (uint16_t *)a->out + t0 * cfg->out_row;
    at.lse = a->lse ? a->lse + t0 * cfg->lse_row : NULL;
    /* DCP > 1: the partials go to this rank's send buffer for the all-to-all, or (fused) straight
     * into their owners' receive buffers */
    at.xfused = fused;
    for (int r = 0; r < (fused ? cfg->info.dcp : 1); r++)
        at.xdest[r] = (uint8_t *)(uintptr_t)(fused ? ctx->x_peer[r] : ctx->ws_x_send);
    at.num_slots = a->num_cache_blocks * cfg->info.block_size;
    at.max_blocks = a->max_blocks;
    at.num_requests = a->num_requests;
    at.topk_stride = st->topk;
    at.num_tokens = (int32_t)n;
    at.rank = ctx->dcp ? ctx->dcp->rank : 0;
    at.splits = attend_splits(ctx, n);
    at.split_out = (float *)(uintptr_t)ctx->ws_so;
    at.split_lse = (float *)(uintptr_t)ctx->ws_sl;
    const int cmerge = attend_cluster_merges(ctx, n, at.splits);
    if ((rc = launch_as(ctx, "dsa_attend", ctx->attend_fn, (unsigned)n, cfg->attend_ctas_per_token, (unsigned)at.splits,
                        ctx->attend_threads, ctx->attend_smem, &at, stream, "attend", 0, cfg->attend_cluster,
                        cmerge ? (unsigned)at.splits : 1)) != DSA_SUCCESS)
        return rc;
    /* 4b. the splits of each row merged into what one split writes: by the split CTAs themselves
     * (cmerge), else by the split merge kernel */
    if (at.splits > 1 && !cmerge) {
        dsa_split_merge_params sm = {0};
        sm.split_out = at.split_out;
        sm.split_lse = at.split_lse;
        sm.out = at.out;
        sm.lse = at.lse;
        memcpy(sm.xdest, at.xdest, sizeof sm.xdest);
        sm.xfused = at.xfused;
        sm.rank = at.rank;
        sm.num_tokens = (int32_t)n;
        sm.splits = at.splits;
        /* rows of few splits (many rows): the entry with fewer loads in flight a thread, more CTAs an SM */
        CUfunction f = (unsigned)at.splits <= cfg->split_merge_few ? ctx->split_merge_few_fn : ctx->split_merge_fn;
        if ((rc = launch(ctx, "dsa_attend", f, (unsigned)n, (unsigned)cfg->info.heads_gathered,
                         cfg->merge_threads, 0, &sm, stream, "split merge")) != DSA_SUCCESS)
            return rc;
    }
    if (!dcp)
        return DSA_SUCCESS;
    /* 5. the exchange (each rank receives every rank's partials of its own heads, outputs and LSEs in
     * one block a rank): an all-to-all, or with the fused exchange only a barrier (the partials are
     * in place), then the merge */
    if (fused) {
        if ((rc = dcp_barrier(ctx, "dsa_attend", stream, "exchange")) != DSA_SUCCESS)
            return rc;
    } else if ((rc = collective(ctx, 1, ctx->ws_x_send, ctx->ws_x_recv, (size_t)n * (size_t)cfg->exchange_row, stream,
                                "exchange")) != DSA_SUCCESS) {
        return rc;
    }
    dsa_merge_params mg = {0};
    mg.xrecv = (const uint8_t *)(uintptr_t)ctx->ws_x_recv;
    mg.out = at.out;
    mg.lse = at.lse;
    mg.num_tokens = (int32_t)n;
    return launch(ctx, "dsa_attend", ctx->merge_fn, (unsigned)n, (unsigned)cfg->info.heads_local, cfg->merge_threads, 0, &mg, stream,
                  "merge");
}

dsa_result_t dsa_attend(dsa_ctx_t ctx, const dsa_attend_args_t *a, void *stream)
{
    dsa_attend_strides_t st;
    dsa_result_t rc = dsa_check_attend(ctx, a, &st);
    if (rc != DSA_SUCCESS || a->num_tokens == 0)
        return rc;
    if ((rc = push(ctx, "dsa_attend")) != DSA_SUCCESS)
        return rc;
    /* A batch larger than the workspaces runs in chunks, never truncated; every rank of the group
     * makes the same chunks, since they all have the same num_tokens. */
    for (int64_t t0 = 0; t0 < a->num_tokens && rc == DSA_SUCCESS; t0 += ctx->ws_tokens) {
        int64_t n = a->num_tokens - t0 < ctx->ws_tokens ? a->num_tokens - t0 : ctx->ws_tokens;
        rc = attend_chunk(ctx, a, &st, t0, n, (CUstream)stream);
    }
    pop();
    return rc;
}

/* CTAs per row of the top-k for a chunk of n rows: the CTAs the device holds at once (a
 * cooperative launch allows no more) shared by the rows, no more than the plan says a row can use;
 * 1 (one CTA a row, the plain kernel) where a row would get fewer than the plan's index_topk_split_min
 * or has at most its index_topk_split_min_keys keys (max_keys: the table row's, a bound). */
static int64_t topk_splits(dsa_ctx_t ctx, int64_t n, int64_t max_keys)
{
    const dsa_cfg_t *cfg = ctx->cfg;
    if (ctx->force_topk == 1 || (ctx->force_topk != 2 && max_keys <= (int64_t)cfg->index_topk_split_min_keys))
        return 1;
    int64_t s = n > 0 ? ctx->topk_slots / n : 0;
    s = s > (int64_t)cfg->index_topk_split_max ? (int64_t)cfg->index_topk_split_max : s;
    const int64_t by_keys = (max_keys + cfg->index_topk_split_keys - 1) / cfg->index_topk_split_keys;
    s = s > by_keys ? by_keys : s;
    s = ctx->topk_cap && s > ctx->topk_cap ? ctx->topk_cap : s;
    return s >= (ctx->force_topk == 2 ? 2 : (int64_t)cfg->index_topk_split_min) ? s : 1;
}

/* A testing hook's ctx and on/off argument checked (fn, for messages). */
static dsa_result_t check_switch(dsa_ctx_t ctx, const char *fn, int on)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (on != 0 && on != 1)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: on is %d, must be 0 or 1", fn, on);
    return DSA_SUCCESS;
}

/* A testing hook that turns a path of ctx off (on = 0) or back on (1, where ctx has it: `has`). */
static dsa_result_t path_switch(dsa_ctx_t ctx, const char *fn, int on, int has, const char *path, int *off)
{
    const dsa_result_t rc = check_switch(ctx, fn, on);
    if (rc != DSA_SUCCESS)
        return rc;
    if (on && !has)
        return dsa_fail(ctx, DSA_ERROR_UNSUPPORTED, "%s: %s has no %s (the context's log says why)", fn,
                        ctx->cfg->info.name, path);
    *off = !on;
    return DSA_SUCCESS;
}

dsa_result_t dsa_testing_fused_exchange(dsa_ctx_t ctx, int on)
{
    /* x_fused 2, found at the first call, counts as there */
    return path_switch(ctx, "dsa_testing_fused_exchange", on, ctx && ctx->x_fused,
                       "fused gathers and exchange (dcp 1, or a rank's buffer not load/store reachable)",
                       ctx ? &ctx->x_fused_off : NULL);
}

dsa_result_t dsa_testing_attend_cluster_merge(dsa_ctx_t ctx, int on)
{
    return path_switch(ctx, "dsa_testing_attend_cluster_merge", on, ctx && ctx->attend_cluster_merge > 1,
                       "cluster merge of a row's splits (only the 16- and 32-head sparse MLA on sm_90a at DCP = 1 has it)",
                       ctx ? &ctx->cluster_merge_off : NULL);
}

dsa_result_t dsa_testing_device_barrier(dsa_ctx_t ctx, int on)
{
    return path_switch(ctx, "dsa_testing_device_barrier", on, ctx && ctx->bar_device,
                       "barrier kernel (dcp 1, the collectives, the in-process group, or flags not load/store "
                       "reachable)",
                       ctx ? &ctx->bar_device_off : NULL);
}

dsa_result_t dsa_testing_index_keys(dsa_ctx_t ctx, int64_t rows, int64_t keys_per_row, uint32_t *out)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_index_keys: ctx is NULL");
    if (!out)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_index_keys: out is NULL");
    if (rows < 1 || rows > ctx->idx_tokens || keys_per_row < 1 || keys_per_row > ctx->cfg->idx_max_local)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_testing_index_keys: rows is %lld and keys_per_row %lld, must be 1..%lld and 1..%lld",
                        (long long)rows, (long long)keys_per_row, (long long)ctx->idx_tokens,
                        (long long)ctx->cfg->idx_max_local);
    dsa_result_t rc = push(ctx, "dsa_testing_index_keys");
    if (rc != DSA_SUCCESS)
        return rc;
    CU_CHECK(ctx, dsa_cu.cuCtxSynchronize());
    for (int64_t t = 0; t < rows; t++)
        CU_CHECK(ctx, dsa_cu.cuMemcpyDtoH(out + t * keys_per_row,
                                          ctx->ws_ikeys + (CUdeviceptr)(t * ctx->cfg->idx_max_local * 4),
                                          (size_t)keys_per_row * 4));
fail:
    pop();
    return rc;
}

dsa_result_t dsa_testing_programmatic_launch(dsa_ctx_t ctx, int on)
{
    const dsa_result_t rc = check_switch(ctx, "dsa_testing_programmatic_launch", on);
    if (rc == DSA_SUCCESS)
        ctx->no_pdl = !on;
    return rc;
}

/* A stage B kernel choice forced by a test (fn, for messages): which is 0 (automatic), 1 (one1), 2
 * (two) or, where three is not NULL, 3 (three), stored in *slot (a field of ctx; unused when ctx is
 * NULL). */
static dsa_result_t force_choice(dsa_ctx_t ctx, const char *fn, int which, const char *one1, const char *two,
                                 const char *three, int *slot)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (which < 0 || which > (three ? 3 : 2)) {
        if (three)
            return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                            "%s: which is %d, must be 0 (automatic), 1 (%s), 2 (%s) or 3 (%s)", fn, which, one1, two,
                            three);
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: which is %d, must be 0 (automatic), 1 (%s) or 2 (%s)", fn,
                        which, one1, two);
    }
    *slot = which;
    return DSA_SUCCESS;
}

dsa_result_t dsa_testing_force_index_topk(dsa_ctx_t ctx, int which)
{
    return force_choice(ctx, "dsa_testing_force_index_topk", which, "one CTA a row", "split from 2 CTAs a row", NULL,
                        ctx ? &ctx->force_topk : NULL);
}

dsa_result_t dsa_testing_force_index_score(dsa_ctx_t ctx, int which)
{
    return force_choice(ctx, "dsa_testing_force_index_score", which, "index_score_few", "index_score",
                        "index_score_group", ctx ? &ctx->force_score : NULL);
}

dsa_result_t dsa_testing_index_topk_cap(dsa_ctx_t ctx, int cap)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_index_topk_cap: ctx is NULL");
    if (cap < 0 || cap == 1)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_testing_index_topk_cap: cap is %d, must be 0 (the automatic choice) or at least 2", cap);
    ctx->topk_cap = cap;
    return DSA_SUCCESS;
}

/* A testing hook that sets a switch of ctx (*field: in ctx, NULL where ctx is) to on, once
 * check_switch allows it (fn, for messages). */
static dsa_result_t set_switch(dsa_ctx_t ctx, const char *fn, int on, int *field)
{
    const dsa_result_t rc = check_switch(ctx, fn, on);
    if (rc == DSA_SUCCESS)
        *field = on;
    return rc;
}

dsa_result_t dsa_testing_index_keep_keys(dsa_ctx_t ctx, int on)
{
    return set_switch(ctx, "dsa_testing_index_keep_keys", on, ctx ? &ctx->keep_index_keys : NULL);
}

dsa_result_t dsa_testing_index_score_bins(dsa_ctx_t ctx, int mode)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_index_score_bins: ctx is NULL");
    if (mode < 0 || mode > 2)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_index_score_bins: mode is %d, must be 0, 1 or 2",
                        mode);
    if (mode != 0 && !ctx->cfg->index_score_bins)
        return dsa_fail(ctx, DSA_ERROR_UNSUPPORTED,
                        "dsa_testing_index_score_bins: mode is %d, but %s's plan has index_score count nothing "
                        "(index_score_bins 0)",
                        mode, ctx->cfg->info.name);
    ctx->no_score_bins = mode == 0;
    ctx->no_bins_stage = mode == 2;
    return DSA_SUCCESS;
}

dsa_result_t dsa_testing_index_fail_topk(dsa_ctx_t ctx, int on)
{
    return set_switch(ctx, "dsa_testing_index_fail_topk", on, ctx ? &ctx->fail_topk : NULL);
}

dsa_result_t dsa_testing_index_topk_bit_keys(dsa_ctx_t ctx, int keys)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_testing_index_topk_bit_keys: ctx is NULL");
    if (keys < 0)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_testing_index_topk_bit_keys: keys is %d, must be 0 (the plan's) or at least 1", keys);
    ctx->topk_bit_keys = keys;
    return DSA_SUCCESS;
}

int64_t dsa_index_topk_splits(dsa_ctx_t ctx, int64_t rows, int64_t max_blocks)
{
    if (!ctx || rows < 1 || max_blocks < 1)
        return 0;
    /* a block table's row is at most INT32_MAX blocks (dsa_index's check), and so no product here
     * can overflow */
    max_blocks = max_blocks > INT32_MAX ? INT32_MAX : max_blocks;
    return topk_splits(ctx, rows < ctx->idx_tokens ? rows : ctx->idx_tokens, max_blocks * ctx->cfg->info.block_size);
}

/* A chunk that failed (rc) after its score kernel was launched: where that kernel counted into the
 * rows' top-k states (sc->topk_hist), which only the top-k clears, the states are zeroed on the
 * call's stream after it, so that the next call does not start from this one's counts (a failure
 * of the zeroing too is lost behind rc, which the caller gets). */
static dsa_result_t index_unwind(dsa_ctx_t ctx, const dsa_index_score_params *sc, int64_t n, CUstream stream,
                                 dsa_result_t rc)
{
    if (sc->topk_hist)
        (void)dsa_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)sc->topk_hist, 0,
                                     (size_t)n * (size_t)ctx->cfg->ws_idx_topk_state, stream);
    return rc;
}

/* One chunk of n rows from t0: query, scores, local top-k, (exchange, merge). */
static dsa_result_t index_chunk(dsa_ctx_t ctx, const dsa_index_args_t *a, const dsa_index_strides_t *st, int64_t t0,
                                int64_t n, CUstream stream)
{
    const dsa_cfg_t *cfg = ctx->cfg;
    const int dcp = cfg->info.dcp > 1;
    dsa_result_t rc;
    dsa_index_q_params q = {0};
    q.q = (const uint16_t *)a->q + t0 * st->q;
    q.weights = a->weights + t0 * st->weights;
    q.positions = a->positions + t0;
    q.rope_cos = (const float *)(uintptr_t)ctx->rope_cos;
    q.rope_sin = (const float *)(uintptr_t)ctx->rope_sin;
    q.q8 = (uint8_t *)(uintptr_t)ctx->ws_iq8;
    q.wq = (float *)(uintptr_t)ctx->ws_iwq;
    q.q_stride = st->q;
    q.w_stride = st->weights;
    q.num_tokens = (int32_t)n;
    if ((rc = launch(ctx, "dsa_index", ctx->index_q_fn, (unsigned)n, cfg->index_q_ctas_per_token, cfg->index_q_threads,
                     0, &q, stream, "index query")) != DSA_SUCCESS)
        return rc;
    dsa_index_score_params sc = {0};
    sc.q8 = q.q8;
    sc.wq = q.wq;
    sc.positions = q.positions;
    sc.req_of_token = a->req_of_token + t0;
    sc.seq_lens = a->seq_lens;
    sc.block_table = a->block_table;
    sc.idx_cache = a->idx_cache;
    sc.keys = (uint32_t *)(uintptr_t)ctx->ws_ikeys;
    sc.num_slots = a->num_cache_blocks * cfg->info.block_size;
    sc.max_blocks = a->max_blocks;
    sc.num_requests = a->num_requests;
    sc.key_stride = cfg->idx_max_local;
    sc.num_tokens = (int32_t)n;
    sc.rank = ctx->dcp ? ctx->dcp->rank : 0;
    /* 1: a chunk of few rows: the mma.sync kernel, whose CTAs start scoring at once; from the
     * plan's index_score_few_rows on, 2: index_score (on sm_90a warpgroup MMA behind a bulk-copy
     * pipeline), or 3: index_score_group where the call has more rows than requests (prefill rows
     * share a request, so they share keys) and the chunk at least a group's rows, on a target where
     * it groups: each CTA of a group's rows of one request scores them all, each key tile loaded
     * once; its other rows score as index_score's. By the call's and the chunk's sizes alone:
     * every rank of the group (and DCP = 1 with the same chunks) picks the same (and the grouped
     * kernel's scores are index_score's, bit for bit). */
    int score = ctx->force_score;
    if (!score)
        score = n < (int64_t)cfg->index_score_few_rows ? 1
                : ctx->score_group_rows > 0 && a->num_tokens > a->num_requests && n >= ctx->score_group_rows ? 3
                                                                                                              : 2;
    /* one wave: the CTAs the device holds at once, shared by the rows (a second, partial wave
     * would leave most of the machine idle), never more than a row's keys need; the grouped
     * kernel's rows share a CTA, R to one where they group */
    const int slots = score == 1 ? ctx->score_few_slots : score == 2 ? ctx->score_slots : ctx->score_group_slots;
    const int64_t R = score == 3 && ctx->score_group_rows > 0 ? ctx->score_group_rows : 1;
    const int64_t busy = (n + R - 1) / R; /* CTAs that score, where every group groups */
    int64_t splits = slots / busy;
    const int64_t most = (cfg->idx_max_local + cfg->index_score_keys_per_cta - 1) / cfg->index_score_keys_per_cta;
    splits = splits < 1 ? 1 : splits > most ? most : splits > 65535 ? 65535 : splits;
    CUfunction fn = score == 1 ? ctx->index_score_few_fn : score == 2 ? ctx->index_score_fn : ctx->index_score_group_fn;
    /* few rows: each row's top-k over several CTAs, which meet at barriers (a cooperative launch,
     * so that they are resident at once); many rows: a CTA per row fills the device already; rows
     * whose table holds at most the plan's index_topk_split_min_keys keys: a CTA per row too */
    const int64_t tsplits = topk_splits(ctx, n, a->max_blocks * cfg->info.block_size); /* a row's keys at most */
    /* where the plan says so, index_score (on sm_90a) counts the split top-k's first radix pass into
     * the rows' states as it writes the scores, and the top-k starts from those counts (a row that
     * index_score did not mark counted it counts itself) */
    if (score == 2 && tsplits > 1 && cfg->index_score_bins && !ctx->no_score_bins) {
        sc.topk_hist = (uint32_t *)(uintptr_t)ctx->ws_itopk_state;
        sc.hist_stride = cfg->ws_idx_topk_state / 4;
    }
    if ((rc = launch(ctx, "dsa_index", fn, (unsigned)n, (unsigned)splits, cfg->index_score_threads,
                     score == 3 ? ctx->score_group_smem : 0, &sc, stream, "index score")) != DSA_SUCCESS)
        return rc;
    dsa_index_topk_params tk = {0};
    tk.keys = sc.keys;
    tk.positions = q.positions;
    tk.req_of_token = sc.req_of_token;
    tk.seq_lens = a->seq_lens;
    tk.cand_out = (uint32_t *)(uintptr_t)ctx->ws_icand;
    tk.cand_in = (const uint32_t *)(uintptr_t)ctx->ws_icand_recv;
    tk.merged = (uint32_t *)(uintptr_t)ctx->ws_imerged;
    tk.topk = a->topk + t0 * st->topk;
    tk.split_state = (uint32_t *)(uintptr_t)ctx->ws_itopk_state;
    tk.num_requests = a->num_requests;
    tk.key_stride = cfg->idx_max_local;
    tk.topk_stride = st->topk;
    tk.state_stride = cfg->ws_idx_topk_state / 4;
    tk.num_tokens = (int32_t)n;
    tk.rank = sc.rank;
    tk.bit_keys = ctx->topk_bit_keys ? ctx->topk_bit_keys : (int32_t)cfg->index_topk_bit_keys;
    tk.discard_keys = !ctx->keep_index_keys;
    tk.hist_given = sc.topk_hist == NULL ? 0 : ctx->no_bins_stage ? 2 : 1;
    /* DCP > 1, fused: the top-k stores each row's candidates into every rank's cand_in, once every
     * rank's merge of the previous chunk (or call) is done reading its own: a barrier first. (No
     * other barrier need come between two index chunks, unlike the query gather and the exchange,
     * which the other's barrier separates.) */
    int fused = 0;
    if (dcp && (rc = fused_now(ctx, &fused)) != DSA_SUCCESS)
        return index_unwind(ctx, &sc, n, stream, rc);
    tk.cfused = fused;
    for (int r = 0; fused && r < cfg->info.dcp; r++)
        tk.cdest[r] = (uint32_t *)(uintptr_t)ctx->c_peer[r];
    if (fused && (rc = dcp_barrier(ctx, "dsa_index", stream, "index barrier")) != DSA_SUCCESS)
        return index_unwind(ctx, &sc, n, stream, rc);
    if (ctx->fail_topk)
        rc = dsa_fail(ctx, DSA_ERROR_INTERNAL, "dsa_index: index top-k not launched (dsa_testing_index_fail_topk)");
    else
        rc = tsplits > 1 ? launch_as(ctx, "dsa_index", ctx->index_topk_split_fn, (unsigned)n, (unsigned)tsplits, 1,
                                     cfg->index_topk_split_threads, 0, &tk, stream, "index top-k (split)", 1, 1, 1)
                         : launch(ctx, "dsa_index", ctx->index_topk_fn, (unsigned)n, 1, cfg->index_topk_threads, 0,
                                  &tk, stream, "index top-k");
    if (rc != DSA_SUCCESS)
        return index_unwind(ctx, &sc, n, stream, rc);
    if (!dcp)
        return rc;
    /* the candidates of every rank to every rank (in place already when fused), then the same merge
     * everywhere */
    if (fused) {
        if ((rc = dcp_barrier(ctx, "dsa_index", stream, "index gather")) != DSA_SUCCESS)
            return rc;
    } else if ((rc = collective(ctx, 0, ctx->ws_icand, ctx->ws_icand_recv, (size_t)n * (size_t)cfg->ws_idx_cand,
                                stream, "index gather")) != DSA_SUCCESS) {
        return rc;
    }
    return launch(ctx, "dsa_index", ctx->index_merge_fn, (unsigned)n, 1, cfg->index_topk_threads, cfg->index_merge_smem,
                  &tk, stream, "index merge");
}

dsa_result_t dsa_index(dsa_ctx_t ctx, const dsa_index_args_t *a, void *stream)
{
    dsa_index_strides_t st;
    dsa_result_t rc = dsa_check_index(ctx, a, &st);
    if (rc != DSA_SUCCESS || a->num_tokens == 0)
        return rc;
    if ((rc = push(ctx, "dsa_index")) != DSA_SUCCESS)
        return rc;
    /* chunks beyond the workspaces, never truncated; every rank makes the same chunks */
    for (int64_t t0 = 0; t0 < a->num_tokens && rc == DSA_SUCCESS; t0 += ctx->idx_tokens) {
        const int64_t n = a->num_tokens - t0 < ctx->idx_tokens ? a->num_tokens - t0 : ctx->idx_tokens;
        rc = index_chunk(ctx, a, &st, t0, n, (CUstream)stream);
    }
    pop();
    return rc;
}
