/* A fake NCCL for tests (loaded through DSA_NCCL_LIBRARY), over the fake CUDA driver (fake_cuda.c,
 * whose device memory is host memory): the ranks of a communicator are threads of this process,
 * one CUDA device each, and the collectives move real bytes between them.
 *
 * - ncclGetUniqueId gives fresh random bytes; ncclCommInitRank joins the communicator of those
 *   bytes and blocks until all of its ranks have joined. Two ranks on one device are refused
 *   (ncclInvalidUsage), as NCCL does not support them.
 * - A collective is enqueued on the caller's stream: it leaves stream work pending in the fake
 *   driver (fakes.h) until every rank has enqueued its part, and then moves the bytes at once,
 *   on the thread that enqueued the last part. ncclAllGather parts match by their order on the
 *   communicator; ncclSend and ncclRecv match in order per pair of ranks, as in NCCL. A group
 *   (ncclGroupStart/End, per thread, nested) enqueues its calls at its outermost end; a call that
 *   failed inside it makes ncclGroupEnd drop the group and return that error.
 * - ncclCommDestroy waits for the communicator's enqueued work, as NCCL's does; a rank that left
 *   leaves the others' later collectives waiting for good, as a dead peer would.
 * - ncclMemAlloc gives memory of an arena that lays every device's allocations 4 GiB apart in
 *   one address range, and ncclCommWindowRegister (collective: it blocks until every rank has
 *   registered its buffer) gives a window record whose prefix is NCCL 2.28's struct
 *   ncclWindow_vidmem (transport_nccl.c reads it): where the ranks' buffers sit at the same offset
 *   of consecutive devices, as ranks allocating the same sizes in the same order do, rank r's
 *   buffer is lsaFlatBase + r x 4 GiB, a load/store team of all ranks, as on one NVLink domain
 *   (NCCL maps the team's memory a second time into a range of its own; here that range is the
 *   memory itself); else a record no rank can use (lsaRank -1).
 *
 * Environment, read at each call:
 * - FAKE_NCCL_VERSION: what ncclGetVersion answers (default 22809, 2.28.9).
 * - FAKE_NCCL_FAIL=NAME[@D][#N][,...]: the NCCL call NAME fails with ncclSystemError (on device D
 *   only with @D, the device current at the call; its first N calls on each device only with #N).
 * - FAKE_NCCL_LSA=split: every rank is a load/store team of its own (lsaRank 0), as ranks on
 *   different nodes are.
 * - FAKE_NCCL_WINDOW=null: ncclCommWindowRegister succeeds without a window (*win NULL), as NCCL
 *   2.27 does where it does not register, and 2.29 on where the communicator has no symmetric
 *   memory support.
 * - FAKE_NCCL_HANG_S: how long a call that would block for good (ncclCommInitRank, a window
 *   registration, ncclCommDestroy waiting for work whose peers never join) waits before the
 *   fake says so and aborts the process (default 20 s). */
#include <errno.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

#include "fakes.h"

#define MAX_RANKS 8
#define SLICE ((size_t)1 << 32) /* one device's part of the arena */

/* NCCL 2.28's struct ncclWindow_vidmem up to stride4G (what transport_nccl.c reads), then the
 * fake's own fields */
typedef struct window {
    void *win_host;
    char *lsa_flat_base;
    int lsa_rank, world_rank;
    uint32_t stride_4g;
    struct ncclComm *comm;
    struct window *next; /* the communicator's windows */
} window_t;

/* An all-gather or a window registration, by its order on the communicator, until every rank has
 * enqueued its part. */
typedef struct slot {
    int reg; /* 1: a registration */
    unsigned long seq;
    size_t bytes;
    int posted;
    const void *send[MAX_RANKS];
    void *recv[MAX_RANKS];
    ncclWindow_t *win_out[MAX_RANKS];
    struct slot *next;
} slot_t;

/* A send or receive of one pair of ranks that waits for its match. */
typedef struct msg {
    void *ptr;
    size_t bytes;
    struct msg *next;
} msg_t;

/* Every rank's communicator of one unique id. broken: a rank left (destroyed or aborted) while
 * others remain, or before all joined: nothing moves any more, whatever is enqueued waits for good. */
