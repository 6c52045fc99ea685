/* The NCCL transport of a DCP group: the host's communicator, or one created from an ncclUniqueId.
 * The exchange is grouped sends and receives (an all-to-all), which keeps each rank's partials in
 * rank order for the merge. The buffers the collectives use are NCCL symmetric windows where the
 * library has them (2.27 on: ncclMemAlloc + ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC),
 * which lets NCCL run its symmetric-memory kernels; otherwise plain device memory, the same calls. */
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "kernels/dsa_abi.h"
#include "transport.h"

#define NCCL_MAX_WINDOWS 16

_Static_assert(sizeof(ncclUniqueId) == DSA_NCCL_UNIQUE_ID_BYTES, "dsa.h's DSA_NCCL_UNIQUE_ID_BYTES is NCCL's");

typedef struct nccl_transport {
    dsa_transport_t base;
    ncclComm_t comm;
    int owned;
    int windows; /* 1: allocate symmetric windows; 0: plain memory (unavailable, refused, or failed) */
    int nbuf;
    struct {
        CUdeviceptr ptr;
        ncclWindow_t win; /* NULL: no window (NCCL may register without giving one) */
        int nccl_mem;     /* 1: ncclMemAlloc'd, 0: cuMemAlloc'd */
    } buf[NCCL_MAX_WINDOWS];
    CUdeviceptr scratch; /* peers(): the ranks' window records; barrier(): its all-gather's bytes */
} nccl_transport_t;

/* The prefix of NCCL's device-side window record (struct ncclWindow_vidmem in
 * nccl_device/impl/core__types.h; the same in 2.28 through 2.30), from which the device API's
 * ncclGetLsaPointer(w, offset, peer) computes lsaFlatBase + peer x stride4G x 4 GiB + offset. NVRTC
 * cannot compile NCCL's device headers, so the runtime reads it once, at context creation. */
typedef struct nccl_window_prefix {
    void *win_host;
    char *lsa_flat_base;
    int lsa_rank, world_rank;
    uint32_t stride_4g;
} nccl_window_prefix_t;

/* What one rank reports to the others in peers(): whether its copy is in a window whose record
 * it could read, its LSA and world ranks, and the window's stride. */
typedef struct nccl_peer_report {
    int64_t ok, lsa_rank, world_rank, stride_4g;
} nccl_peer_report_t;

