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
 * opts.inproc_group with opts.dcp_rank, one context per rank, each called from its own thread.
 * dsa_ctx_create refuses a rank the group already has, and a rank whose configuration, attend_tokens
 * or index_tokens differ from the others' (they size the buffers ranks write into each other's).
 * After a collective times out, or a rank's context is destroyed while others remain, the group
 * refuses every collective (DSA_ERROR_INTERNAL) and every new rank until all its contexts are
 * destroyed; then a new set may use it. */
DSA_API dsa_result_t dsa_inproc_group_create(int size, dsa_inproc_group_t *group);
DSA_API void dsa_inproc_group_destroy(dsa_inproc_group_t group); /* after its contexts */

/* The DCP all-gather that the attend step uses: recv holds the group's send buffers of bytes
 * each, in rank order. Enqueued on stream; no synchronisation. */
DSA_API dsa_result_t dsa_dcp_allgather(dsa_ctx_t ctx, const void *send, void *recv, size_t bytes, void *stream);

/* The DCP exchange that the attend step uses before its merge: send holds one block of bytes per
 * rank (block p goes to rank p); recv receives one block from each rank. */
DSA_API dsa_result_t dsa_dcp_alltoall(dsa_ctx_t ctx, const void *send, void *recv, size_t bytes, void *stream);

/* The CTAs dsa_attend splits each row's top-k over in a call of `rows` rows (its chunk of them):
 * 1 when rows alone fill the device. 0 for a NULL ctx or rows <= 0. */
DSA_API int dsa_testing_attend_splits(dsa_ctx_t ctx, int64_t rows);

/* 1 where a dsa_attend call of `rows` rows (its first chunk) merges each split row in the cluster of
 * its split CTAs (dsa_testing_attend_cluster_merge), 0 where the split merge kernel merges them or
 * rows are not split (or ctx is NULL, rows <= 0). */
DSA_API int dsa_testing_attend_merges_in_cluster(dsa_ctx_t ctx, int64_t rows);

/* Every later dsa_attend call of ctx splits each row over `splits` CTAs (0: the automatic choice
 * again), so a test can run both paths on the same rows: a power of two up to the plan's
 * attend_max_splits, with the ctx's chunk of rows times splits within its split workspace. */
DSA_API dsa_result_t dsa_testing_force_attend_splits(dsa_ctx_t ctx, int splits);

/* Whether later dsa_attend calls of ctx merge a split row in the cluster of its split CTAs (1, the
 * default where ctx has it: the 16- and 32-head sparse MLA on sm_90a at DCP = 1, when the device
 * holds the call's clusters at once) or with the split merge kernel after them (0), so a test can
 * compare the two (the same sums in the same order: the same bits) and a benchmark time them.
 * DSA_ERROR_UNSUPPORTED for 1 where ctx has no cluster merge. */
DSA_API dsa_result_t dsa_testing_attend_cluster_merge(dsa_ctx_t ctx, int on);

/* Whether later dsa_index and dsa_attend calls of a DCP context use the fused gathers and exchange
 * (1, the default where the group's buffers are load/store reachable: the index top-k stores its
 * candidates into every rank's gathered lists, pack the query into every rank's gathered queries,
 * attend each partial into its owner's receive buffer, and barriers replace the collectives) or
 * the collectives (0: all-gathers, all-to-all). Every rank of the group must make the same choice.
 * DSA_ERROR_UNSUPPORTED for 1 where the context has no fused path. */
DSA_API dsa_result_t dsa_testing_fused_exchange(dsa_ctx_t ctx, int on);

/* Which barrier replaces each collective of the fused gathers and exchange in later dsa_index and
 * dsa_attend calls of a DCP context over NCCL: 1 (the default where the ranks' flag arrays are load/store reachable)
 * the barrier kernel, one warp signalling and polling flags in NCCL windows (kernels/dsa_barrier.cuh);
 * 0 an NCCL all-gather of one word, so that tests and benchmarks can compare the two (the outputs
 * must be bit-identical). Every rank of the group must make the same choice. DSA_ERROR_UNSUPPORTED
 * for 1 where the context has no barrier kernel (dcp 1, the in-process group, flags not reachable,
 * or the collectives throughout). */