typedef struct clique {
    unsigned char id[NCCL_UNIQUE_ID_BYTES];
    int size, joined, members, ready, broken;
    struct ncclComm *comm[MAX_RANKS];
    slot_t *slots;
    msg_t *sends[MAX_RANKS][MAX_RANKS], *recvs[MAX_RANKS][MAX_RANKS]; /* [from][to], oldest first */
    struct clique *next;
} clique_t;

struct ncclComm {
    clique_t *c;
    int rank, size;
    CUcontext cu;
    unsigned long coll_seq, reg_seq;
    long outstanding; /* its parts enqueued and not complete */
    int reg_waiting;  /* a registration of this rank not complete */
    window_t *windows;
};

/* A call enqueued in the thread's open group. */
typedef struct pending {
    enum { P_SEND, P_RECV, P_ALLGATHER } kind;
    ncclComm_t comm;
    const void *send;
    void *recv;
    size_t bytes;
    int peer;
    struct pending *next;
} pending_t;

typedef struct mem {
    char *p;
    size_t bytes;
    struct mem *next;
} mem_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed;

__attribute__((constructor)) static void init_changed(void) { fake_cond_init_monotonic(&changed); }
static clique_t *cliques;
static int live_comms, live_windows;
static long live_mem, bad_frees;
static char *arena;
static size_t arena_next[MAX_RANKS];
static mem_t *mems;

static __thread int group_depth;
static __thread long group_ends;
static __thread ncclResult_t group_error;
static __thread pending_t *group_head;

int fake_nccl_group_depth(void)
{
    return group_depth;
}
long fake_nccl_group_ends(void)
{
    return group_ends;
}

#define LOCKED_READ(type, expr)                                                                              \
    do {                                                                                                     \
        pthread_mutex_lock(&lock);                                                                           \
        const type v_ = (expr);                                                                              \
        pthread_mutex_unlock(&lock);                                                                         \
        return v_;                                                                                           \
    } while (0)
int fake_nccl_live_comms(void)
{
    LOCKED_READ(int, live_comms);
}
int fake_nccl_live_windows(void)
{
    LOCKED_READ(int, live_windows);
}
long fake_nccl_live_mem(void)
{
    LOCKED_READ(long, live_mem);
}
long fake_nccl_bad_frees(void)
{
    LOCKED_READ(long, bad_frees);
}

static int hang_limit(void)
{
    const char *e = getenv("FAKE_NCCL_HANG_S");
    return e && atoi(e) > 0 ? atoi(e) : 20;
}

/* Waits on `changed` (lock held) until done(what); aborts the process past FAKE_NCCL_HANG_S. */
static void wait_for(const void *what, int (*done)(const void *), const char *call, int rank)
{
    const int limit = hang_limit();
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += limit;
    while (!done(what))
        if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT && !done(what)) {
            fprintf(stderr,
                    "fake NCCL: %s of rank %d waited %d s for ranks that never come: the code under test would "
                    "hang here\n",
                    call, rank, limit);
            abort();
        }
}

/* Whether the call `name` is to fail (FAKE_NCCL_FAIL) on the current device. An entry's count (#N)
 * is per device, from when the variable last changed. */
