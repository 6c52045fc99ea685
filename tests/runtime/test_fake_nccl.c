/* CPU tests of NCCL context creation and the NCCL DCP transport (runtime/transport_nccl.c), which
 * otherwise run only on two GPUs: over the fake CUDA driver, NVRTC and NCCL of this folder
 * (fake_cuda.c, fake_nvrtc.c in its succeeding mode, fake_nccl.c), opened through
 * DSA_CUDA_LIBRARY, DSA_NVRTC_LIBRARY and DSA_NCCL_LIBRARY, which this program sets to the fakes
 * beside it. Each rank of a DCP group is a thread with a fake device of its own. What is checked:
 * a group of contexts made from one ncclUniqueId, its symmetric windows and the peers' addresses
 * from NCCL's window records (the fused path), the collectives' bytes, everything freed at
 * destroy; the paths without windows (DSA_NCCL_WINDOWS=0, an old NCCL, windows refused, ranks
 * without a common load/store team) taken on every rank alike; bad options and a communicator of
 * the wrong size refused with their messages; and an NCCL send that fails inside the all-to-all's
 * group still ending the group. Run by tests/run.sh (plain and ASan+UBSan builds). */
#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "ctx.h"
#include "dsa_testing.h"
#include "fakes.h"

#define W 2

/* The fakes' own exports (fakes.h), from the libraries libdsa opened. */
static struct {
    long (*cuda_live)(void), (*cuda_bad_frees)(void);
    int (*group_depth)(void);
    long (*group_ends)(void);
    int (*comms)(void), (*windows)(void);
    long (*mem)(void), (*nccl_bad_frees)(void);
} fake;

static const char *config; /* a linked configuration of dcp 2 */

static double ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *symbol(void *lib, const char *name)
{
    void *f = lib ? dlsym(lib, name) : NULL;
    if (!f) {
        printf("FAIL: the fakes lack %s (%s)\n", name, dlerror());
        exit(1);
    }
    return f;
}

/* Points libdsa's loaders at the fakes beside this program, loads them, finds their exports. */
static void use_fakes(void)
{
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        printf("FAIL: cannot read /proc/self/exe\n");
        exit(1);
    }
    exe[n] = '\0';
    const char *dir = dirname(exe);
    char cuda[4200], nccl[4200], nvrtc[4200];
    snprintf(cuda, sizeof cuda, "%s/libfake_cuda.so", dir);
    snprintf(nccl, sizeof nccl, "%s/libfake_nccl.so", dir);
    snprintf(nvrtc, sizeof nvrtc, "%s/libfake_nvrtc.so", dir);
    setenv("DSA_CUDA_LIBRARY", cuda, 1);
    setenv("DSA_NCCL_LIBRARY", nccl, 1);
    setenv("DSA_NVRTC_LIBRARY", nvrtc, 1);
    setenv("FAKE_NVRTC_MODE", "ok", 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    unsetenv("DSA_NCCL_WINDOWS");
    unsetenv("FAKE_NCCL_FAIL");
    unsetenv("FAKE_CUDA_FAIL_ALLOC");
    char err[512];
    if (dsa_load_cuda(err, sizeof err) != 0 || dsa_load_nccl(err, sizeof err) != 0) {
        printf("FAIL: the fakes do not load: %s\n", err);
        exit(1);
    }
    /* the same files libdsa opened by these paths: the same instances */
    void *c = dlopen(cuda, RTLD_NOW | RTLD_NOLOAD), *l = dlopen(nccl, RTLD_NOW | RTLD_NOLOAD);
    *(void **)&fake.cuda_live = symbol(c, "fake_cuda_live_allocs");
    *(void **)&fake.cuda_bad_frees = symbol(c, "fake_cuda_bad_frees");
    *(void **)&fake.group_depth = symbol(l, "fake_nccl_group_depth");
    *(void **)&fake.group_ends = symbol(l, "fake_nccl_group_ends");
    *(void **)&fake.comms = symbol(l, "fake_nccl_live_comms");
    *(void **)&fake.windows = symbol(l, "fake_nccl_live_windows");
    *(void **)&fake.mem = symbol(l, "fake_nccl_live_mem");
    *(void **)&fake.nccl_bad_frees = symbol(l, "fake_nccl_bad_frees");
    /* dsa_load_* keep the libraries open: these handles only took a reference */
    dlclose(c);
    dlclose(l);
}

