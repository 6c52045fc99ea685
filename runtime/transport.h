/* The DCP transport behind one small interface: NCCL in production (transport_nccl.c), an
 * in-process group in tests (transport_inproc.c). Both only enqueue work on the caller's stream. */
#ifndef DSA_TRANSPORT_H
#define DSA_TRANSPORT_H

#include "error.h"

typedef struct dsa_transport dsa_transport_t;
struct dsa_transport {
    int rank, size;
    /* recv = the size send buffers of bytes each, in rank order */
    dsa_result_t (*allgather)(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr send, CUdeviceptr recv, size_t bytes,
                              CUstream stream);
    /* send: size blocks of bytes, block p for rank p; recv: size blocks, block p from rank p */
    dsa_result_t (*alltoall)(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr send, CUdeviceptr recv, size_t bytes,
                             CUstream stream);
    void (*destroy)(dsa_transport_t *t);
    /* NULL, or device memory for a buffer the collectives read or write, which the transport owns
     * and frees in destroy: NCCL allocates it as a symmetric window on every rank where it can, so
     * that its collectives run the symmetric-memory kernels (load/store over NVLink). Called in
     * the same order with the same sizes on every rank (registration is collective). */
    dsa_result_t (*alloc)(dsa_transport_t *t, dsa_ctx_t ctx, size_t bytes, CUdeviceptr *out);
    /* NULL, or (collective: every rank calls it with its own copy of one buffer) the addresses at
     * which this GPU can load and store every rank's copy of buf: out[r] for rank r. buf is the
     * context's own memory (in-process) or from alloc. DSA_ERROR_UNSUPPORTED, on every rank alike,
     * where some rank's copy is not reachable so (the caller then uses the collectives). */
    dsa_result_t (*peers)(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr buf, CUdeviceptr *out);
    /* NULL, or a barrier of the group on stream: after it, the work every rank enqueued before its
     * barrier is complete and its stores into peers' buffers are visible to their owners. */
    dsa_result_t (*barrier)(dsa_transport_t *t, dsa_ctx_t ctx, CUstream stream);
    /* 1: the runtime may replace barrier() by its barrier kernel (kernels/dsa_barrier.cuh) over a
     * flag array from alloc() that peers() finds reachable (dsa_resolve_peers). 0: barrier() only,
     * as in the in-process group, whose ranks share one GPU and one stream: a rank's kernel
     * spinning for another rank's signal would wait for work queued behind it. */
    int device_barrier;
    /* 1: call peers() at the first call that needs it, not in dsa_ctx_create (the in-process
     * group: a test creates its ranks' contexts one after another on one thread, so they cannot
     * meet there; they do meet in their calls, one thread each) */
    int peers_at_first_call;
    const char *path;         /* what carries the collectives, for the context's log */
    const char *barrier_path; /* what barrier() is, likewise */
    /* NULL, or whether the peers' buffers that peers() gave are still there, checked before a call's
     * first store into them (the in-process group: a rank whose context is destroyed frees its
     * buffers; DSA_ERROR_INTERNAL then, and nothing stored) */
    dsa_result_t (*check)(dsa_transport_t *t, dsa_ctx_t ctx);
};

/* The transport of a dcp-rank group named by opts (exactly one of nccl_comm, nccl_id,
 * inproc_group); *out NULL at dcp 1. Errors are recorded in ctx (used for nothing else). */
DSA_HIDDEN dsa_result_t dsa_transport_create(dsa_ctx_t ctx, const char *config, int dcp, const dsa_options_t *opts,
                                             dsa_transport_t **out);
DSA_HIDDEN dsa_result_t dsa_transport_nccl(dsa_ctx_t ctx, const char *config, int dcp, const dsa_options_t *opts,
                                           dsa_transport_t **out);
/* ws_tokens, idx_tokens: the context's attend and index chunk rows, and layout: a digest of its
 * plan's per-row buffer sizes (dsa_plan_layout), which size the buffers the ranks write into each
 * other's: every rank of the group must have the same, and the configuration */
DSA_HIDDEN dsa_result_t dsa_transport_inproc(dsa_ctx_t ctx, const char *config, uint64_t layout, int dcp,
                                             int64_t ws_tokens, int64_t idx_tokens, const dsa_options_t *opts,
                                             dsa_transport_t **out);

#endif
