/* The in-process transport: W ranks of a DCP group on one GPU, one thread each, so tests run
 * DCP = W without W GPUs. Never a production path (dsa_testing.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsa_testing.h"
#include "transport.h"

/* A barrier per collective; the last rank to arrive performs it for all ----
 * Each rank calls from its own thread, and every rank of the group enqueues on the same stream
 * (one GPU, one stream): the copies are enqueued after every rank's preceding work, and no rank
 * returns (and enqueues more) before they are. */

#define INPROC_MAX 64
#define INPROC_TIMEOUT_S 30

struct dsa_inproc_group {
    int size;
    pthread_mutex_t lock;
    pthread_cond_t done;
    int arrived, op;
    unsigned long generation;
    /* membership: the ranks whose contexts hold the group, and what they agreed on (the first to
     * attach sets it). broken: a rank timed out in a collective or left while others remain, so the
     * ranks' collectives no longer pair up (or a peer's buffers are freed): every collective fails
     * until all have left. */
    uint64_t attached;
    int broken;
    char config[128];
    uint64_t layout;
    int64_t ws_tokens, idx_tokens;
    dsa_result_t result;
    size_t bytes;
    CUstream stream;
    CUdeviceptr send[INPROC_MAX], recv[INPROC_MAX];
    CUdeviceptr peer[INPROC_MAX]; /* the last peers() call's buffers, by rank */
};

typedef struct inproc_transport {
    dsa_transport_t base;
    dsa_inproc_group_t g;
} inproc_transport_t;

dsa_result_t dsa_inproc_group_create(int size, dsa_inproc_group_t *group)
{
    if (!group)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_inproc_group_create: group is NULL");
    *group = NULL;
    if (size < 1 || size > INPROC_MAX)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "dsa_inproc_group_create: size is %d, must be 1..%d",
                        size, INPROC_MAX);
    dsa_inproc_group_t g = dsa_calloc(1, sizeof *g);
    if (!g)
        return dsa_fail(NULL, DSA_ERROR_OUT_OF_MEMORY, "dsa_inproc_group_create: out of host memory");
    g->size = size;
    /* its waits time out by the monotonic clock: a wall-clock step moves no deadline (and a
     * condition on another clock would take the monotonic deadlines as long past: refused) */
    pthread_condattr_t ca;
    int e = pthread_condattr_init(&ca);
    if (e == 0) {
        if ((e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) == 0)
            e = pthread_cond_init(&g->done, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (e == 0 && (e = pthread_mutex_init(&g->lock, NULL)) != 0)
        pthread_cond_destroy(&g->done);
    if (e != 0) {
        free(g);
        return dsa_fail(NULL, e == ENOMEM ? DSA_ERROR_OUT_OF_MEMORY : DSA_ERROR_INTERNAL,
                        "dsa_inproc_group_create: cannot set up its lock and its condition on the monotonic clock: %s", strerror(e));
    }
    *group = g;
    return DSA_SUCCESS;
}

void dsa_inproc_group_destroy(dsa_inproc_group_t g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    const uint64_t attached = g->attached;
    pthread_mutex_unlock(&g->lock);
    if (attached) { /* its contexts would touch it when destroyed: kept, and said so */
        dsa_log(DSA_LOG_WARN, DSA_LOG_WARN,
                "dsa_inproc_group_destroy: the group still has contexts (ranks mask 0x%llx): destroy them first; "
                "the group is not freed",
                (unsigned long long)attached);
        return;
    }
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->done);
    free(g);
}

/* peers: every rank's buffer, as the ranks give them (one GPU: all reachable); barrier: the
 * rendezvous alone (one stream: every rank's earlier work is enqueued before anyone's later work) */
enum { OP_ALLGATHER = 1, OP_ALLTOALL = 2, OP_PEERS = 3, OP_BARRIER = 4 };

static dsa_result_t broken_error(dsa_transport_t *t, dsa_ctx_t ctx)
{
    return dsa_fail(ctx, DSA_ERROR_INTERNAL,
                    "in-process DCP group: rank %d's call refused: a collective timed out, or a rank's context was "
                    "destroyed while others remain (destroy the group's contexts together)",
                    t->rank);
}

