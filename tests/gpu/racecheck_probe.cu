// A probe of compute-sanitizer's racecheck, run by `tests/gpu/run.sh sanitize` before it
// racechecks the attend kernels of a top-k of several segments. Their producers compact each
// segment among themselves, meeting on a partial named barrier (kernels/dsa_attend_tiles.cuh,
// compact_by_producers), then producer thread 0 stores the segment's count into a slot and every
// thread meets on a full barrier before the consumers read it (count_from_producers). This kernel
// is that hand-over alone, the same shape: 512 threads, warps 0-7 the consumers and 8-15 the
// producers; per segment the producers meet five times on named barrier 7 (256 threads), writing
// and reading their own scan[0, 8) between, then producer thread 0 writes the count into slot
// 14 + s % 2 and every thread meets on named barrier 3 (512); the consumers then read it.
// Modes: 0 as the kernel does it; 1 without barrier 7; 2 one slot a segment (no slot reused);
// 3 neither. Mode 2 has no race: each slot is written once, before a barrier.sync of all 512
// threads, and read only after it. compute-sanitizer 2025.3.1's racecheck reports one there (the
// store of scan[16] against the consumers' reads, tests/bench/logs/racecheck_mb_modes_b72f585.log,
// where this file was tests/bench/logs/racecheck_count_slot_mb.cu) and in mode 0, and none in modes 1
// and 3: after a partial barrier it loses the full barrier's order. run.sh racechecks the
// several-segment kernels only where the installed racecheck passes mode 2; mode 3 must pass
// always. The kernel's results are checked in every mode (exit 1 on a wrong count).
// Build and run: nvcc -O3 -arch=sm_90a -o /tmp/rcp tests/gpu/racecheck_probe.cu &&
// for m in 0 1 2 3; do compute-sanitizer --tool racecheck /tmp/rcp $m; done
#include <cstdio>
#include <cstdlib>

template <int Id, int Count> __device__ __forceinline__ void bar_sync()
{
    asm volatile("barrier.sync %0, %1;" ::"n"(Id), "n"(Count) : "memory");
}

__global__ void __launch_bounds__(512) hand_over(int mode, int segments, int *out)
{
    __shared__ int scan[48];
    const int tid = threadIdx.x;
    const bool partial = mode == 0 || mode == 2, reuse = mode == 0 || mode == 1;
    int sum = 0;
    if (tid >= 256) { // the producers
        const int pt = tid - 256, warp = pt / 32, lane = pt % 32;
        for (int s = 0; s < segments; s++) {
            int n = 0;
            if (partial) {
                bar_sync<7, 256>(); // the previous segment's scan[] is no longer read
                bar_sync<7, 256>();
                if (lane == 31)
                    scan[warp] = warp + s;
                bar_sync<7, 256>();
                for (int w = 0; w < 8; w++)
                    n += scan[w];
                bar_sync<7, 256>();
                bar_sync<7, 256>();
            } else {
                n = 28 + 8 * s;
            }
            if (pt == 0)
                scan[(reuse ? 14 + s % 2 : 16 + s)] = n;
            bar_sync<3, 512>();
            sum += n;
        }
    } else { // the consumers
        for (int s = 0; s < segments; s++) {
            bar_sync<3, 512>();
            sum += scan[(reuse ? 14 + s % 2 : 16 + s)];
        }
    }
    out[blockIdx.x * 512 + tid] = sum;
}

int main(int argc, char **argv)
{
    const int mode = argc > 1 ? atoi(argv[1]) : 0, segments = 3, blocks = 8;
    if (argc != 2 || mode < 0 || mode > 3 || argv[1][1]) {
        fprintf(stderr, "usage: %s MODE (0-3: the hand-over as the kernel does it, without the partial "
                        "barrier, without the slot's reuse, without either)\n", argv[0]);
        return 2;
    }
    int *out = nullptr;
    if (cudaMalloc(&out, blocks * 512 * sizeof(int)) != cudaSuccess)
        return 1;
    hand_over<<<blocks, 512>>>(mode, segments, out);
    int host[blocks * 512];
    if (cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost) != cudaSuccess)
        return 1;
    const int want = 3 * 28 + 8 * (0 + 1 + 2); // sum over s of sum_w (w + s)
    int bad = 0;
    for (int i = 0; i < blocks * 512; i++)
        bad += host[i] != want;
    printf("mode %d: %d of %d threads summed the wrong counts\n", mode, bad, blocks * 512);
    cudaFree(out);
    return bad != 0;
}
