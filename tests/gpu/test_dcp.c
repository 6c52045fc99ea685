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
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "dsa.h"
#include "dsa_testing.h"
#include "harness.h"

/* The configuration of the NCCL test, and the one whose packed query sizes the messages. */
static const char *const nccl_config = "glm5.2_tp2_dcp2_i1_nvfp4_ds_mla";
static const char *const sized_like = "glm5.2_tp4_dcp4_i1_fp8_ds_mla";

/* Bytes of one token's packed query ([heads_local, kv_dim] bf16) of sized_like: the plan's
 * ws_q_packed; 0 when libdsa lacks it (then this says so). */
static size_t query_bytes(void)
{
    int64_t v = 0;
    if (dsa_testing_plan_number(sized_like, "ws_q_packed", &v) != DSA_SUCCESS) {
        printf("FAIL: %s\n", dsa_last_error(NULL));
        return 0;
    }
    return (size_t)v;
}

static unsigned char pattern(int rank, size_t i, unsigned seed)
{
    return (unsigned char)((i * 2654435761u) ^ (unsigned)(rank * 97) ^ seed);
}

static void fill(CUdeviceptr d, int rank, size_t bytes, unsigned seed)
{
    unsigned char *h = malloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        h[i] = pattern(rank, i, seed);
    dev_put(d, h, bytes);
    free(h);
}

