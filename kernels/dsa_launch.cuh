// How every kernel of the library starts: the runtime launches each one as a programmatic dependent
// launch (runtime/calls.c), so it may be resident while the kernel ahead of it in the stream is
// still finishing. after_prior_grid() is therefore the first statement of every entry: it waits
// until that kernel has completed and its memory is visible (griddepcontrol.wait; it returns at
// once for a plain launch), then lets the next kernel begin its launch. Nothing a kernel reads or
// writes is touched before it, so the overlap is the launch's latency only, never the data; the
// exceptions read, before their wait, only what the kernel ahead of them does not write: the index
// score kernel starts its first key tiles' copies (score_rows_wgmma says why that is safe), and the
// one-CTA index top-k reads its row's length, from the call's inputs (positions, requests, their
// lengths), which no kernel of the library writes. Either way everything before the kernel ahead
// has completed: each kernel lets the next one launch only once its own wait has returned, and a
// kernel not of this library lets it launch only when it ends.
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