static dsa_result_t inproc_collective(dsa_transport_t *t, dsa_ctx_t ctx, int op, CUdeviceptr send,
                                      CUdeviceptr recv, size_t bytes, CUstream stream, CUdeviceptr *peers)
{
    dsa_inproc_group_t g = ((inproc_transport_t *)t)->g;
    dsa_result_t rc = DSA_SUCCESS;
    pthread_mutex_lock(&g->lock);
    if (g->broken) {
        pthread_mutex_unlock(&g->lock);
        return broken_error(t, ctx);
    }
    if (g->arrived == 0) {
        g->op = op;
        g->bytes = bytes;
        g->stream = stream;
    } else if (g->op != op || g->bytes != bytes || g->stream != stream) {
        rc = dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                      "in-process DCP group: rank %d called a different collective, size or stream than the "
                      "ranks before it (all ranks must issue the same collectives on one stream)",
                      t->rank);
        pthread_mutex_unlock(&g->lock);
        return rc;
    }
    g->send[t->rank] = send;
    g->recv[t->rank] = recv;
    unsigned long gen = g->generation;
    if (++g->arrived == g->size) {
        g->result = DSA_SUCCESS;
        if (op == OP_PEERS)
            memcpy(g->peer, g->send, sizeof g->peer);
        for (int d = 0; op <= OP_ALLTOALL && d < g->size && g->result == DSA_SUCCESS; d++) {
            for (int s = 0; s < g->size; s++) {
                /* allgather: block s of recv[d] is send[s]; alltoall: block s of recv[d] is block d of send[s] */
                CUdeviceptr from = op == OP_ALLGATHER ? g->send[s] : g->send[s] + (size_t)d * bytes;
                CUresult r = dsa_cu.cuMemcpyDtoDAsync(g->recv[d] + (size_t)s * bytes, from, bytes, stream);
                if (r != CUDA_SUCCESS) {
                    g->result = DSA_ERROR_CUDA;
                    break;
                }
            }
        }
        g->arrived = 0;
        g->generation++;
        pthread_cond_broadcast(&g->done);
    } else {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until); /* the condition's clock (dsa_inproc_group_create) */
        until.tv_sec += INPROC_TIMEOUT_S;
        while (g->generation == gen) {
            if (g->broken) { /* a rank left, or another waiter timed out: this collective never completes */
                g->arrived--;
                pthread_mutex_unlock(&g->lock);
                return broken_error(t, ctx);
            }
            /* timed out: unless the last rank completed the collective meanwhile (it holds the lock
             * for the copies, and the wait's return takes the lock after it), this rank's arrival is
             * taken back, so that the group's count stays right for the next collective */
            if (pthread_cond_timedwait(&g->done, &g->lock, &until) != 0 && g->generation == gen) {
                /* the late ranks would pair this collective with this rank's next one: no more
                 * pairing, and the ranks waiting now are woken to fail too */
                g->arrived--;
                g->broken = 1;
                pthread_cond_broadcast(&g->done);
                pthread_mutex_unlock(&g->lock);
                return dsa_fail(ctx, DSA_ERROR_INTERNAL,
                                "in-process DCP group: rank %d waited %d s for the other ranks' collective "
                                "(each rank must call from its own thread)",
                                t->rank, INPROC_TIMEOUT_S);
            }
        }
    }
    if (g->result != DSA_SUCCESS)
        rc = dsa_fail(ctx, g->result, "in-process DCP group: a copy of the collective failed");
    else if (op == OP_PEERS) /* before the next peers() call can change them: it needs this rank too */
        memcpy(peers, g->peer, (size_t)g->size * sizeof *peers);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

static dsa_result_t inproc_allgather(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr send, CUdeviceptr recv,
                                     size_t bytes, CUstream stream)
{
    return inproc_collective(t, ctx, OP_ALLGATHER, send, recv, bytes, stream, NULL);
}

