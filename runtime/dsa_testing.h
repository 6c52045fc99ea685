/* libdsa's test and benchmark hooks: not part of the stable API in dsa.h, and never a production
 * path. An in-process DCP group runs W ranks on one GPU, one thread each; the DCP collectives of
 * the attend step can be called alone to time them. */
#ifndef DSA_TESTING_H
#define DSA_TESTING_H

#include "dsa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* W ranks of a DCP group inside one process, on one GPU and one stream: pass the group as
 * opts.inproc_group with opts.dcp_rank, one context per rank, each called from its own thread. */
DSA_API dsa_result_t dsa_inproc_group_create(int size, dsa_inproc_group_t *group);
DSA_API void dsa_inproc_group_destroy(dsa_inproc_group_t group); /* after its contexts */

/* The DCP all-gather that the attend step uses: recv holds the group's send buffers of bytes
 * each, in rank order. Enqueued on stream; no synchronisation. */
DSA_API dsa_result_t dsa_dcp_allgather(dsa_ctx_t ctx, const void *send, void *recv, size_t bytes, void *stream);

/* The DCP exchange that the attend step uses before its merge: send holds one block of bytes per
 * rank (block p goes to rank p); recv receives one block from each rank. */
DSA_API dsa_result_t dsa_dcp_alltoall(dsa_ctx_t ctx, const void *send, void *recv, size_t bytes, void *stream);

#ifdef __cplusplus
}
#endif
#endif
