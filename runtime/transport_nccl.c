/* The NCCL transport of a DCP group: the host's communicator, or one created from an ncclUniqueId.
 * The exchange is grouped sends and receives (an all-to-all), which keeps each rank's partials in
 * rank order for the merge. */
#include <stdlib.h>
#include <string.h>

#include "transport.h"

_Static_assert(sizeof(ncclUniqueId) == DSA_NCCL_UNIQUE_ID_BYTES, "dsa.h's DSA_NCCL_UNIQUE_ID_BYTES is NCCL's");

typedef struct nccl_transport {
    dsa_transport_t base;
    ncclComm_t comm;
    int owned;
} nccl_transport_t;

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
    for (int p = 0; p < t->size; p++) {
        NCCL_CHECK(ctx, dsa_nccl.ncclSend((const void *)(send + (size_t)p * bytes), bytes, ncclUint8, p, n->comm,
                                          (cudaStream_t)stream));
        NCCL_CHECK(ctx, dsa_nccl.ncclRecv((void *)(recv + (size_t)p * bytes), bytes, ncclUint8, p, n->comm,
                                          (cudaStream_t)stream));
    }
    NCCL_CHECK(ctx, dsa_nccl.ncclGroupEnd());
    return DSA_SUCCESS;
}

static void nccl_destroy(dsa_transport_t *t)
{
    nccl_transport_t *n = (nccl_transport_t *)t;
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
    t->base = (dsa_transport_t){0, W, nccl_allgather, nccl_alltoall, nccl_destroy};
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
