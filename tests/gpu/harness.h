/* What the GPU tests share (built once as build/tests/gpu/harness.o, linked into each): the CUDA
 * check, random data, CUDA start-up with the loud skip where there is no GPU, device buffers, a
 * configuration's geometry from libdsa, and one process per rank over NCCL. The tests' own CHECK
 * counters stay in ../check.h: nothing here counts a check. */
#ifndef DSA_TEST_HARNESS_H
#define DSA_TEST_HARNESS_H

#include <cuda.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../ref/geo.h"
#include "dsa.h"
#include "ranks.h"

/* CK(call): a CUDA driver call that must succeed; otherwise prints
 * "FAIL file:line: call: NAME (text)" and exits with status 1. */
#define CK(call) harness_ck((call), #call, __FILE__, __LINE__)
void harness_ck(CUresult r, const char *call, const char *file, int line);

/* ---- random data: one generator per test program (a 32-bit LCG), seeded by the test ---- */
extern unsigned harness_rng;
float frand(void);          /* uniform in [-1, 1), 2^-23 steps */
uint32_t irand(uint32_t n); /* in [0, n) */
void fill_bf16(uint16_t *x, size_t n, float scale, float offset); /* bf16 of offset + frand() * scale */

/* ---- CUDA start-up and device buffers ---- */
/* cuInit, then device 0's primary context made current; without a CUDA device prints
 * "SKIPPED: <what>: no CUDA device" and exits with status 0. */
void harness_start(const char *what);
/* In a rank process: cuInit, then device `ordinal`'s primary context made current (CK). */
void harness_use_device(int ordinal);
/* Device buffers, every call checked like CK (the message names the caller's line). */
#define dev_alloc(n) harness_alloc((n), __FILE__, __LINE__)     /* n bytes (1 when n is 0), uninitialised */
#define dev_up(h, n) harness_up((h), (n), __FILE__, __LINE__)   /* a new buffer holding h[0..n) */
#define dev_put(d, h, n) CK(cuMemcpyHtoD((d), (h), (n)))         /* host to an existing buffer */
#define dev_get(h, d, n) CK(cuMemcpyDtoH((h), (d), (n)))         /* device to host */
CUdeviceptr harness_alloc(size_t n, const char *file, int line);
CUdeviceptr harness_up(const void *h, size_t n, const char *file, int line);

/* ---- configurations: everything the tests know about one comes from libdsa ---- */
/* DSA_OPTIONS_INIT with the test JIT cache: cache_dir $DSA_TEST_CACHE (NULL: libdsa's default). */
dsa_options_t harness_options(void);
/* dsa_config_info of name; 0, or prints "FAIL name: ..." and returns -1. */
int harness_config(const char *name, dsa_config_info_t *info);
/* The geometry and numerics of name for the CPU reference (geo.h), from dsa_config_info and the
 * plan libdsa exports for name; 0, or prints "FAIL name: ..." and returns -1. */
int harness_geo(const char *name, geo_t *g);

/* ---- one process per rank over NCCL, one GPU each ---- */
/* 1 when this machine has at least W GPUs (counted in a child process: CUDA does not survive fork,
 * so the caller must not have initialised it); else prints
 * "SKIPPED: <what>: needs W GPUs, this machine has N" and returns 0. */
int harness_have_gpus(const char *what, int W);
/* n ncclUniqueIds; 0, or prints "FAIL: ncclGetUniqueId" and returns 1. Inline, so that only the
 * tests that use NCCL link it. */
static inline int harness_nccl_ids(ncclUniqueId *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (ncclGetUniqueId(&ids[i]) != ncclSuccess) {
            printf("FAIL: ncclGetUniqueId\n");
            return 1;
        }
    return 0;
}
/* Runs fn(rank, W, arg) in W processes (W <= RANKS_MAX), each ended after 120 s (a failed rank
 * leaves its peers waiting in NCCL) and with GPU `rank`'s primary context current before fn;
 * a rank's exit status is fn's return value. Returns 1 when any rank failed, else 0. */
int harness_run_ranks(int W, int (*fn)(int rank, int W, void *arg), void *arg);

#endif
