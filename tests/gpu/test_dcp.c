/* The DCP transport through libdsa. `test_dcp inproc`: W ranks on one GPU through the in-process
 * group (W = 2, 4, 8) all-gather random data, checked byte for byte. `test_dcp nccl`: two
 * processes, one per GPU, over NCCL (the production path), checked byte for byte, then timed
 * against NCCL's own all-gather of the same bytes on a second communicator. */
#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "dsa.h"
#include "dsa_testing.h"

#define CK(call)                                                                                             \
    do {                                                                                                     \
        CUresult r_ = (call);                                                                                \
        if (r_ != CUDA_SUCCESS) {                                                                            \
            printf("FAIL %s:%d: %s: %d\n", __FILE__, __LINE__, #call, (int)r_);                              \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static unsigned char pattern(int rank, size_t i, unsigned seed)
{
    return (unsigned char)((i * 2654435761u) ^ (unsigned)(rank * 97) ^ seed);
}

static void fill(CUdeviceptr d, int rank, size_t bytes, unsigned seed)
{
    unsigned char *h = malloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        h[i] = pattern(rank, i, seed);
    CK(cuMemcpyHtoD(d, h, bytes));
    free(h);
}

static int check_gathered(CUdeviceptr d, int W, size_t bytes, unsigned seed)
{
    unsigned char *h = malloc(bytes * (size_t)W);
    CK(cuMemcpyDtoH(h, d, bytes * (size_t)W));
    int bad = 0;
    for (int r = 0; r < W; r++)
        for (size_t i = 0; i < bytes; i++)
            bad += h[(size_t)r * bytes + i] != pattern(r, i, seed);
    free(h);
    return bad == 0;
}

typedef struct gather_job {
    dsa_ctx_t ctx;
    CUdeviceptr send, recv;
    size_t bytes;
    CUstream stream;
    dsa_result_t rc;
} gather_job_t;

static void *gather_thread(void *arg)
{
    gather_job_t *j = arg;
    j->rc = dsa_dcp_allgather(j->ctx, (void *)j->send, (void *)j->recv, j->bytes, j->stream);
    return NULL;
}

static void test_inproc(const char *config, int W)
{
    dsa_inproc_group_t g;
    CHECK(dsa_inproc_group_create(W, &g) == DSA_SUCCESS);
    dsa_ctx_t ctx[8];
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t bytes = 3 * 18432 + 17; /* three tokens of GLM-5.2's packed query, and an odd tail */
    CUdeviceptr send[8], recv[8];
    unsigned seed = (unsigned)time(NULL);
    for (int r = 0; r < W; r++) {
        dsa_options_t o = DSA_OPTIONS_INIT;
        o.cache_dir = getenv("DSA_TEST_CACHE");
        o.inproc_group = g;
        o.dcp_rank = r;
        dsa_result_t rc = dsa_ctx_create(config, &o, &ctx[r]);
        CHECK(rc == DSA_SUCCESS);
        if (rc != DSA_SUCCESS) {
            printf("  %s\n", dsa_last_error(NULL));
            return;
        }
        CK(cuMemAlloc(&send[r], bytes));
        CK(cuMemAlloc(&recv[r], bytes * (size_t)W));
        CK(cuMemsetD8(recv[r], 0, bytes * (size_t)W));
        fill(send[r], r, bytes, seed);
    }
    /* one thread per rank, as DCP ranks are separate processes: a collective returns once every
     * rank has arrived */
    pthread_t th[8];
    gather_job_t job[8];
    for (int r = 0; r < W; r++) {
        job[r] = (gather_job_t){ctx[r], send[r], recv[r], bytes, s, DSA_SUCCESS};
        pthread_create(&th[r], NULL, gather_thread, &job[r]);
    }
    for (int r = 0; r < W; r++) {
        pthread_join(th[r], NULL);
        CHECK(job[r].rc == DSA_SUCCESS);
    }
    CK(cuStreamSynchronize(s));
    for (int r = 0; r < W; r++)
        CHECK(check_gathered(recv[r], W, bytes, seed));
    /* a rank that calls with another size is refused at once, with the reason; the group then
     * completes when it calls again with the right one */
    job[0] = (gather_job_t){ctx[0], send[0], recv[0], bytes, s, DSA_SUCCESS};
    pthread_create(&th[0], NULL, gather_thread, &job[0]);
    usleep(100000);
    CHECK(dsa_dcp_allgather(ctx[1], (void *)send[1], (void *)recv[1], bytes - 1, s) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(ctx[1]), "different collective, size or stream") != NULL);
    for (int r = 1; r < W; r++) {
        job[r] = (gather_job_t){ctx[r], send[r], recv[r], bytes, s, DSA_SUCCESS};
        pthread_create(&th[r], NULL, gather_thread, &job[r]);
    }
    for (int r = 0; r < W; r++) {
        pthread_join(th[r], NULL);
        CHECK(job[r].rc == DSA_SUCCESS);
    }
    CK(cuStreamSynchronize(s));
    for (int r = 0; r < W; r++) {
        cuMemFree(send[r]);
        cuMemFree(recv[r]);
        dsa_ctx_destroy(ctx[r]);
    }
    dsa_inproc_group_destroy(g);
    cuStreamDestroy(s);
    printf("%s inproc W=%d %s\n", check_failed ? "FAIL" : "ok  ", W, config);
}

/* One process per GPU. ids[0] for libdsa's communicator, ids[1] for the reference one. */
static int nccl_rank(int rank, int W, const ncclUniqueId *ids)
{
    CUdevice dev;
    CUcontext cu;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, rank));
    CK(cuDevicePrimaryCtxRetain(&cu, dev));
    CK(cuCtxSetCurrent(cu));
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.cache_dir = getenv("DSA_TEST_CACHE");
    o.device = rank;
    o.nccl_id = &ids[0];
    o.dcp_rank = rank;
    dsa_ctx_t ctx;
    dsa_result_t rc = dsa_ctx_create("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", &o, &ctx);
    if (rc != DSA_SUCCESS) {
        printf("FAIL rank %d: dsa_ctx_create: %s\n", rank, dsa_last_error(NULL));
        return 1;
    }
    ncclComm_t ref;
    if (ncclCommInitRank(&ref, W, ids[1], rank) != ncclSuccess) {
        printf("FAIL rank %d: ncclCommInitRank\n", rank);
        return 1;
    }
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const size_t sizes[] = {64 << 10, 1 << 20, 4 << 20, 18432 * 64};
    CUdeviceptr send, recv;
    CK(cuMemAlloc(&send, 4 << 20));
    CK(cuMemAlloc(&recv, (size_t)W * (4 << 20)));
    int failed = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t bytes = sizes[k];
        unsigned seed = 1234u + (unsigned)k;
        fill(send, rank, bytes, seed);
        CK(cuMemsetD8(recv, 0, bytes * (size_t)W));
        if (dsa_dcp_allgather(ctx, (void *)send, (void *)recv, bytes, s) != DSA_SUCCESS) {
            printf("FAIL rank %d: %s\n", rank, dsa_last_error(ctx));
            return 1;
        }
        CK(cuStreamSynchronize(s));
        if (!check_gathered(recv, W, bytes, seed)) {
            printf("FAIL rank %d: all-gather of %zu bytes through libdsa/NCCL differs\n", rank, bytes);
            failed = 1;
        }
        /* timing: median of 50, after 10 warm-ups, each with events on the stream */
        float t_dsa[50], t_ref[50];
        CUevent a, b;
        CK(cuEventCreate(&a, 0));
        CK(cuEventCreate(&b, 0));
        for (int pass = 0; pass < 2; pass++) {
            float *t = pass ? t_ref : t_dsa;
            for (int i = -10; i < 50; i++) {
                CK(cuEventRecord(a, s));
                if (pass)
                    ncclAllGather((void *)send, (void *)recv, bytes, ncclUint8, ref, (cudaStream_t)s);
                else
                    dsa_dcp_allgather(ctx, (void *)send, (void *)recv, bytes, s);
                CK(cuEventRecord(b, s));
                CK(cuEventSynchronize(b));
                if (i >= 0)
                    CK(cuEventElapsedTime(&t[i], a, b));
            }
            for (int i = 0; i < 50; i++) /* insertion sort for the median */
                for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
                    float x = t[j];
                    t[j] = t[j - 1];
                    t[j - 1] = x;
                }
        }
        if (rank == 0)
            printf("| %zu | %.1f | %.1f | %.2f |\n", bytes, t_dsa[25] * 1e3, t_ref[25] * 1e3, t_dsa[25] / t_ref[25]);
    }
    /* The exchange before the merge, per layer at 64 and 128 decode rows of this configuration
     * (32 heads per rank, 512 fp32 latent + 1 LSE per head): (a) what libdsa does, all-to-all of
     * the partial outputs and of the LSEs, merged locally in rank order; (b) the alternative,
     * all-gather of the LSEs then reduce-scatter of partials pre-scaled by exp(L_r - L), where NCCL
     * fixes the order of the fp32 sum; (c) NCCL's all-gather of the same bytes as (a). */
    if (rank == 0)
        printf("\nexchange per layer, 2 GPUs: | rows | libdsa all-to-all us | all-gather LSE + reduce-scatter us | "
               "NCCL all-gather of the same bytes us |\n");
    const size_t HL = 32, HG = HL * (size_t)W;
    for (int rows = 64; rows <= 128; rows *= 2) {
        size_t ob = (size_t)rows * HL * 512 * 4, lb = (size_t)rows * HL * 4;
        CUdeviceptr so, ro, sl, rl;
        CK(cuMemAlloc(&so, ob * (size_t)W));
        CK(cuMemAlloc(&ro, ob * (size_t)W));
        CK(cuMemAlloc(&sl, lb * (size_t)W));
        CK(cuMemAlloc(&rl, lb * (size_t)W * (size_t)W)); /* (b) gathers every rank's LSEs of all heads */
        CK(cuMemsetD8(so, 0x3c, ob * (size_t)W));
        CK(cuMemsetD8(sl, 0x3c, lb * (size_t)W));
        float t[3][50];
        CUevent a, b;
        CK(cuEventCreate(&a, 0));
        CK(cuEventCreate(&b, 0));
        for (int v = 0; v < 3; v++) {
            for (int i = -10; i < 50; i++) {
                CK(cuEventRecord(a, s));
                if (v == 0) {
                    dsa_dcp_alltoall(ctx, (void *)so, (void *)ro, ob, s);
                    dsa_dcp_alltoall(ctx, (void *)sl, (void *)rl, lb, s);
                } else if (v == 1) {
                    ncclAllGather((void *)sl, (void *)rl, (size_t)rows * (size_t)HG, ncclFloat32, ref, (cudaStream_t)s);
                    ncclReduceScatter((void *)so, (void *)ro, (size_t)rows * HL * 512, ncclFloat32, ncclSum, ref,
                                      (cudaStream_t)s);
                } else {
                    ncclAllGather((void *)so, (void *)ro, ob, ncclUint8, ref, (cudaStream_t)s); /* ob per rank: recv is W ob */
                }
                CK(cuEventRecord(b, s));
                CK(cuEventSynchronize(b));
                if (i >= 0)
                    CK(cuEventElapsedTime(&t[v][i], a, b));
            }
            for (int i = 0; i < 50; i++)
                for (int j = i; j > 0 && t[v][j] < t[v][j - 1]; j--) {
                    float x = t[v][j];
                    t[v][j] = t[v][j - 1];
                    t[v][j - 1] = x;
                }
        }
        if (rank == 0)
            printf("| %d | %.1f | %.1f | %.1f |\n", rows, t[0][25] * 1e3, t[1][25] * 1e3, t[2][25] * 1e3);
        cuMemFree(so), cuMemFree(ro), cuMemFree(sl), cuMemFree(rl);
    }
    ncclCommDestroy(ref);
    dsa_ctx_destroy(ctx);
    return failed;
}

