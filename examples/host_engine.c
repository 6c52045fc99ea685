/* A host engine calling libdsa for one layer of GLM-5.2 on one GPU: create a context once, then per
 * layer enqueue the prologue (query norm for every token, this rank's KV cache entries) and the
 * attend step on the engine's stream. The engine sizes its tensors from what the context reports
 * (dsa_ctx_config): heads, dimensions, top-k and the cache's bytes per token are the configuration's,
 * never the engine's. Compiled by `ninja runtime` so this README example cannot rot; run it on a
 * GPU machine: build/examples/host_engine [CONFIG] (a configuration with dcp 1). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsa.h"

#define CHECK_CU(call)                                                                                       \
    do {                                                                                                     \
        if ((call) != CUDA_SUCCESS) {                                                                        \
            fprintf(stderr, "%s failed\n", #call);                                                           \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

/* device memory filled with a repeating bf16 pattern (never zeros), or -1 for int tensors */
static CUdeviceptr tensor(size_t bytes, unsigned short pattern)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc(&p, bytes) == CUDA_SUCCESS)
        cuMemsetD16(p, pattern, bytes / 2);
    return p;
}

int main(int argc, char **argv)
{
    const char *config = argc > 1 ? argv[1] : "glm5.2_tp4_dcp1_i1_fp8_ds_mla";
    enum { T = 8, BLOCKS = 64 }; /* the engine's batch (one prefill request) and its cache blocks */

    /* the engine owns the CUDA context and the stream; libdsa uses the device's primary context */
    CUdevice dev;
    CUcontext cu;
    CUstream stream;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&cu, dev));
    CHECK_CU(cuCtxSetCurrent(cu));
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    /* once per model: compile (or load from the JIT cache) and allocate workspaces */
    dsa_options_t opts = DSA_OPTIONS_INIT;
    opts.log_level = DSA_LOG_INFO;
    dsa_ctx_t ctx;
    dsa_result_t rc = dsa_ctx_create(config, &opts, &ctx);
    if (rc != DSA_SUCCESS) {
        fprintf(stderr, "dsa_ctx_create: %s: %s\n", dsa_strerror(rc), dsa_last_error(NULL));
        return 1;
    }
    /* the configuration's shapes, from the library */
    dsa_config_info_t info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    rc = dsa_ctx_config(ctx, &info);
    if (rc != DSA_SUCCESS) {
        fprintf(stderr, "dsa_ctx_config: %s\n", dsa_last_error(ctx));
        return 1;
    }
    const size_t q_lora = (size_t)info.q_lora_rank, heads = (size_t)info.heads_local, topk = (size_t)info.idx_topk;
    const size_t latent = (size_t)info.kv_lora_rank, rope = (size_t)info.qk_rope_dim, kv_dim = (size_t)info.kv_dim;

    /* the layer's tensors, as the engine's GEMMs would leave them (bf16 = 0x3c00 is 0.0078) */
    CUdeviceptr q_c = tensor(T * q_lora * 2, 0x3f80), q_c_out = tensor(T * q_lora * 2, 0);
    CUdeviceptr kv = tensor(T * kv_dim * 2, 0x3f00), q_w = tensor(q_lora * 2, 0x3f80);
    CUdeviceptr kv_w = tensor(latent * 2, 0x3f80);
    CUdeviceptr cache = tensor((size_t)BLOCKS * (size_t)info.block_size * (size_t)info.cache_bytes_per_token, 0);
    CUdeviceptr topk_rows = tensor(T * topk * 4, 0xffff); /* -1: no key yet */
    CUdeviceptr q_lat = tensor(T * heads * latent * 2, 0x3c00), q_pe = tensor(T * heads * rope * 2, 0x3c00);
    CUdeviceptr out = tensor(T * heads * latent * 2, 0), lse = tensor(T * heads * 4, 0);
    int64_t positions[T], slots[T];
    int32_t first_keys[T], req[T], lens[1] = {T}, table[1] = {0};
    for (int t = 0; t < T; t++) {
        positions[t] = t; /* one prefill request of T tokens */
        slots[t] = t;     /* block 0, offsets 0..T-1 */
        first_keys[t] = t;
        req[t] = 0;
    }
    CUdeviceptr d_pos = tensor(sizeof positions, 0), d_slots = tensor(sizeof slots, 0), d_req = tensor(sizeof req, 0);
    CUdeviceptr d_lens = tensor(sizeof lens, 0), d_table = tensor(sizeof table, 0);
    CHECK_CU(cuMemcpyHtoD(d_pos, positions, sizeof positions));
    CHECK_CU(cuMemcpyHtoD(d_slots, slots, sizeof slots));
    CHECK_CU(cuMemcpyHtoD(d_req, req, sizeof req));
    CHECK_CU(cuMemcpyHtoD(d_lens, lens, sizeof lens));
    CHECK_CU(cuMemcpyHtoD(d_table, table, sizeof table));
    for (int t = 0; t < T; t++) /* causal top-k: token t sees positions 0..t */
        CHECK_CU(cuMemcpyHtoD(topk_rows + (size_t)t * topk * 4, first_keys, (size_t)(t + 1) * 4));

    /* per layer: stage A, then stage C, on the engine's stream (capturable in a CUDA graph) */
    dsa_prologue_args_t pa;
    memset(&pa, 0, sizeof pa);
    pa.size = sizeof pa;
    pa.num_tokens = T;
    pa.q_c = (void *)q_c, pa.q_c_out = (void *)q_c_out, pa.kv = (void *)kv;
    pa.positions = (const int64_t *)d_pos, pa.slot_mapping = (const int64_t *)d_slots;
    pa.q_norm_w = (void *)q_w, pa.kv_norm_w = (void *)kv_w;
    pa.kv_cache = (void *)cache, pa.num_cache_blocks = BLOCKS;
    rc = dsa_prologue(ctx, &pa, stream);
    if (rc != DSA_SUCCESS) {
        fprintf(stderr, "dsa_prologue: %s\n", dsa_last_error(ctx));
        return 1;
    }
    dsa_attend_args_t aa;
    memset(&aa, 0, sizeof aa);
    aa.size = sizeof aa;
    aa.num_tokens = T;
    aa.q_lat = (void *)q_lat, aa.q_pe = (void *)q_pe, aa.positions = (const int64_t *)d_pos;
    aa.topk = (const int32_t *)topk_rows, aa.req_of_token = (const int32_t *)d_req;
    aa.seq_lens = (const int32_t *)d_lens, aa.block_table = (const int32_t *)d_table;
    aa.num_requests = 1, aa.max_blocks = 1;
    aa.kv_cache = (void *)cache, aa.num_cache_blocks = BLOCKS;
    aa.out = (void *)out, aa.lse = (float *)lse;
    rc = dsa_attend(ctx, &aa, stream);
    if (rc != DSA_SUCCESS) {
        fprintf(stderr, "dsa_attend: %s\n", dsa_last_error(ctx));
        return 1;
    }
    CHECK_CU(cuStreamSynchronize(stream));
    float l0;
    CHECK_CU(cuMemcpyDtoH(&l0, lse, sizeof l0));
    printf("host_engine: %s: one layer done; LSE of token 0, head 0: %.6f (one key: the score itself)\n", config, l0);
    dsa_ctx_destroy(ctx);
    return 0;
}
