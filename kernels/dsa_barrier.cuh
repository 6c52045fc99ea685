// The DCP group's barrier as a kernel, for the fused gather and exchange over NCCL symmetric windows
// (runtime/calls.c, dcp_barrier; docs/design.md, "Fused gather and exchange"): about a microsecond
// of NVLink round trip where an NCCL all-gather of one word costs about 9.
//
// Every rank holds a flag array of W 64-bit words in a window; word s of rank p's array is written
// only by rank s, and only with increasing epochs. A barrier's epoch is one more than the last
// barrier's on this rank (kept in this rank's device memory, not passed as an argument, so that a
// CUDA graph replays it correctly); every rank runs the same sequence of barriers, so the epochs of
// the ranks agree barrier by barrier. A rank stores its epoch into its word of every rank's array,
// then waits until every word of its own array has reached the epoch. Waiting for >= rather than ==
// lets a rank find a peer one barrier ahead (it cannot be further: that peer waits for this rank).
//
// Ordering: the stores this rank made before the barrier (the index top-k's candidates, pack's query
// or attend's partials, into peers' buffers over NVLink) come from earlier kernels of the stream, which completed before this
// one passed after_prior_grid. The fence at system scope, then the release store of the epoch, order
// them before the signal; a peer's acquire load that sees the epoch orders them before everything the
// peer does after (its next kernels start after this one completes). The same argument runs the
// other way for the peers' stores into this rank's buffers.
#pragma once
#include "dsa_abi.h"

namespace dsa {

static_assert(DSA_MAX_PEERS <= DSA_BARRIER_THREADS, "a lane for each rank");

__device__ __forceinline__ void store_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t load_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// One warp (DSA_BARRIER_THREADS), one CTA: lane p < W signals rank p and waits for rank p. A lane
// that waits more than DSA_BARRIER_TIMEOUT_S seconds gives up and records 1 + p in *p.error (the
// first such peer; the runtime reports it, dsa_take_rejected) rather than hang the stream: the
// step's outputs are then wrong, but the host hears of it. The epoch still advances, so a peer that
// was only slow finds this rank's later epoch and the ranks stay in step.
__device__ __forceinline__ void dcp_barrier(const dsa_barrier_params &p)
{
    const int lane = threadIdx.x;
    uint64_t epoch = 0;
    if (lane == 0)
        epoch = *p.epoch + 1;
    epoch = __shfl_sync(0xffffffffu, epoch, 0);
    // every earlier store of this rank (earlier kernels, through the kernel boundary) before the
    // signal; one warp-wide instruction, so each signalling lane has it in its own program order
    asm volatile("fence.acq_rel.sys;" ::: "memory");
    uint64_t *peer = nullptr;
#pragma unroll
    for (int r = 0; r < DSA_MAX_PEERS; r++) // a constant index: no local copy of the array
        if (r == lane)
            peer = p.flags_peer[r];
    if (lane < p.size) {
        store_release_sys(peer + p.rank, epoch);
        const uint64_t start = global_ns();
        unsigned sleep = 32;
        while (load_acquire_sys(p.flags_own + lane) < epoch) {
            if (global_ns() - start > DSA_BARRIER_TIMEOUT_S * 1000000000ull) {
                atomicCAS(p.error, 0u, 1u + (unsigned)lane);
                break;
            }
            __nanosleep(sleep);
            sleep = sleep < 256 ? 2 * sleep : 256;
        }
    }
    __syncwarp();
    if (lane == 0)
        *p.epoch = epoch;
}

} // namespace dsa