DSA_API dsa_result_t dsa_testing_device_barrier(dsa_ctx_t ctx, int on);

/* The score keys of the last dsa_index chunk of ctx (synchronises the context): for rows 0..rows-1
 * of that chunk, the first keys_per_row of this rank's keys of the row, in local order, as the
 * score kernel wrote them (score_key in kernels/dsa_index_select.cuh: a larger score, a larger key;
 * 1 a NaN score; 0 a key without a page), into out [rows][keys_per_row]. For tests that check
 * every score, not only the top-k sets it leads to. The top-k drops the keys from L2 after reading
 * them unless dsa_testing_index_keep_keys(ctx, 1) came before the call. */
DSA_API dsa_result_t dsa_testing_index_keys(dsa_ctx_t ctx, int64_t rows, int64_t keys_per_row, uint32_t *out);

/* Whether later dsa_index calls of ctx leave the score keys readable after the call (on = 1), for
 * dsa_testing_index_keys; by default (0) the top-k drops each row's keys from L2 after its last read
 * of them, without writing them back (they are dead then), so what dsa_testing_index_keys reads is
 * undefined. */
DSA_API dsa_result_t dsa_testing_index_keep_keys(dsa_ctx_t ctx, int on);

/* Whether later dsa_index calls of ctx have index_score count the split top-k's first radix pass as
 * it writes the scores (mode 1, the default, where index_score runs on warpgroup MMA and the split
 * top-k follows) or leave that count to the top-k (0); 2: counted, and each chunk of the top-k then
 * stores its candidates by reading its keys a second time, the path of a chunk with more candidates
 * than its shared memory holds. So that a test can compare the three: the same rows, bit for bit.
 * DSA_ERROR_UNSUPPORTED for 1 and 2 where the plan has index_score count nothing (index_score_bins 0:
 * its kernels are compiled without the count). */
DSA_API dsa_result_t dsa_testing_index_score_bins(dsa_ctx_t ctx, int mode);

/* Whether later dsa_index calls of ctx fail (on = 1: DSA_ERROR_INTERNAL) in their first chunk after
 * its score kernel, where its top-k would launch: the test that such a call leaves the context as a
 * call that succeeded does (the scores' counts cleared), so that the next call's rows are right. */
DSA_API dsa_result_t dsa_testing_index_fail_topk(dsa_ctx_t ctx, int on);

/* Whether later calls of ctx launch their kernels as programmatic dependent launches (1, the
 * default: each kernel's launch overlaps the end of the one before it) or plainly (0), so a benchmark
 * can measure what the overlap buys on the same context. */
DSA_API dsa_result_t dsa_testing_programmatic_launch(dsa_ctx_t ctx, int on);

/* Every later dsa_index call of ctx scores its keys with one kernel: 1 the plan's index_score_few
 * (mma.sync), 2 index_score (warpgroup MMA on sm_90a), 3 index_score_group (on sm_90a, each CTA of
 * the plan's index_score_group_rows consecutive rows of one request scores all of them, each key
 * tile loaded once; rows that do not group score as index_score's; elsewhere it is index_score), 0
 * the automatic choice again (index_score_few for chunks of fewer rows than the plan's
 * index_score_few_rows; index_score_group for calls of more rows than requests, in chunks of at
 * least index_score_group_rows rows, where it groups; else index_score), so tests and benchmarks
 * can run each on the same rows. index_score and index_score_group give the same scores, bit for
 * bit. */
DSA_API dsa_result_t dsa_testing_force_index_score(dsa_ctx_t ctx, int which);

