// The timing of the microbenchmarks in this folder (throwaway instruments, not part of the product):
// an L2 flush (a 256 MiB write) before each call, events around it, the median of 20 after 3 warm-ups.
// And the gathers' access pattern: bench_slots.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
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

// The cache slots bench_attend.py's rows read: each of `rows` rows its own K distinct tokens of its
// own 16384-token request, in 64-token blocks of a random block table, row after row. sorted 1:
// each row's slots ascending (a block's entries fetched together); 2: each row's tokens in position
// order (what a top-k emitted in position order gives), the blocks in the table's random order.
inline std::vector<int64_t> bench_slots(int rows, int K, int sorted = 0)
{
    const int SEQ = 16384, BS = 64, blocks = SEQ / BS;
    std::mt19937 rng(1);
    std::vector<int> table(rows * blocks), tok(SEQ);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<int64_t> slots;
    for (int r = 0; r < rows; r++) {
        std::iota(tok.begin(), tok.end(), 0);
        std::shuffle(tok.begin(), tok.end(), rng);
        const size_t at = slots.size();
        if (sorted == 2)
            std::sort(tok.begin(), tok.begin() + K);
        for (int k = 0; k < K; k++)
            slots.push_back((int64_t)table[r * blocks + tok[k] / BS] * BS + tok[k] % BS);
        if (sorted == 1)
            std::sort(slots.begin() + at, slots.end());
    }
    return slots;
}
