/* What the fake CUDA driver (fake_cuda.c) and the fake NCCL (fake_nccl.c) export beyond the APIs
 * they fake: how the fake NCCL leaves stream work pending in the fake driver, and what the tests
 * read back (looked up with dlsym in the library libdsa opened). */
#ifndef DSA_TESTS_FAKES_H
#define DSA_TESTS_FAKES_H

#include <cuda.h>
#include <pthread.h>

/* fake_cuda.c */
/* The calling thread's current context and its device ordinal (-1 without one). */
CUcontext fake_cuda_current(void);
int fake_cuda_device_of(CUcontext ctx);
/* Stream work of ctx that is not complete: delta parts more (an NCCL collective enqueued that
 * waits for its peers) or fewer (one completed, or its communicator aborted). While ctx has any,
 * its synchronous calls wait (cuCtxSynchronize, the synchronous copies and sets) and cuStreamQuery
 * answers CUDA_ERROR_NOT_READY, as the device would behind an NCCL kernel waiting for a peer. */
void fake_cuda_pend(CUcontext ctx, int delta);
/* Device allocations not freed; frees of an address the driver did not allocate. */
long fake_cuda_live_allocs(void);
long fake_cuda_bad_frees(void);
/* cv made to time out by the monotonic clock, so a wall-clock step moves no deadline of the fakes'
 * hang guards (fake_cuda.c's idle, fake_nccl.c's changed) */
void fake_cond_init_monotonic(pthread_cond_t *cv);

/* fake_nccl.c */
/* The calling thread's NCCL group depth (0: no group open) and the ncclGroupEnd calls it made. */
int fake_nccl_group_depth(void);
long fake_nccl_group_ends(void);
/* Communicators, windows and ncclMemAlloc allocations not yet destroyed, deregistered or freed;
 * ncclMemFree calls of an address ncclMemAlloc did not give. */
int fake_nccl_live_comms(void);
int fake_nccl_live_windows(void);
long fake_nccl_live_mem(void);
long fake_nccl_bad_frees(void);

#endif