#define NCCL_CHECK(ctx, call)                                                                                \
    do {                                                                                                     \
        ncclResult_t n_ = (call);                                                                            \
        if (n_ != ncclSuccess)                                                                               \
            return dsa_fail(ctx, DSA_ERROR_NCCL, "%s failed: %s", #call, dsa_nccl.ncclGetErrorString(n_));   \
    } while (0)

static dsa_result_t nccl_allgather(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr send, CUdeviceptr recv,
                                   size_t bytes, CUstream stream)
{
    nccl_transport_t *n = (nccl_transport_t *)t;
    NCCL_CHECK(ctx, dsa_nccl.ncclAllGather((const void *)send, (void *)recv, bytes, ncclUint8, n->comm,
                                           (cudaStream_t)stream));
    return DSA_SUCCESS;
}

static dsa_result_t nccl_alltoall(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr send, CUdeviceptr recv,
                                  size_t bytes, CUstream stream)
{
    nccl_transport_t *n = (nccl_transport_t *)t;
    NCCL_CHECK(ctx, dsa_nccl.ncclGroupStart());
    /* NCCL's group is the calling thread's: a send or receive that fails must still end it, or every
     * later NCCL call of this thread (the host's own, on other communicators, included) is deferred
     * into a group that never launches */
    ncclResult_t r = ncclSuccess;
    const char *what = "ncclGroupEnd";
    for (int p = 0; p < t->size && r == ncclSuccess; p++) {
        r = dsa_nccl.ncclSend((const void *)(send + (size_t)p * bytes), bytes, ncclUint8, p, n->comm,
                              (cudaStream_t)stream);
        what = "ncclSend";
        if (r == ncclSuccess) {
            r = dsa_nccl.ncclRecv((void *)(recv + (size_t)p * bytes), bytes, ncclUint8, p, n->comm,
                                  (cudaStream_t)stream);
            what = "ncclRecv";
        }
    }
    const ncclResult_t end = dsa_nccl.ncclGroupEnd();
    if (r == ncclSuccess) {
        r = end;
        what = "ncclGroupEnd";
    }
    if (r != ncclSuccess)
        return dsa_fail(ctx, DSA_ERROR_NCCL, "%s (all-to-all of %zu bytes a rank) failed: %s", what, bytes,
                        dsa_nccl.ncclGetErrorString(r));
    return DSA_SUCCESS;
}

/* The ranks' copies of buf as addresses of this GPU: each rank reads its window's record, the
 * reports are all-gathered (synchronously: context creation), and the addresses are NCCL's LSA
 * pointers when every rank's copy is a window of one load/store team that spans the group in rank
 * order (lsa rank = world rank on every rank: one NVLink domain). Else DSA_ERROR_UNSUPPORTED on every
 * rank alike, with the reason in the context's log. */
static dsa_result_t nccl_peers(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr buf, CUdeviceptr *out)
{
    nccl_transport_t *n = (nccl_transport_t *)t;
    dsa_result_t rc = DSA_SUCCESS;
    const int W = t->size;
    if (W > DSA_MAX_PEERS)
        return DSA_ERROR_UNSUPPORTED; /* the same on every rank: no all-gather */
    ncclWindow_t win = NULL;
    for (int i = 0; i < n->nbuf; i++)
        if (n->buf[i].ptr == buf)
            win = n->buf[i].win;
    int version = 0;
    if (dsa_nccl.ncclGetVersion)
        dsa_nccl.ncclGetVersion(&version);
    nccl_window_prefix_t w;
    memset(&w, 0, sizeof w);
    nccl_peer_report_t mine = {0, -1, -1, 0}, all[DSA_MAX_PEERS];
    if (win && version >= 22800 && version < 23100 &&
        dsa_cu.cuMemcpy((CUdeviceptr)(uintptr_t)&w, (CUdeviceptr)(uintptr_t)win, sizeof w) == CUDA_SUCCESS)
        mine = (nccl_peer_report_t){1, w.lsa_rank, w.world_rank, w.stride_4g};
    if (!n->scratch)
        CU_CHECK(ctx, dsa_cu.cuMemAlloc(&n->scratch, (size_t)(W + 1) * sizeof mine));
    CU_CHECK(ctx, dsa_cu.cuMemcpyHtoD(n->scratch, &mine, sizeof mine));
    NCCL_CHECK(ctx, dsa_nccl.ncclAllGather((const void *)n->scratch, (void *)(n->scratch + sizeof mine), sizeof mine,
                                           ncclUint8, n->comm, NULL));
    CU_CHECK(ctx, dsa_cu.cuCtxSynchronize());
    CU_CHECK(ctx, dsa_cu.cuMemcpyDtoH(all, n->scratch + sizeof mine, (size_t)W * sizeof mine));
    for (int r = 0; r < W; r++)
        if (!all[r].ok || all[r].lsa_rank != r || all[r].world_rank != r || all[r].stride_4g != all[0].stride_4g) {
            dsa_log(ctx->opts.log_level, DSA_LOG_INFO,
                    "%s: rank %d's copy of a DCP buffer is not load/store reachable from every rank (%s)",
                    ctx->cfg->info.name, r,
                    !all[r].ok ? "no NCCL 2.28-2.30 symmetric window" : "the group spans more than one NVLink domain");
            return DSA_ERROR_UNSUPPORTED;
        }
    for (int r = 0; r < W; r++)
        out[r] = r == t->rank ? buf
                              : (CUdeviceptr)(uintptr_t)(w.lsa_flat_base + (uint64_t)r * w.stride_4g * (1ull << 32));
fail:
    return rc;
}

/* A barrier of the group: an all-gather of one word a rank. No rank's all-gather completes before
 * every rank has started its own, which each does after all its earlier work on the stream. What
 * the fused path uses where the runtime's barrier kernel cannot run (device_barrier: its flags not
 * load/store reachable) or a test turns it off (dsa_testing_device_barrier). */
static dsa_result_t nccl_barrier(dsa_transport_t *t, dsa_ctx_t ctx, CUstream stream)
{
    nccl_transport_t *n = (nccl_transport_t *)t;
    NCCL_CHECK(ctx, dsa_nccl.ncclAllGather((const void *)n->scratch, (void *)(n->scratch + 4), 4, ncclUint8, n->comm,
                                           (cudaStream_t)stream));
    return DSA_SUCCESS;
}

static dsa_result_t nccl_alloc(dsa_transport_t *t, dsa_ctx_t ctx, size_t bytes, CUdeviceptr *out)
{
    nccl_transport_t *n = (nccl_transport_t *)t;
    *out = 0;
    if (n->nbuf == NCCL_MAX_WINDOWS)
        return dsa_fail(ctx, DSA_ERROR_INTERNAL, "DCP transport: more than %d buffers", NCCL_MAX_WINDOWS);
    if (n->windows) {
        void *p = NULL;
        ncclWindow_t win = NULL;
        ncclResult_t r = dsa_nccl.ncclMemAlloc(&p, bytes);
        if (r == ncclSuccess) {
            r = dsa_nccl.ncclCommWindowRegister(n->comm, p, bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
            if (r != ncclSuccess)
                dsa_nccl.ncclMemFree(p);
        }
        if (r == ncclSuccess) {
            n->buf[n->nbuf].ptr = (CUdeviceptr)(uintptr_t)p;
            n->buf[n->nbuf].nccl_mem = 1;
            n->buf[n->nbuf++].win = win;
            *out = (CUdeviceptr)(uintptr_t)p;
            return DSA_SUCCESS;
        }
        dsa_log(ctx->opts.log_level, DSA_LOG_WARN,
                "%s: NCCL symmetric window of %zu bytes refused (%s): plain device memory for the DCP buffers",
                ctx->cfg->info.name, bytes, dsa_nccl.ncclGetErrorString(r));
        n->windows = 0;
        t->path = "NCCL (plain device memory: a symmetric window was refused)";
    }
    CUresult r = dsa_cu.cuMemAlloc(out, bytes);
    if (r != CUDA_SUCCESS)
        return dsa_cu_fail(ctx, r, "cuMemAlloc", __FILE__, __LINE__);
    n->buf[n->nbuf].ptr = *out;
    n->buf[n->nbuf].nccl_mem = 0;
    n->buf[n->nbuf++].win = NULL;
    return DSA_SUCCESS;
}

/* With the context's CUDA context current (dsa_ctx_destroy). */
static void nccl_destroy(dsa_transport_t *t)
{
    nccl_transport_t *n = (nccl_transport_t *)t;
    for (int i = 0; i < n->nbuf; i++) {
        if (n->buf[i].win)
            dsa_nccl.ncclCommWindowDeregister(n->comm, n->buf[i].win);
        if (n->buf[i].nccl_mem) /* also where NCCL registered it without a window */
            dsa_nccl.ncclMemFree((void *)(uintptr_t)n->buf[i].ptr);
        else
            dsa_cu.cuMemFree(n->buf[i].ptr);
    }
    if (n->scratch)
        dsa_cu.cuMemFree(n->scratch);
    if (n->owned && n->comm)
        dsa_nccl.ncclCommDestroy(n->comm);
    free(n);
}

dsa_result_t dsa_transport_nccl(dsa_ctx_t ctx, const char *config, int W, const dsa_options_t *o,
                                dsa_transport_t **out)
{
    char err[512];
    if (dsa_load_nccl(err, sizeof err) != 0)
        return dsa_fail(ctx, DSA_ERROR_NCCL, "dsa_ctx_create: %s", err);
    nccl_transport_t *t = dsa_calloc(1, sizeof *t);
    if (!t)
        return dsa_fail(ctx, DSA_ERROR_OUT_OF_MEMORY, "dsa_ctx_create: out of host memory");
    t->base = (dsa_transport_t){0, W, nccl_allgather, nccl_alltoall, nccl_destroy, nccl_alloc, nccl_peers, nccl_barrier,
                                1, 0, "NCCL", "an NCCL all-gather", NULL};
    *out = &t->base; /* the caller destroys it, also on failure below */
    if (o->nccl_comm) {
        t->comm = (ncclComm_t)o->nccl_comm;
    } else {
        if (o->dcp_rank < 0 || o->dcp_rank >= W)
            return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: opts->dcp_rank is %d, dcp is %d",
                            o->dcp_rank, W);
        ncclUniqueId id;
        memcpy(&id, o->nccl_id, sizeof id);
        NCCL_CHECK(ctx, dsa_nccl.ncclCommInitRank(&t->comm, W, id, o->dcp_rank));
        t->owned = 1;
    }
    int count = 0, rank = 0;
    NCCL_CHECK(ctx, dsa_nccl.ncclCommCount(t->comm, &count));
    NCCL_CHECK(ctx, dsa_nccl.ncclCommUserRank(t->comm, &rank));
    if (count != W)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: the NCCL communicator has %d ranks, configuration %s has dcp %d", count,
                        config, W);
    t->base.rank = rank;
    /* symmetric windows: NCCL 2.27 or later with the calls, unless DSA_NCCL_WINDOWS=0 (a test and
     * benchmark hook, dsa_testing.h: the plain path in the same process) */
    int version = 0;
    const char *env = getenv("DSA_NCCL_WINDOWS");
    if (env && strcmp(env, "0") && strcmp(env, "1"))
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "dsa_ctx_create: DSA_NCCL_WINDOWS is '%s', expected 0 or 1",
                        dsa_escape(env, (char[37]){0}, 37));
    if (dsa_nccl.ncclGetVersion)
        dsa_nccl.ncclGetVersion(&version);
    const int have = dsa_nccl.ncclMemAlloc && dsa_nccl.ncclMemFree && dsa_nccl.ncclCommWindowRegister &&
                     dsa_nccl.ncclCommWindowDeregister && version >= 22700;
    t->windows = have && !(env && !strcmp(env, "0"));
    t->base.path = t->windows ? "NCCL, symmetric windows" : have ? "NCCL (DSA_NCCL_WINDOWS=0: plain device memory)"
                                                                 : "NCCL (no symmetric windows before 2.27: plain device memory)";
    return DSA_SUCCESS;
}

dsa_result_t dsa_nccl_unique_id(void *id, size_t size)
{
    if (!id)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_nccl_unique_id: id is NULL");
    if (size < sizeof(ncclUniqueId))
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_nccl_unique_id: size is %zu, must be at least %zu",
                        size, sizeof(ncclUniqueId));
    char err[512];
    if (dsa_load_nccl(err, sizeof err) != 0)
        return dsa_fail(NULL, DSA_ERROR_NCCL, "dsa_nccl_unique_id: %s", err);
    ncclUniqueId u;
    ncclResult_t n = dsa_nccl.ncclGetUniqueId(&u);
    if (n != ncclSuccess)
        return dsa_fail(NULL, DSA_ERROR_NCCL, "dsa_nccl_unique_id: ncclGetUniqueId failed: %s",
                        dsa_nccl.ncclGetErrorString(n));
    memcpy(id, &u, sizeof u);
    return DSA_SUCCESS;
}