/* How many CTAs each row's top-k runs on in a dsa_index call of `rows` rows whose block tables have
 * max_blocks entries, in its first chunk (1: one CTA a row, the kernel for many rows; 0: ctx is NULL,
 * rows < 1 or max_blocks < 1). The choice is made per chunk from the CTAs the device holds at once
 * (queried at context creation), the plan's fewest CTAs worth a split and the row's most keys, which
 * max_blocks bounds (rows whose table holds at most the plan's index_topk_split_min_keys keys on this
 * rank take one CTA). dsa_testing_force_index_topk changes the choice. */
DSA_API int64_t dsa_index_topk_splits(dsa_ctx_t ctx, int64_t rows, int64_t max_blocks);

/* Every later dsa_index call of ctx selects its top-k with: 1 one CTA a row, 2 the split kernel from
 * 2 CTAs a row (not the plan's minimum nor its index_topk_split_min_keys, where the device holds
 * them), 0 the automatic choice again; so tests and benchmarks can run both kernels on the same rows
 * in one process. */
DSA_API dsa_result_t dsa_testing_force_index_topk(dsa_ctx_t ctx, int which);

/* Every later dsa_index call of ctx gives each row's split top-k at most `cap` CTAs (0: no cap, the
 * automatic choice again; 1 is refused: dsa_testing_force_index_topk(ctx, 1) is one CTA a row), so a
 * benchmark can time the split at fewer CTAs a row than the plan's keys per CTA give. It caps the
 * automatic choice, so rows that take one CTA (dsa_index_topk_splits) still do. */
DSA_API dsa_result_t dsa_testing_index_topk_cap(dsa_ctx_t ctx, int cap);

/* The whole number that the plan of the linked configuration `config` gives for key (a key of its
 * plan.txt, e.g. "exchange_row", "ws_q_packed"), so that tests and tools take the generator's
 * number instead of deriving it again. DSA_ERROR_INVALID_ARGUMENT naming the argument where there is
 * no such configuration or no such whole-number key. */
DSA_API dsa_result_t dsa_testing_plan_number(const char *config, const char *key, int64_t *value);

/* Every later dsa_index call of ctx has the split top-k's CTAs whose chunk holds at least `keys` keys
 * emit their selected keys from a bit a key (where the row's candidates are finished in shared
 * memory; kernels/dsa_index_select.cuh, select_topk_split); 0: the plan's index_topk_bit_keys again.
 * 1 takes that path at every chunk, so tests reach it at small rows, and a benchmark can time both. */
DSA_API dsa_result_t dsa_testing_index_topk_bit_keys(dsa_ctx_t ctx, int keys);

/* DSA_NCCL_WINDOWS in the environment at dsa_ctx_create (NCCL DCP groups): 0 allocates the
 * collectives' buffers as plain device memory, 1 or unset as NCCL symmetric windows where the
 * library has them (2.27 on; the context's log says which, at DSA_LOG_INFO). A benchmark hook: both
 * paths in one process. */

/* DSA_CUDA_LIBRARY, DSA_NVRTC_LIBRARY and DSA_NCCL_LIBRARY in the environment at the first use of
 * each library: the file libdsa opens instead of the system's CUDA driver, NVRTC or NCCL. Test hooks
 * for the fakes of tests/runtime (a driver whose device memory is host memory, an NVRTC that fails
 * or succeeds without compiling, an NCCL whose ranks are threads of the process), which run context
 * creation and the NCCL transport on a machine without a GPU. */

/* Stage timing for tools (dsa-demo --bench): while set, every kernel launch and collective that
 * ctx's calls enqueue records events[*count] (a CUevent the caller created, on ctx's device) on the
 * call's stream after it, names it names[*count] ("pack", "gather", "attend", "split merge",
 * "exchange", "merge", "index query", ...) and increments *count, up to capacity; the time between
 * consecutive events is a step's. Sets *count to 0. events NULL: off. */
DSA_API dsa_result_t dsa_testing_stage_events(dsa_ctx_t ctx, void *const *events, const char **names, int capacity,
                                              int *count);

#ifdef __cplusplus
}
#endif
#endif