/* Nothing of the fakes' is left: every allocation, window and communicator went, none freed twice. */
static void check_all_freed(const char *after)
{
    const long cuda = fake.cuda_live(), mem = fake.mem();
    const int comms = fake.comms(), windows = fake.windows();
    CHECK(cuda == 0 && mem == 0 && comms == 0 && windows == 0);
    CHECK(fake.cuda_bad_frees() == 0 && fake.nccl_bad_frees() == 0);
    if (cuda || mem || comms || windows)
        printf("  after %s: %ld device allocations, %ld ncclMemAlloc allocations, %d communicators, %d windows "
               "left\n",
               after, cuda, mem, comms, windows);
}

typedef struct rank {
    int rank;
    dsa_options_t o;
    dsa_result_t rc;
    dsa_ctx_t ctx;
    double ms;
    char err[DSA_ERRLEN];
} rank_t;

static void *create_rank(void *arg)
{
    rank_t *r = arg;
    const double t0 = ms_now();
    r->rc = dsa_ctx_create(config, &r->o, &r->ctx);
    r->ms = ms_now() - t0;
    snprintf(r->err, sizeof r->err, "%s", dsa_last_error(NULL));
    return NULL;
}

/* Rank r's options: device r, the group's id, small chunks (their buffers are allocated). */
static dsa_options_t rank_options(int r, const void *id)
{
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.cache_dir = "";
    o.log_level = DSA_LOG_QUIET;
    o.device = r;
    o.nccl_id = id;
    o.dcp_rank = r;
    o.attend_tokens = 64;
    o.index_tokens = 8;
    return o;
}

/* Creates the group's contexts, one thread a rank, from the ranks' options. */
static void create_group(rank_t *ranks, int n)
{
    pthread_t th[W];
    for (int r = 0; r < n; r++)
        CHECK(pthread_create(&th[r], NULL, create_rank, &ranks[r]) == 0);
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
}

static void new_group(rank_t *ranks, unsigned char *id)
{
    CHECK(dsa_nccl_unique_id(id, DSA_NCCL_UNIQUE_ID_BYTES) == DSA_SUCCESS);
    for (int r = 0; r < W; r++) {
        memset(&ranks[r], 0, sizeof ranks[r]);
        ranks[r].rank = r;
        ranks[r].o = rank_options(r, id);
    }
}

static void destroy_group(rank_t *ranks, const char *what)
{
    for (int r = 0; r < W; r++)
        dsa_ctx_destroy(ranks[r].ctx);
    check_all_freed(what);
}

/* One rank's all-gathers or all-to-alls through the testing hooks, `calls` of them one after the
 * other on its own thread, with what each returned and the thread's NCCL group state after it
 * (the fake's group is the calling thread's, as NCCL's). */
typedef struct xfer {
    dsa_ctx_t ctx;
    int rank, alltoall, calls;
    unsigned char send[2 * 64], recv[2][2 * 64];
    dsa_result_t rc[2];
    char err[2][DSA_ERRLEN];
    int depth_after[2];
    long group_ends[2];
} xfer_t;

static void *xfer_rank(void *arg)
{
    xfer_t *x = arg;
    for (int i = 0; i < (int)sizeof x->send; i++)
        x->send[i] = (unsigned char)(x->rank * 100 + i);
    for (int k = 0; k < x->calls; k++) {
        memset(x->recv[k], 0, sizeof x->recv[k]);
        const long ends = fake.group_ends();
        x->rc[k] = x->alltoall ? dsa_dcp_alltoall(x->ctx, x->send, x->recv[k], 64, NULL)
                               : dsa_dcp_allgather(x->ctx, x->send, x->recv[k], 64, NULL);
        snprintf(x->err[k], sizeof x->err[k], "%s", x->rc[k] ? dsa_last_error(x->ctx) : "");
        x->depth_after[k] = fake.group_depth();
        x->group_ends[k] = fake.group_ends() - ends;
    }
    return NULL;
}