static int check_gathered(CUdeviceptr d, int W, size_t bytes, unsigned seed)
{
    unsigned char *h = malloc(bytes * (size_t)W);
    dev_get(h, d, bytes * (size_t)W);
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

static void test_inproc(const char *config, size_t q_bytes)
{
    dsa_config_info_t info;
    if (harness_config(config, &info) != 0) { /* it says why */
        check_failed++;
        return;
    }
    const int W = info.dcp;
    dsa_inproc_group_t g;
    CHECK(dsa_inproc_group_create(W, &g) == DSA_SUCCESS);
    dsa_ctx_t ctx[8];
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t bytes = 3 * q_bytes + 17; /* three tokens of GLM-5.2's packed query, and an odd tail */
    CUdeviceptr send[8], recv[8];
    unsigned seed = (unsigned)time(NULL);
    for (int r = 0; r < W; r++) {
        dsa_options_t o = harness_options();
        o.inproc_group = g;
        o.dcp_rank = r;
        dsa_result_t rc = dsa_ctx_create(config, &o, &ctx[r]);
        CHECK(rc == DSA_SUCCESS);
        if (rc != DSA_SUCCESS) {
            printf("  %s\n", dsa_last_error(NULL));
            return;
        }
        send[r] = dev_alloc(bytes);
        recv[r] = dev_alloc(bytes * (size_t)W);
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
     * completes when it calls again with the right one, and gathers the data again (recv zeroed
     * first, so that the first gather's bytes cannot pass for the second's) */
    for (int r = 0; r < W; r++)
        CK(cuMemsetD8(recv[r], 0, (size_t)W * bytes));
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
    for (int r = 0; r < W; r++)
        CHECK(check_gathered(recv[r], W, bytes, seed));
    for (int r = 0; r < W; r++) {
        cuMemFree(send[r]);
        cuMemFree(recv[r]);
        dsa_ctx_destroy(ctx[r]);
    }
    dsa_inproc_group_destroy(g);
    cuStreamDestroy(s);
    printf("%s inproc W=%d %s\n", check_failed ? "FAIL" : "ok  ", W, config);
}

typedef struct nccl_job {
    ncclUniqueId ids[2]; /* ids[0] for libdsa's communicator, ids[1] for the reference one */
    size_t q_bytes;      /* query_bytes() */
} nccl_job_t;

/* One process per GPU (the harness made GPU `rank` current). */
static int nccl_rank(int rank, int W, void *arg)
{
    const nccl_job_t *job = arg;
    const ncclUniqueId *ids = job->ids;
    dsa_options_t o = harness_options();
    o.device = rank;
    o.nccl_id = &ids[0];
    o.dcp_rank = rank;
    dsa_ctx_t ctx;
    dsa_result_t rc = dsa_ctx_create(nccl_config, &o, &ctx);
    if (rc != DSA_SUCCESS) {
        printf("FAIL rank %d: dsa_ctx_create: %s\n", rank, dsa_last_error(NULL));
        return 1;
    }
    dsa_config_info_t info;
    info.size = sizeof info;
    if (dsa_ctx_config(ctx, &info) != DSA_SUCCESS) {
        printf("FAIL rank %d: dsa_ctx_config: %s\n", rank, dsa_last_error(ctx));
        return 1;
    }
    ncclComm_t ref;
    if (ncclCommInitRank(&ref, W, ids[1], rank) != ncclSuccess) {
        printf("FAIL rank %d: ncclCommInitRank\n", rank);
        return 1;
    }
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const size_t sizes[] = {64 << 10, 1 << 20, 4 << 20, job->q_bytes * 64}; /* the last: 64 tokens' queries */
    CUdeviceptr send = dev_alloc(4 << 20), recv = dev_alloc((size_t)W * (4 << 20));
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
    /* The exchange before the merge, per layer at 64 and 128 decode rows of this configuration: (a)
     * what libdsa does, one all-to-all of exchange_row bytes a row per peer (the plan's number: bf16
     * partial outputs and fp32 LSEs of the local heads), merged locally in rank order; (b) the
     * alternative, all-gather of the LSEs then reduce-scatter of fp32 partials pre-scaled by
     * exp(L_r - L), where NCCL fixes the order of the fp32 sum; (c) NCCL's all-gather of the same
     * bytes as (a). */
    int64_t xrow = 0;
    if (dsa_testing_plan_number(info.name, "exchange_row", &xrow) != DSA_SUCCESS) {
        printf("FAIL rank %d: %s\n", rank, dsa_last_error(NULL));
        ncclCommDestroy(ref);
        dsa_ctx_destroy(ctx);
        return 1;
    }
    if (rank == 0)
        printf("\nexchange per layer, %d GPUs: | rows | libdsa all-to-all us | all-gather LSE + reduce-scatter us | "
               "NCCL all-gather of the same bytes us |\n", W);
    const size_t HL = (size_t)info.heads_local, HG = HL * (size_t)W, LAT = (size_t)info.kv_lora_rank;
    for (int rows = 64; rows <= 128; rows *= 2) {
        /* xb: (a)'s block per peer, within (b)'s fp32 buffers (2 L + 4 bytes a head against 4 L + 4) */
        size_t ob = (size_t)rows * HL * LAT * 4, lb = (size_t)rows * HL * 4, xb = (size_t)rows * (size_t)xrow;
        CUdeviceptr so = dev_alloc(ob * (size_t)W), ro = dev_alloc(ob * (size_t)W), sl = dev_alloc(lb * (size_t)W);
        CUdeviceptr rl = dev_alloc(lb * (size_t)W * (size_t)W); /* (b) gathers every rank's LSEs of all heads */
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
                    dsa_dcp_alltoall(ctx, (void *)so, (void *)ro, xb, s);
                } else if (v == 1) {
                    ncclAllGather((void *)sl, (void *)rl, (size_t)rows * (size_t)HG, ncclFloat32, ref, (cudaStream_t)s);
                    ncclReduceScatter((void *)so, (void *)ro, (size_t)rows * HL * LAT, ncclFloat32, ncclSum, ref,
                                      (cudaStream_t)s);
                } else {
                    ncclAllGather((void *)so, (void *)ro, xb, ncclUint8, ref, (cudaStream_t)s); /* xb per rank: recv is W xb */
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
    dsa_config_info_t info;
    if (harness_config(nccl_config, &info) != 0) /* the registry only: CUDA stays uninitialised before the fork */
        return 1;
    int W = info.dcp;
    if (!harness_have_gpus("test_dcp nccl", W))
        return 0;
    nccl_job_t job;
    job.q_bytes = query_bytes();
    if (job.q_bytes == 0 || harness_nccl_ids(job.ids, 2) != 0)
        return 1;
    printf("DCP all-gather over NCCL, %d GPUs, bytes per rank; median us of 50\n", W);
    printf("| bytes per rank | libdsa us | NCCL us | ratio |\n| --- | --- | --- | --- |\n");
    int failed = harness_run_ranks(W, nccl_rank, &job);
    printf("%s nccl W=%d %s\n", failed ? "FAIL" : "ok  ", W, nccl_config);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "nccl")) {
        int f = test_nccl();
        printf("%d passed, %d failed\n", !f, f);
        return f;
    }
    harness_start("test_dcp"); /* SKIPPED without a CUDA device */
    size_t q_bytes = query_bytes();
    if (q_bytes == 0) { /* libdsa lacks the configuration: query_bytes said so */
        check_failed++;
        CHECK_DONE();
    }
    test_inproc("tiny_tp4_dcp2_i1_bf16", q_bytes);               /* W = 2 */
    test_inproc("tiny_tp4_dcp4_i1_fp8_ds_mla", q_bytes);         /* W = 4 */
    test_inproc("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", q_bytes); /* W = 8 */
    /* dcp 1 takes no group; dcp > 1 needs exactly one */
    dsa_ctx_t ctx;
    dsa_options_t o = harness_options();
    CHECK(dsa_ctx_create("glm5.2_tp4_dcp4_i1_fp8_ds_mla", &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "has dcp 4: set exactly one of opts->nccl_comm") != NULL);
    CHECK_DONE();
}