static int injected(const char *name)
{
    static char seen[256];
    static int failed[16][MAX_RANKS + 1]; /* [entry][device + 1]: device -1 is no context */
    const char *e = getenv("FAKE_NCCL_FAIL");
    const size_t n = strlen(name);
    const int dev = fake_cuda_device_of(fake_cuda_current());
    int k = 0, fail = 0;
    pthread_mutex_lock(&lock);
    if (strncmp(seen, e ? e : "", sizeof seen)) {
        snprintf(seen, sizeof seen, "%s", e ? e : "");
        memset(failed, 0, sizeof failed);
    }
    for (const char *s = e; s && *s && k < 16 && !fail; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL, k++) {
        if (strncmp(s, name, n) || (s[n] && s[n] != ',' && s[n] != '@' && s[n] != '#'))
            continue;
        const char *at = s[n] == '@' ? s + n + 1 : NULL, *count = strchr(s + n, '#');
        if (count && strchr(s + n, ',') && count > strchr(s + n, ','))
            count = NULL;
        if ((at && atoi(at) != dev) || (count && failed[k][dev + 1] >= atoi(count + 1)))
            continue;
        failed[k][dev + 1]++;
        fail = 1;
    }
    pthread_mutex_unlock(&lock);
    return fail;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

ncclResult_t ncclGetVersion(int *version)
{
    const char *e = getenv("FAKE_NCCL_VERSION");
    if (!version)
        return ncclInvalidArgument;
    *version = e ? atoi(e) : 22809;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (injected("ncclGetUniqueId"))
        return ncclSystemError;
    if (!id || getrandom(id->internal, sizeof id->internal, 0) != (ssize_t)sizeof id->internal)
        return id ? ncclSystemError : ncclInvalidArgument;
    return ncclSuccess;
}

/* Part of a rank's enqueued work done (lock held): its stream may go on. */
static void complete(ncclComm_t comm)
{
    comm->outstanding--;
    fake_cuda_pend(comm->cu, -1);
    pthread_cond_broadcast(&changed); /* ncclCommDestroy may be waiting for this rank's work (no_work) */
}

/* Part of a rank's work enqueued (lock held). */
static void enqueue(ncclComm_t comm)
{
    comm->outstanding++;
    fake_cuda_pend(comm->cu, 1);
}

static slot_t *slot_of(clique_t *c, int reg, unsigned long seq)
{
    for (slot_t *s = c->slots; s; s = s->next)
        if (s->reg == reg && s->seq == seq)
            return s;
    slot_t *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "fake NCCL: out of host memory\n");
        abort();
    }
    s->reg = reg;
    s->seq = seq;
    s->next = c->slots;
    c->slots = s;
    return s;
}