static void xfer_group(const rank_t *ranks, int alltoall, int calls, xfer_t *x)
{
    pthread_t th[W];
    memset(x, 0, W * sizeof *x);
    for (int r = 0; r < W; r++) {
        x[r].ctx = ranks[r].ctx;
        x[r].rank = r;
        x[r].alltoall = alltoall;
        x[r].calls = calls;
        CHECK(pthread_create(&th[r], NULL, xfer_rank, &x[r]) == 0);
    }
    for (int r = 0; r < W; r++)
        pthread_join(th[r], NULL);
}

/* Whether rank r received in its call k what the collective should have given it: the all-gather
 * every rank's first 64 bytes in rank order, the all-to-all block r of every rank's send, in rank
 * order. */
static int received(const xfer_t *x, int r, int k)
{
    for (int p = 0; p < W; p++)
        for (int i = 0; i < 64; i++)
            if (x[r].recv[k][p * 64 + i] != (unsigned char)(p * 100 + (x[r].alltoall ? r * 64 : 0) + i))
                return 0;
    return 1;
}

/* The group forms, windows and all: every rank's buffers are windows whose records put them on one
 * load/store team, so the fused path is taken with the barrier kernel, and the peers' addresses
 * are the other ranks' own buffers; the collectives move the right bytes; destroy frees it all. */
static void test_group(void)
{
    unsigned char id[DSA_NCCL_UNIQUE_ID_BYTES];
    rank_t ranks[W];
    new_group(ranks, id);
    int nonzero = 0;
    for (int i = 0; i < DSA_NCCL_UNIQUE_ID_BYTES; i++)
        nonzero |= id[i];
    CHECK(nonzero);
    create_group(ranks, W);
    for (int r = 0; r < W; r++) {
        CHECK(ranks[r].rc == DSA_SUCCESS);
        if (ranks[r].rc != DSA_SUCCESS)
            printf("  rank %d: %s\n", r, ranks[r].err);
    }
    if (ranks[0].rc != DSA_SUCCESS || ranks[1].rc != DSA_SUCCESS) {
        destroy_group(ranks, "a failed group");
        return;
    }
    CHECK(fake.comms() == W && fake.windows() > 0 && fake.mem() == fake.windows());
    for (int r = 0; r < W; r++) {
        const dsa_ctx_t c = ranks[r].ctx;
        CHECK(c->dcp->rank == r && c->dcp->size == W);
        CHECK(!strcmp(c->dcp->path, "NCCL, symmetric windows"));
        CHECK(c->x_fused == 1 && c->bar_device == 1);
        for (int q = 0; q < W; q++) {
            const dsa_ctx_t p = ranks[q].ctx;
            CHECK(c->x_peer[q] == p->ws_x_recv && c->q_peer[q] == p->ws_qg && c->c_peer[q] == p->ws_icand_recv);
            CHECK(c->bar.flags_peer[q] == p->bar.flags_own);
        }
    }
    xfer_t x[W];
    for (int alltoall = 0; alltoall < 2; alltoall++) {
        xfer_group(ranks, alltoall, 2, x);
        for (int r = 0; r < W; r++)
            for (int k = 0; k < 2; k++)
                CHECK(x[r].rc[k] == DSA_SUCCESS && received(x, r, k) && x[r].depth_after[k] == 0 &&
                      x[r].group_ends[k] == alltoall);
    }
    destroy_group(ranks, "a group");
}

/* Without usable windows every rank takes the collectives (x_fused 0), alike: DSA_NCCL_WINDOWS=0
 * (plain memory), an NCCL before 2.27 (no windows), windows refused on every rank, an NCCL whose
 * window records the runtime does not read (2.31), ranks on different nodes (no common
 * load/store team), an NCCL that registers without giving a window (whose ncclMemAlloc memory
 * is still freed with ncclMemFree). The collectives still move the right bytes. */
