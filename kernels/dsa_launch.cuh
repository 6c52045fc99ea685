// How every kernel of the library starts: the runtime launches each one as a programmatic
// dependent launch (runtime/calls.c), so it may be resident while the kernel ahead of it in
// the stream is still finishing. after_prior_grid() is therefore the first statement of every
// entry but the one-CTA index top-k's (below): it waits until that kernel has completed and
// its memory is visible (griddepcontrol.wait; it returns at once for a plain launch), then
// lets the next kernel begin its launch. Nothing a kernel reads or writes is touched before
// it, so the overlap is the launch's latency only, never the data. Two kernels of the index
// call read, before their wait, what no kernel launched after the call's first kernel (the
// query kernel) writes: the score kernel starts its first key tiles' copies (score_rows_wgmma
// says why that is safe), and the one-CTA top-k reads its row's length from the
// call's inputs (positions, requests, their lengths; const in every kernel's parameters). The query
// kernel waits before it lets the next kernel launch, and every kernel after it in the call does
// the same, so by the time either starts, everything the host queued before the call has ended.
#pragma once

namespace dsa {

__device__ __forceinline__ void after_prior_grid()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

} // namespace dsa
