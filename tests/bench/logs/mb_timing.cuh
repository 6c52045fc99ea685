// The timing of the microbenchmarks in this folder (throwaway instruments, not part of the product):
// an L2 flush (a 256 MiB write) before each call, events around it, the median of 20 after 3 warm-ups.
#pragma once
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>

__global__ void flush(uint4 *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_uint4((uint32_t)i, 0, 0, 0);
}

template <class F> float timed(F f, uint4 *fl, size_t fln)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    std::vector<float> t;
    for (int r = 0; r < 23; r++) {
        flush<<<1024, 256>>>(fl, fln);
        cudaEventRecord(a);
        f();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 3)
            t.push_back(ms * 1e3f);
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