static void test_without_windows(void)
{
    static const struct {
        const char *env, *value, *path;
        int windows; /* the contexts hold windows */
    } cases[] = {
        {"DSA_NCCL_WINDOWS", "0", "NCCL (DSA_NCCL_WINDOWS=0: plain device memory)", 0},
        {"FAKE_NCCL_VERSION", "22609", "NCCL (no symmetric windows before 2.27: plain device memory)", 0},
        {"FAKE_NCCL_FAIL", "ncclMemAlloc", "plain device memory", 0},
        {"FAKE_NCCL_VERSION", "23100", "NCCL, symmetric windows", 1},
        {"FAKE_NCCL_LSA", "split", "NCCL, symmetric windows", 1},
        {"FAKE_NCCL_WINDOW", "null", "NCCL, symmetric windows", 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        setenv(cases[k].env, cases[k].value, 1);
        unsigned char id[DSA_NCCL_UNIQUE_ID_BYTES];
        rank_t ranks[W];
        new_group(ranks, id);
        create_group(ranks, W);
        CHECK(ranks[0].rc == DSA_SUCCESS && ranks[1].rc == DSA_SUCCESS);
        if (ranks[0].rc != DSA_SUCCESS || ranks[1].rc != DSA_SUCCESS) {
            printf("  %s=%s: %s / %s\n", cases[k].env, cases[k].value, ranks[0].err, ranks[1].err);
            unsetenv(cases[k].env);
            destroy_group(ranks, cases[k].env);
            continue;
        }
        CHECK((fake.windows() > 0) == cases[k].windows);
        if (!strcmp(cases[k].env, "FAKE_NCCL_WINDOW"))
            CHECK(fake.mem() > 0); /* the case under test: ncclMemAlloc'd buffers that have no window */
        for (int r = 0; r < W; r++) {
            CHECK(strstr(ranks[r].ctx->dcp->path, cases[k].path) != NULL);
            CHECK(ranks[r].ctx->x_fused == 0 && ranks[r].ctx->bar_device == 0);
        }
        xfer_t x[W];
        for (int alltoall = 0; alltoall < 2; alltoall++) {
            xfer_group(ranks, alltoall, 1, x);
            CHECK(x[0].rc[0] == DSA_SUCCESS && x[1].rc[0] == DSA_SUCCESS && received(x, 0, 0) && received(x, 1, 0));
        }
        unsetenv(cases[k].env);
        destroy_group(ranks, cases[k].env);
    }
}

/* Options and communicators that do not fit the configuration: refused with the reason, and a
 * host's communicator is the host's (still there after the refusal). */
static void test_refused(void)
{
    unsigned char id[DSA_NCCL_UNIQUE_ID_BYTES];
    rank_t ranks[W];
    new_group(ranks, id);
    dsa_ctx_t ctx = NULL;
    dsa_options_t o = rank_options(0, id);
    o.dcp_rank = 2;
    CHECK(dsa_ctx_create(config, &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT && !ctx);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_ctx_create: opts->dcp_rank is 2, dcp is 2"));
    o.dcp_rank = -1;
    CHECK(dsa_ctx_create(config, &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT && !ctx);
    /* a host's communicator of one rank for a configuration of two */
    CUcontext cu = NULL, popped;
    ncclComm_t comm = NULL;
    ncclUniqueId uid;
    CHECK(dsa_cu.cuDevicePrimaryCtxRetain(&cu, 0) == CUDA_SUCCESS && dsa_cu.cuCtxPushCurrent(cu) == CUDA_SUCCESS);
    CHECK(dsa_nccl.ncclGetUniqueId(&uid) == ncclSuccess && dsa_nccl.ncclCommInitRank(&comm, 1, uid, 0) == ncclSuccess);
    o = rank_options(0, NULL);
    o.nccl_comm = comm;
    CHECK(dsa_ctx_create(config, &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT && !ctx);
    char want[512];
    snprintf(want, sizeof want, "dsa_ctx_create: the NCCL communicator has 1 ranks, configuration %s has dcp 2", config);
    CHECK(!strcmp(dsa_last_error(NULL), want));
    CHECK(fake.comms() == 1); /* the host's, kept */
    o.nccl_id = id;
    CHECK(dsa_ctx_create(config, &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT && !ctx);
    CHECK(strstr(dsa_last_error(NULL), "set exactly one of opts->nccl_comm, opts->nccl_id, opts->inproc_group (2 set)"));
    CHECK(dsa_nccl.ncclCommDestroy(comm) == ncclSuccess);
    CHECK(dsa_cu.cuCtxPopCurrent(&popped) == CUDA_SUCCESS && dsa_cu.cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
    /* a bad DSA_NCCL_WINDOWS: every rank fails with the value, after forming the communicator */
    setenv("DSA_NCCL_WINDOWS", "yes\n", 1);
    create_group(ranks, W);
    for (int r = 0; r < W; r++)
        CHECK(ranks[r].rc == DSA_ERROR_INVALID_ARGUMENT && !ranks[r].ctx &&
              !strcmp(ranks[r].err, "dsa_ctx_create: DSA_NCCL_WINDOWS is 'yes\\x0a', expected 0 or 1"));
    unsetenv("DSA_NCCL_WINDOWS");
    /* NCCL failing the communicator on every rank: said, naming the call */
    new_group(ranks, id);
    setenv("FAKE_NCCL_FAIL", "ncclCommInitRank", 1);
    create_group(ranks, W);
    for (int r = 0; r < W; r++)
        CHECK(ranks[r].rc == DSA_ERROR_NCCL && strstr(ranks[r].err, "ncclCommInitRank") &&
              strstr(ranks[r].err, "failed: unhandled system error"));
    /* and the unique id */
    setenv("FAKE_NCCL_FAIL", "ncclGetUniqueId", 1);
    CHECK(dsa_nccl_unique_id(id, sizeof id) == DSA_ERROR_NCCL);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_nccl_unique_id: ncclGetUniqueId failed: unhandled system error (run "
                                        "with NCCL_DEBUG=INFO for details)"));
    unsetenv("FAKE_NCCL_FAIL");
    /* a driver error code without a name (the driver leaves its strings NULL): said as such, never
     * a NULL through printf */
    setenv("FAKE_CUDA_FAIL_ALLOC", "0", 1);
    setenv("FAKE_CUDA_ALLOC_ERROR", "987654", 1);
    int tried = 0;
    for (const char *const *c = dsa_configs(); *c; c++) {
        dsa_config_info_t info = {.size = sizeof info};
        if (dsa_config_info(*c, &info) != DSA_SUCCESS || info.dcp != 1)
            continue;
        o = rank_options(0, NULL);
        o.dcp_rank = 0;
        tried = 1;
        CHECK(dsa_ctx_create(*c, &o, &ctx) == DSA_ERROR_CUDA && !ctx);
        CHECK(strstr(dsa_last_error(NULL), "cuMemAlloc(") && strstr(dsa_last_error(NULL), " failed: unknown CUresult 987654 at runtime/"));
        /* a named one: its name and the driver's text, and out of memory as libdsa's own code */
        setenv("FAKE_CUDA_ALLOC_ERROR", "2", 1); /* CUDA_ERROR_OUT_OF_MEMORY */
        CHECK(dsa_ctx_create(*c, &o, &ctx) == DSA_ERROR_OUT_OF_MEMORY && !ctx);
        CHECK(strstr(dsa_last_error(NULL), " failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory) at runtime/"));
        /* a refused launch of a per-layer call: said in the same words (calls.c), on the context */
        unsetenv("FAKE_CUDA_ALLOC_ERROR");
        unsetenv("FAKE_CUDA_FAIL_ALLOC");
        CHECK(dsa_ctx_create(*c, &o, &ctx) == DSA_SUCCESS && ctx);
        if (ctx) {
            static _Alignas(16) unsigned char buf[8][64];
            dsa_prologue_args_t p;
            memset(&p, 0, sizeof p);
            p.size = sizeof p;
            p.num_tokens = 1;
            p.num_cache_blocks = 1;
            p.q_c = buf[0], p.q_c_out = buf[1], p.kv = buf[2], p.q_norm_w = buf[3], p.kv_norm_w = buf[4];
            p.positions = (const int64_t *)(void *)buf[5], p.slot_mapping = (const int64_t *)(void *)buf[6];
            p.kv_cache = buf[7];
            CHECK(dsa_prologue(ctx, &p, NULL) == DSA_SUCCESS);
            setenv("FAKE_CUDA_LAUNCH_ERROR", "400", 1); /* CUDA_ERROR_INVALID_HANDLE */
            snprintf(want, sizeof want,
                     "dsa_prologue: launch of the prologue kernel of %s failed: CUDA_ERROR_INVALID_HANDLE (invalid "
                     "resource handle)", *c);
            CHECK(dsa_prologue(ctx, &p, NULL) == DSA_ERROR_CUDA && !strcmp(dsa_last_error(ctx), want));
            setenv("FAKE_CUDA_LAUNCH_ERROR", "987654", 1);
            snprintf(want, sizeof want, "dsa_prologue: launch of the prologue kernel of %s failed: unknown CUresult 987654",
                     *c);
            CHECK(dsa_prologue(ctx, &p, NULL) == DSA_ERROR_CUDA && !strcmp(dsa_last_error(ctx), want));
            if (strcmp(dsa_last_error(ctx), want))
                printf("  got '%s'\n", dsa_last_error(ctx));
            unsetenv("FAKE_CUDA_LAUNCH_ERROR");
            dsa_ctx_destroy(ctx);
            ctx = NULL;
        }
        break;
    }
    CHECK(tried); /* a linked configuration of dcp 1 was there to try */
    unsetenv("FAKE_CUDA_ALLOC_ERROR");
    unsetenv("FAKE_CUDA_FAIL_ALLOC");
    check_all_freed("the refusals");
}

/* A send or receive that NCCL refuses inside the all-to-all's group: the call fails naming it, and
 * the group is ended all the same (NCCL's group is the thread's: left open, every later NCCL call
 * of the thread would be deferred into it and never launched), so the thread's next all-to-all
 * moves its bytes. */
static void test_failing_send_ends_group(void)
{
    static const char *const calls[] = {"ncclSend#1", "ncclRecv#1"};
    unsigned char id[DSA_NCCL_UNIQUE_ID_BYTES];
    rank_t ranks[W];
    new_group(ranks, id);
    setenv("DSA_NCCL_WINDOWS", "0", 1); /* windows or not: the same calls */
    create_group(ranks, W);
    unsetenv("DSA_NCCL_WINDOWS");
    CHECK(ranks[0].rc == DSA_SUCCESS && ranks[1].rc == DSA_SUCCESS);
    for (int k = 0; k < 2 && ranks[0].rc == DSA_SUCCESS && ranks[1].rc == DSA_SUCCESS; k++) {
        xfer_t x[W];
        setenv("FAKE_NCCL_FAIL", calls[k], 1); /* each rank's first such call fails */
        xfer_group(ranks, 1, 2, x);
        unsetenv("FAKE_NCCL_FAIL");
        char want[256];
        snprintf(want, sizeof want, "%.8s (all-to-all of 64 bytes a rank) failed: unhandled system error", calls[k]);
        for (int r = 0; r < W; r++) {
            CHECK(x[r].rc[0] == DSA_ERROR_NCCL && strstr(x[r].err[0], want) == x[r].err[0]);
            CHECK(x[r].depth_after[0] == 0 && x[r].group_ends[0] == 1);
            CHECK(x[r].rc[1] == DSA_SUCCESS && received(x, r, 1) && x[r].depth_after[1] == 0 &&
                  x[r].group_ends[1] == 1);
        }
    }
    destroy_group(ranks, "the failing sends");
}

int main(void)
{
    use_fakes();
    for (const char *const *c = dsa_configs(); *c && !config; c++) {
        dsa_config_info_t info = {.size = sizeof info};
        if (dsa_config_info(*c, &info) == DSA_SUCCESS && info.dcp == W)
            config = *c;
    }
    CHECK(config != NULL);
    if (!config)
        CHECK_DONE();
    test_group();
    test_without_windows();
    test_refused();
    test_failing_send_ends_group();
    CHECK_DONE();
}