static int test_nccl(void)
{
    int W = 2, n = 0;
    /* CUDA does not survive fork: count the GPUs in a child, so this process never initialises it */
    pid_t counter = fork();
    if (counter == 0) {
        int c = 0;
        if (cuInit(0) == CUDA_SUCCESS)
            cuDeviceGetCount(&c);
        _exit(c);
    }
    int cst;
    waitpid(counter, &cst, 0);
    n = WIFEXITED(cst) ? WEXITSTATUS(cst) : 0;
    if (n < W) {
        printf("SKIPPED: test_dcp nccl: needs %d GPUs, this machine has %d\n", W, n);
        return 0;
    }
    ncclUniqueId ids[2];
    if (ncclGetUniqueId(&ids[0]) != ncclSuccess || ncclGetUniqueId(&ids[1]) != ncclSuccess) {
        printf("FAIL: ncclGetUniqueId\n");
        return 1;
    }
    printf("DCP all-gather over NCCL, 2 GPUs, bytes per rank; median us of 50\n");
    printf("| bytes per rank | libdsa us | NCCL us | ratio |\n| --- | --- | --- | --- |\n");
    fflush(stdout);
    pid_t pid[2];
    for (int r = 0; r < W; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm(120); /* a rank that fails leaves its peer waiting in NCCL: end both, not hang */
            int rc = nccl_rank(r, W, ids);
            fflush(stdout); /* _exit does not flush, and stdout is a pipe here */
            _exit(rc);
        }
    }
    int failed = 0;
    for (int r = 0; r < W; r++) {
        int st;
        waitpid(pid[r], &st, 0);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    printf("%s nccl W=2 glm5.2_tp2_dcp2_i1_nvfp4_ds_mla\n", failed ? "FAIL" : "ok  ");
    return failed;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "nccl")) {
        int f = test_nccl();
        printf("%d passed, %d failed\n", !f, f);
        return f;
    }
    if (cuInit(0) != CUDA_SUCCESS) {
        printf("SKIPPED: test_dcp: no CUDA device\n");
        return 0;
    }
    CUdevice dev;
    CUcontext cu;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&cu, dev));
    CK(cuCtxSetCurrent(cu));
    test_inproc("tiny_tp4_dcp2_i1_bf16", 2);
    test_inproc("tiny_tp4_dcp4_i1_fp8_ds_mla", 4);
    test_inproc("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", 8);
    /* dcp 1 takes no group; dcp > 1 needs exactly one */
    dsa_ctx_t ctx;
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.cache_dir = getenv("DSA_TEST_CACHE");
    CHECK(dsa_ctx_create("glm5.2_tp4_dcp4_i1_fp8_ds_mla", &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "has dcp 4: set exactly one of opts->nccl_comm") != NULL);
    CHECK_DONE();
}