static dsa_result_t inproc_alltoall(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr send, CUdeviceptr recv,
                                    size_t bytes, CUstream stream)
{
    return inproc_collective(t, ctx, OP_ALLTOALL, send, recv, bytes, stream, NULL);
}

static dsa_result_t inproc_peers(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr buf, CUdeviceptr *out)
{
    return inproc_collective(t, ctx, OP_PEERS, buf, 0, 0, NULL, out);
}

static dsa_result_t inproc_barrier(dsa_transport_t *t, dsa_ctx_t ctx, CUstream stream)
{
    return inproc_collective(t, ctx, OP_BARRIER, 0, 0, 0, stream, NULL);
}

static dsa_result_t inproc_check(dsa_transport_t *t, dsa_ctx_t ctx)
{
    dsa_inproc_group_t g = ((inproc_transport_t *)t)->g;
    pthread_mutex_lock(&g->lock);
    const int broken = g->broken;
    pthread_mutex_unlock(&g->lock);
    return broken ? broken_error(t, ctx) : DSA_SUCCESS;
}

static void inproc_destroy(dsa_transport_t *t)
{
    dsa_inproc_group_t g = ((inproc_transport_t *)t)->g;
    pthread_mutex_lock(&g->lock);
    g->attached &= ~(1ull << t->rank);
    if (g->attached) { /* the others keep this rank's buffers as peers; those waiting fail now */
        g->broken = 1;
        pthread_cond_broadcast(&g->done);
    }
    else { /* all have left: a new set of contexts may use the group */
        g->broken = 0;
        g->arrived = 0;
    }
    pthread_mutex_unlock(&g->lock);
    free(t);
}

dsa_result_t dsa_transport_inproc(dsa_ctx_t ctx, const char *config, uint64_t layout, int W, int64_t ws_tokens,
                                  int64_t idx_tokens, const dsa_options_t *o, dsa_transport_t **out)
{
    dsa_inproc_group_t g = o->inproc_group;
    if (g->size != W || o->dcp_rank < 0 || o->dcp_rank >= W)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "dsa_ctx_create: in-process group of size %d, dcp_rank %d, for dcp %d", g->size, o->dcp_rank, W);
    inproc_transport_t *t = dsa_calloc(1, sizeof *t);
    if (!t)
        return dsa_fail(ctx, DSA_ERROR_OUT_OF_MEMORY, "dsa_ctx_create: out of host memory");
    pthread_mutex_lock(&g->lock);
    const char *why = NULL;
    if (g->attached & (1ull << o->dcp_rank))
        why = "opts->dcp_rank is already a context of the group";
    else if (g->broken)
        why = "the group is broken (a collective timed out, or a rank left while others remain): destroy its "
              "contexts, or make a new group";
    else if (g->attached && (strcmp(g->config, config) != 0 || g->layout != layout || g->ws_tokens != ws_tokens ||
                             g->idx_tokens != idx_tokens))
        why = "the group's other ranks have another configuration (by name or by its plan's buffer sizes) or "
              "another opts->attend_tokens or opts->index_tokens (their buffers would be overrun)";
    if (why) {
        const dsa_result_t rc = dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                                         "dsa_ctx_create: in-process group: rank %d (%s, attend_tokens %lld, "
                                         "index_tokens %lld): %s",
                                         o->dcp_rank, config, (long long)ws_tokens, (long long)idx_tokens, why);
        pthread_mutex_unlock(&g->lock);
        free(t);
        return rc;
    }
    if (!g->attached) {
        snprintf(g->config, sizeof g->config, "%s", config);
        g->layout = layout;
        g->ws_tokens = ws_tokens;
        g->idx_tokens = idx_tokens;
    }
    g->attached |= 1ull << o->dcp_rank;
    pthread_mutex_unlock(&g->lock);
    *t = (inproc_transport_t){{o->dcp_rank, W, inproc_allgather, inproc_alltoall, inproc_destroy, NULL, inproc_peers,
                                 inproc_barrier, 0, 1, "in-process group", "the in-process group's rendezvous", inproc_check},
                                o->inproc_group};
    *out = &t->base;
    return DSA_SUCCESS;
}