static void slot_free(clique_t *c, slot_t *s)
{
    for (slot_t **p = &c->slots; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    free(s);
}

/* The window records of a registration every rank has joined (lock held). */
static void register_windows(clique_t *c, slot_t *s)
{
    const char *lsa = getenv("FAKE_NCCL_LSA"), *kind = getenv("FAKE_NCCL_WINDOW");
    const int split = lsa && !strcmp(lsa, "split"), none = kind && !strcmp(kind, "null");
    /* rank r's buffer at lsaFlatBase + r x 4 GiB: the same offset on consecutive devices */
    const char *base = s->recv[0];
    int team = arena != NULL;
    for (int r = 0; r < c->size && team; r++)
        team = (char *)s->recv[r] >= arena && (char *)s->recv[r] - arena < (ptrdiff_t)(MAX_RANKS * SLICE) &&
               (char *)s->recv[r] == base + (size_t)r * SLICE;
    for (int r = 0; r < c->size; r++) {
        c->comm[r]->reg_waiting = 0;
        *s->win_out[r] = NULL;
        if (none)
            continue;
        window_t *w = calloc(1, sizeof *w);
        if (!w) {
            fprintf(stderr, "fake NCCL: out of host memory\n");
            abort();
        }
        w->win_host = w;
        w->lsa_flat_base = (char *)base;
        w->lsa_rank = !team ? -1 : split ? 0 : r;
        w->world_rank = r;
        w->stride_4g = 1;
        w->comm = c->comm[r];
        w->next = c->comm[r]->windows;
        c->comm[r]->windows = w;
        live_windows++;
        *s->win_out[r] = (ncclWindow_t)w;
    }
}

/* The all-gather every rank has joined (lock held): each rank's send block into every rank's
 * receive buffer, in rank order (through a copy: a rank's send block may be in its receive
 * buffer). */
static void allgather_now(clique_t *c, slot_t *s)
{
    char *all = malloc(s->bytes * (size_t)c->size + 1);
    if (!all) {
        fprintf(stderr, "fake NCCL: out of host memory\n");
        abort();
    }
    for (int r = 0; r < c->size; r++)
        memcpy(all + (size_t)r * s->bytes, s->send[r], s->bytes);
    for (int r = 0; r < c->size; r++) {
        memcpy(s->recv[r], all, s->bytes * (size_t)c->size);
        complete(c->comm[r]);
    }
    free(all);
}

/* Enqueues one call of comm (lock held). */
static void post(const pending_t *p)
{
    ncclComm_t comm = p->comm;
    clique_t *c = comm->c;
    enqueue(comm);
    if (p->kind == P_ALLGATHER) {
        slot_t *s = slot_of(c, 0, comm->coll_seq++);
        if (s->posted && s->bytes != p->bytes) {
            fprintf(stderr, "fake NCCL: rank %d's all-gather of %zu bytes a rank meets one of %zu bytes\n",
                    comm->rank, p->bytes, s->bytes);
            abort();
        }
        s->bytes = p->bytes;
        s->send[comm->rank] = p->send;
        s->recv[comm->rank] = p->recv;
        if (++s->posted == c->size && !c->broken) {
            allgather_now(c, s);
            slot_free(c, s);
        }
        return;
    }
    /* a send from rank a to rank b meets b's receive from a, in the order each enqueued them */
    const int from = p->kind == P_SEND ? comm->rank : p->peer, to = p->kind == P_SEND ? p->peer : comm->rank;
    msg_t **mine = p->kind == P_SEND ? &c->sends[from][to] : &c->recvs[from][to];
    msg_t **theirs = p->kind == P_SEND ? &c->recvs[from][to] : &c->sends[from][to];
    if (*theirs && !c->broken) {
        msg_t *m = *theirs;
        if (m->bytes != p->bytes) {
            fprintf(stderr, "fake NCCL: a send of %zu bytes from rank %d to rank %d meets a receive of %zu\n",
                    p->kind == P_SEND ? p->bytes : m->bytes, from, to, p->kind == P_SEND ? m->bytes : p->bytes);
            abort();
        }
        memcpy(p->kind == P_SEND ? m->ptr : p->recv, p->kind == P_SEND ? p->send : m->ptr, p->bytes);
        *theirs = m->next;
        free(m);
        complete(comm);
        complete(c->comm[p->kind == P_SEND ? to : from]);
        return;
    }
    msg_t *m = calloc(1, sizeof *m);
    if (!m) {
        fprintf(stderr, "fake NCCL: out of host memory\n");
        abort();
    }
    m->ptr = p->kind == P_SEND ? (void *)(uintptr_t)p->send : p->recv;
    m->bytes = p->bytes;
    while (*mine)
        mine = &(*mine)->next;
    *mine = m;
}

static void clique_free(clique_t *c)
{
    for (clique_t **p = &cliques; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    while (c->slots)
        slot_free(c, c->slots);
    for (int a = 0; a < MAX_RANKS; a++)
        for (int b = 0; b < MAX_RANKS; b++)
            for (msg_t **l = &c->sends[a][b]; l; l = l == &c->sends[a][b] ? &c->recvs[a][b] : NULL)
                while (*l) {
                    msg_t *m = *l;
                    *l = m->next;
                    free(m);
                }
    free(c);
}

/* The rank leaves its clique (lock held): its windows go, its enqueued work is dropped (abort) or
 * complete (destroy), and the others' later collectives never complete. */
static void leave(ncclComm_t comm)
{
    clique_t *c = comm->c;
    while (comm->outstanding > 0)
        complete(comm);
    while (comm->windows) {
        window_t *w = comm->windows;
        comm->windows = w->next;
        free(w);
        live_windows--;
    }
    if (c) {
        c->comm[comm->rank] = NULL;
        c->broken = 1;
        if (--c->members == 0)
            clique_free(c);
    }
    live_comms--;
    free(comm);
    pthread_cond_broadcast(&changed);
}

static int comm_ready(const void *c)
{
    return ((const clique_t *)c)->ready;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    if (!out || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    *out = NULL;
    CUcontext cu = fake_cuda_current();
    if (!cu)
        return ncclUnhandledCudaError; /* NCCL uses the current device: there is none */
    if (injected("ncclCommInitRank"))
        return ncclSystemError;
    pthread_mutex_lock(&lock);
    clique_t *c = cliques;
    while (c && memcmp(c->id, id.internal, sizeof c->id))
        c = c->next;
    if (!c && (c = calloc(1, sizeof *c)) != NULL) {
        memcpy(c->id, id.internal, sizeof c->id);
        c->size = nranks;
        c->next = cliques;
        cliques = c;
    }
    ncclResult_t r = !c ? ncclSystemError : c->size != nranks ? ncclInvalidArgument
                                          : c->comm[rank] || c->ready ? ncclInvalidUsage
                                                                      : ncclSuccess;
    for (int q = 0; c && q < c->size && r == ncclSuccess; q++)
        if (c->comm[q] && c->comm[q]->cu == cu)
            r = ncclInvalidUsage; /* two ranks on one device */
    ncclComm_t comm = r == ncclSuccess ? calloc(1, sizeof *comm) : NULL;
    if (r == ncclSuccess && !comm)
        r = ncclSystemError;
    if (r != ncclSuccess) {
        if (c && c->members == 0)
            clique_free(c);
        pthread_mutex_unlock(&lock);
        return r;
    }
    comm->c = c;
    comm->rank = rank;
    comm->size = nranks;
    comm->cu = cu;
    c->comm[rank] = comm;
    c->members++;
    live_comms++;
    if (++c->joined == c->size && !c->broken) { /* broken: a rank left before all joined */
        c->ready = 1;
        /* the ranks' arena allocations from here on line up (ncclMemAlloc) */
        size_t next = 0;
        for (int q = 0; q < c->size; q++)
            if (arena_next[fake_cuda_device_of(c->comm[q]->cu)] > next)
                next = arena_next[fake_cuda_device_of(c->comm[q]->cu)];
        for (int q = 0; q < c->size; q++)
            arena_next[fake_cuda_device_of(c->comm[q]->cu)] = next;
        pthread_cond_broadcast(&changed);
    }
    wait_for(c, comm_ready, "ncclCommInitRank", rank);
    pthread_mutex_unlock(&lock);
    *out = comm;
    return ncclSuccess;
}

static int no_work(const void *comm)
{
    return ((const struct ncclComm *)comm)->outstanding == 0;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    pthread_mutex_lock(&lock);
    wait_for(comm, no_work, "ncclCommDestroy", comm->rank); /* NCCL's waits for the enqueued work */
    leave(comm);
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm || !count)
        return ncclInvalidArgument;
    *count = comm->size;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

/* Enqueues p now, or at the end of the thread's open group. */
static ncclResult_t call(const char *name, const pending_t *p)
{
    ncclResult_t r = !p->comm ? ncclInvalidArgument
                     : p->kind != P_ALLGATHER && (p->peer < 0 || p->peer >= p->comm->size) ? ncclInvalidArgument
                     : injected(name) ? ncclSystemError
                                      : ncclSuccess;
    if (r != ncclSuccess) {
        if (group_depth && group_error == ncclSuccess)
            group_error = r; /* NCCL's group then fails as a whole */
        return r;
    }
    if (group_depth) {
        pending_t *q = malloc(sizeof *q);
        if (!q)
            return ncclSystemError;
        *q = *p;
        q->next = NULL;
        pending_t **tail = &group_head;
        while (*tail)
            tail = &(*tail)->next;
        *tail = q;
        return ncclSuccess;
    }
    pthread_mutex_lock(&lock);
    post(p);
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream)
{
    (void)stream;
    if (type != ncclUint8 && type != ncclInt8)
        return ncclInvalidArgument; /* the runtime moves bytes */
    const pending_t p = {P_ALLGATHER, comm, send, recv, count, 0, NULL};
    return call("ncclAllGather", &p);
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    (void)stream;
    if (type != ncclUint8 && type != ncclInt8)
        return ncclInvalidArgument;
    const pending_t p = {P_SEND, comm, send, NULL, count, peer, NULL};
    return call("ncclSend", &p);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    if (type != ncclUint8 && type != ncclInt8)
        return ncclInvalidArgument;
    const pending_t p = {P_RECV, comm, NULL, recv, count, peer, NULL};
    return call("ncclRecv", &p);
}

/* nccl.h declares these two without a prototype */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

ncclResult_t ncclGroupStart(void)
{
    if (injected("ncclGroupStart"))
        return ncclSystemError;
    if (group_depth++ == 0)
        group_error = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0)
        return ncclInvalidUsage;
    if (--group_depth > 0)
        return ncclSuccess;
    group_ends++;
    ncclResult_t r = group_error != ncclSuccess ? group_error : injected("ncclGroupEnd") ? ncclSystemError
                                                                                          : ncclSuccess;
    pthread_mutex_lock(&lock);
    while (group_head) {
        pending_t *p = group_head;
        group_head = p->next;
        if (r == ncclSuccess)
            post(p);
        free(p);
    }
    pthread_mutex_unlock(&lock);
    group_error = ncclSuccess;
    return r;
}

/* The arena: MAX_RANKS slices of 4 GiB of address space, reserved without memory, made usable as
 * allocated. */
static char *arena_get(void)
{
    if (!arena) {
        void *a = mmap(NULL, MAX_RANKS * SLICE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        arena = a == MAP_FAILED ? NULL : a;
    }
    return arena;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    const int dev = fake_cuda_device_of(fake_cuda_current());
    if (!ptr || !size)
        return ncclInvalidArgument;
    if (dev < 0)
        return ncclUnhandledCudaError;
    if (injected("ncclMemAlloc"))
        return ncclSystemError;
    const size_t bytes = (size + 4095) / 4096 * 4096;
    mem_t *m = malloc(sizeof *m);
    pthread_mutex_lock(&lock);
    char *a = arena_get();
    ncclResult_t r = !m || !a || arena_next[dev] + bytes > SLICE ? ncclSystemError : ncclSuccess;
    if (r == ncclSuccess) {
        m->p = a + (size_t)dev * SLICE + arena_next[dev];
        m->bytes = bytes;
        if (mprotect(m->p, bytes, PROT_READ | PROT_WRITE) != 0) {
            r = ncclSystemError;
        } else {
            arena_next[dev] += bytes;
            m->next = mems;
            mems = m;
            live_mem++;
            *ptr = m->p;
        }
    }
    pthread_mutex_unlock(&lock);
    if (r != ncclSuccess)
        free(m);
    return r;
}

ncclResult_t ncclMemFree(void *ptr)
{
    mem_t *found = NULL;
    pthread_mutex_lock(&lock);
    for (mem_t **m = &mems; *m; m = &(*m)->next)
        if ((*m)->p == ptr) {
            found = *m;
            *m = found->next;
            live_mem--;
            break;
        }
    if (!found)
        bad_frees++;
    pthread_mutex_unlock(&lock);
    if (!found)
        return ncclInvalidArgument;
    /* the address space stays reserved (and unused: the arena only grows); the memory goes back */
    madvise(found->p, found->bytes, MADV_DONTNEED);
    mprotect(found->p, found->bytes, PROT_NONE);
    free(found);
    return ncclSuccess;
}

static int registered(const void *comm)
{
    return !((const struct ncclComm *)comm)->reg_waiting;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int flags)
{
    (void)flags;
    if (!comm || !buff || !size || !win)
        return ncclInvalidArgument;
    *win = NULL;
    if (injected("ncclCommWindowRegister"))
        return ncclSystemError;
    pthread_mutex_lock(&lock);
    clique_t *c = comm->c;
    slot_t *s = slot_of(c, 1, comm->reg_seq++);
    s->recv[comm->rank] = buff;
    s->win_out[comm->rank] = win;
    comm->reg_waiting = 1; /* host work of the ranks (no stream's): register_windows clears it */
    if (++s->posted == c->size && !c->broken) {
        register_windows(c, s);
        slot_free(c, s);
        pthread_cond_broadcast(&changed);
    }
    wait_for(comm, registered, "ncclCommWindowRegister", comm->rank);
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    if (!comm)
        return ncclInvalidArgument;
    if (injected("ncclCommWindowDeregister"))
        return ncclSystemError;
    ncclResult_t r = ncclInvalidArgument;
    pthread_mutex_lock(&lock);
    for (window_t **w = &comm->windows; *w; w = &(*w)->next)
        if (*w == (window_t *)win) {
            window_t *gone = *w;
            *w = gone->next;
            free(gone);
            live_windows--;
            r = ncclSuccess;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}
