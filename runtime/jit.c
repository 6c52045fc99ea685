/* JIT: NVRTC compiles each kernel of a configuration for the device (in parallel threads), with a
 * disk cache of cubins keyed by the SHA-256 of everything that changes the code. Cache entries are
 * written to a temporary file and renamed; each carries the SHA-256 of its payload, so a truncated
 * or corrupt entry is detected on load, reported, and rebuilt. A missed entry is compiled under an
 * exclusive lock on "<entry>.lock", so that creators of the same configuration at once (DCP ranks
 * in threads of one process, or rank processes of one node) compile each module once. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dsa_digest.h"
#include "jit.h"

/* Entry: magic, the 32-byte key it was compiled for, SHA-256 of the payload, payload length (u64),
 * payload (the cubin). The key check catches an entry of another NVRTC version or other options
 * that was copied or renamed into place; the payload hash catches truncation and bit flips. */
#define CACHE_MAGIC "DSACUBIN2\n"
#define MAGIC_LEN 10

/* How long a job waits for another creator's compile of the same entry before compiling it too:
 * longer than any one module takes to compile on a loaded machine, short enough that a holder
 * that hangs (stopped, not dead: the kernel releases a dead one's lock) only delays us. */
double dsa_jit_lock_wait_ms = 5 * 60 * 1000;

typedef struct job {
    const dsa_cfg_t *cfg;
    const char *target;
    int log_level;
    const dsa_module_desc_t *k;
    const char *headers[DSA_MAX_HEADERS + 1];
    const char *names[DSA_MAX_HEADERS + 1];
    int nheaders; /* config.h, then the library's */
    char opts_arch[64];
    const char *opts[5];
    int nopts;
    unsigned char key[32];
    char path[4096];
    char *cubin;
    size_t cubin_len;
    dsa_kernel_info_t info;
    int nentries;
    dsa_jit_entry_t entries[DSA_JIT_MAX_ENTRIES];
    dsa_result_t rc;
    char *err; /* malloc'd message when rc != success */
} job_t;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static __attribute__((format(printf, 2, 3))) void job_fail(job_t *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = dsa_malloc(DSA_ERRLEN);
    if (m)
        vsnprintf(m, DSA_ERRLEN, fmt, ap);
    va_end(ap);
    free(j->err);
    j->err = m;
}

/* Whether this NVRTC keeps a cache of its own (12.9 on), which --no-cache turns off. */
static int nvrtc_caches(void)
{
    int major = 0, minor = 0;
    dsa_nvrtc.nvrtcVersion(&major, &minor);
    return major > 12 || (major == 12 && minor >= 9);
}

/* The key: source, every header with its name, options, target and NVRTC version. 0, or -1 where
 * libcrypto fails (the key then means nothing, and the module is compiled without the cache). */
static int make_key(job_t *j, int nheaders)
{
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    int ok = h && EVP_DigestInit_ex(h, EVP_sha256(), NULL) == 1;
    int major = 0, minor = 0;
    dsa_nvrtc.nvrtcVersion(&major, &minor);
    char ver[64];
    snprintf(ver, sizeof ver, "nvrtc %d.%d\n", major, minor);
    ok = ok && EVP_DigestUpdate(h, ver, strlen(ver)) == 1;
    ok = ok && EVP_DigestUpdate(h, j->k->source.text, *j->k->source.len) == 1;
    for (int i = 0; ok && i < nheaders; i++)
        ok = EVP_DigestUpdate(h, j->names[i], strlen(j->names[i]) + 1) == 1 &&
             EVP_DigestUpdate(h, j->headers[i], strlen(j->headers[i]) + 1) == 1;
    for (int i = 0; ok && i < j->nopts; i++)
        ok = EVP_DigestUpdate(h, j->opts[i], strlen(j->opts[i]) + 1) == 1;
    unsigned n = 32;
    ok = ok && EVP_DigestFinal_ex(h, j->key, &n) == 1 && n == 32;
    EVP_MD_CTX_free(h);
    return ok ? 0 : -1;
}

/* A verified cache entry, or NULL (missing: silently; damaged: with report, reported and removed,
 * then rebuilt; without, silently, left for the look under the entry's lock to report and remove:
 * there no other creator is storing it, so the entry removed is the damaged one, not one another
 * creator has just renamed into place). */
static char *cache_load(job_t *j, size_t *len, int report)
{
    /* O_NONBLOCK: a FIFO in the entry's place must not block the open (cache_lock's rule); only a
     * regular file is read, anything else is left alone as missing */
    const int fd = open(j->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    FILE *f = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "rb") : NULL;
    if (!f) {
        close(fd);
        return NULL;
    }
    char head[MAGIC_LEN + 32 + 32 + 8];
    char *payload = NULL;
    const char *why = NULL;
    uint64_t n = 0;
    if (fread(head, 1, sizeof head, f) != sizeof head || memcmp(head, CACHE_MAGIC, MAGIC_LEN) != 0) {
        why = "bad header";
    } else if (memcmp(head + MAGIC_LEN, j->key, 32) != 0) {
        why = "compiled for another key: another NVRTC version, options or source";
    } else {
        memcpy(&n, head + MAGIC_LEN + 64, 8);
        payload = n <= ((uint64_t)1 << 30) ? dsa_malloc(n ? n : 1) : NULL;
        if (!payload && n <= ((uint64_t)1 << 30)) {
            fclose(f);
            return NULL; /* out of memory: compile instead, and keep the entry */
        }
        if (!payload || fread(payload, 1, n, f) != n || fgetc(f) != EOF) {
            why = "truncated or too long";
        } else {
            unsigned char h[32];
            if (dsa_sha256(payload, n, h) != 0) { /* nothing known about the entry: compile, keep it */
                free(payload);
                fclose(f);
                return NULL;
            }
            if (memcmp(h, head + MAGIC_LEN + 32, 32) != 0)
                why = "checksum mismatch";
        }
    }
    fclose(f);
    if (why) {
        free(payload);
        if (!report)
            return NULL;
        dsa_log(j->log_level, DSA_LOG_WARN, "JIT cache entry %s is unusable (%s): removed, recompiling", j->path,
                why);
        unlink(j->path);
        return NULL;
    }
    *len = n;
    return payload;
}

static void cache_store(job_t *j)
{
    unsigned char h[32];
    if (dsa_sha256(j->cubin, j->cubin_len, h) != 0) { /* no checksum, no entry */
        dsa_log(j->log_level, DSA_LOG_WARN, "libcrypto could not checksum JIT cache entry %s: not stored", j->path);
        return;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lu", j->path, (long)getpid(), (unsigned long)pthread_self());
    /* a new file, never one found at that name: a FIFO there would block the store (with the entry's
     * lock held), a symbolic link would have it truncate whatever it points to. What is there (a
     * leftover of a process whose pid and thread id this one has again, or a plant) is removed, once. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    uint64_t n = j->cubin_len;
    int ok = f && fwrite(CACHE_MAGIC, 1, MAGIC_LEN, f) == MAGIC_LEN && fwrite(j->key, 1, 32, f) == 32 &&
             fwrite(h, 1, 32, f) == 32 &&
             fwrite(&n, 1, 8, f) == 8 && fwrite(j->cubin, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, j->path) != 0) {
        dsa_log(j->log_level, DSA_LOG_WARN, "cannot write JIT cache entry %s: %s (continuing without it)", j->path,
                strerror(errno));
        unlink(tmp);
    }
}

/* An exclusive lock on "<entry>.lock" for the compile and store of a missed entry, as a file
 * descriptor, or -1 to go on without one (the file cannot be opened or locked, or another creator
 * held it past dsa_jit_lock_wait_ms: then we compile as if there were no lock, and the atomic
 * rename of cache_store keeps the entry whole whoever stores last).
 * flock, not fcntl: its lock belongs to the open file description, so two jobs of one process
 * (in-process DCP ranks), each with its own open(), exclude each other, where fcntl's per-process
 * locks would let both through; and the kernel releases it when its holder dies, so a crashed
 * creator leaves no stale lock, only the empty file. The file stays: removing it races (a waiter
 * holding the removed inode and a newcomer locking a new file would both compile), and an empty
 * file beside each entry costs nothing. Opened for writing where it can be: Linux emulates flock
 * over NFS with byte-range locks, and an exclusive one needs a writable descriptor there.
 * O_NONBLOCK: a FIFO in its place must not block the open; anything but a regular file is not
 * used. Polled, not waited on, so that the wait is bounded. */
static int cache_lock(job_t *j)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.lock", j->path);
    int fd = open(path, O_RDWR | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EACCES) /* another user's lock file: flock needs no write access, but NFS does */
        fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    if (why) {
        dsa_log(j->log_level, DSA_LOG_INFO, "cannot use JIT cache lock %s: %s (compiling without it)", path, why);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    double deadline = now_ms() + dsa_jit_lock_wait_ms;
    long pause_us = 1000;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK) {
            dsa_log(j->log_level, DSA_LOG_INFO, "cannot lock JIT cache lock %s: %s (compiling without it)", path,
                    strerror(errno));
            close(fd);
            return -1;
        }
        if (now_ms() >= deadline) {
            dsa_log(j->log_level, DSA_LOG_WARN,
                    "JIT cache entry %s: another process or context has held its lock for %.3g s; compiling "
                    "kernel %s here as well",
                    j->path, dsa_jit_lock_wait_ms / 1e3, j->k->name);
            close(fd);
            return -1;
        }
        /* the other creator's compile takes seconds: a millisecond to start, up to 50 between looks */
        nanosleep(&(struct timespec){0, pause_us * 1000}, NULL);
        pause_us = pause_us < 25000 ? pause_us * 2 : 50000;
    }
    return fd;
}

/* Explicitly unlocked before the close: a child forked meanwhile shares the open file
 * description, and its copy of the descriptor would otherwise keep the lock held. */
static void cache_unlock(int fd)
{
    if (fd < 0)
        return;
    flock(fd, LOCK_UN);
    close(fd);
}

static int number_before(const char *log, const char *p)
{
    while (p > log && p[-1] == ' ')
        p--;
    while (p > log && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return atoi(p);
}

int dsa_jit_parse_entries(const char *log, dsa_jit_entry_t *e)
{
    static const char open[] = "Compiling entry function '";
    int n = 0;
    for (const char *s = strstr(log, open); s && n < DSA_JIT_MAX_ENTRIES; s = strstr(s, open)) {
        s += strlen(open);
        const char *q = strchr(s, '\'');
        if (!q)
            break;
        dsa_jit_entry_t *x = &e[n++];
        memset(x, 0, sizeof *x);
        snprintf(x->name, sizeof x->name, "%.*s", (int)(q - s), s);
        const char *end = strstr(q, open), *p; /* this entry's lines end where the next entry's begin */
        if ((p = strstr(q, "Used ")) && (!end || p < end)) {
            x->registers = atoi(p + 5);
            const char *eol = strchr(p, '\n'), *sm = strstr(p, "bytes smem");
            if (sm && (!eol || sm < eol))
                x->shared_bytes = number_before(log, sm);
        }
        if ((p = strstr(q, "bytes stack frame")) && (!end || p < end))
            x->stack_bytes = number_before(log, p);
        if ((p = strstr(q, "bytes spill stores")) && (!end || p < end))
            x->spill_bytes = number_before(log, p);
        s = q;
    }
    /* "(C7514) Potential ... in the function '<name>'": ptxas prints these lines apart from the
     * entry's own, naming it; the code is the number before ") " (1 where there is none) */
    static const char perf[] = "Potential Performance Loss: wgmma.mma_async instructions are serialized";
    static const char fn[] = "in the function '";
    for (const char *p = strstr(log, perf); p; p = strstr(p + 1, perf)) {
        const char *eol = strchr(p, '\n'), *f = strstr(p, fn);
        if (!f || (eol && f > eol))
            continue;
        f += strlen(fn);
        const char *q = strchr(f, '\'');
        const int code = p - log >= 2 && p[-2] == ')' ? number_before(log, p - 2) : 0;
        for (int i = 0; q && i < n; i++)
            if (strlen(e[i].name) == (size_t)(q - f) && !strncmp(e[i].name, f, (size_t)(q - f)))
                e[i].wgmma_serialized = code > 0 ? code : 1;
    }
    return n;
}

/* The module's own entry function among those ptxas reported (dsa_jit_parse_entries): its registers,
 * static shared memory and local memory (stack frame and spill stores) into info; 0 when it is
 * not among them. Used where no GPU loads it. */
static int entry_info(const dsa_jit_entry_t *e, int n, const char *entry, dsa_kernel_info_t *info)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].name, entry)) {
            info->registers = e[i].registers;
            info->shared_bytes = e[i].shared_bytes;
            info->local_bytes = e[i].stack_bytes + e[i].spill_bytes;
            return 1;
        }
    return 0;
}

/* The NVRTC log with numbered source lines around each error location "file(line): error". */
static void explain_failure(job_t *j, const char *log)
{
    size_t cap = DSA_ERRLEN, len = 0;
    char *m = dsa_malloc(cap);
    if (!m)
        return;
    len += (size_t)snprintf(m + len, cap - len, "kernel %s (%s) of %s did not compile\noptions:", j->k->name,
                            j->k->source.name, j->cfg->info.name);
    for (int i = 0; i < j->nopts && len < cap; i++)
        len += (size_t)snprintf(m + len, cap - len, " %s", j->opts[i]);
    if (len < cap)
        len += (size_t)snprintf(m + len, cap - len, "\nNVRTC log:\n%s", log);
    const char *e = strstr(log, "): error");
    if (e && len < cap) {
        const char *open = e;
        while (open > log && *open != '(')
            open--;
        int line = atoi(open + 1);
        const char *name = open;
        while (name > log && name[-1] != '\n')
            name--;
        const char *text = j->k->source.text;
        for (int i = 0; i < j->nheaders; i++)
            if (j->names[i] && strncmp(name, j->names[i], strlen(j->names[i])) == 0)
                text = j->headers[i];
        len += (size_t)snprintf(m + len, cap - len, "source around %.*s:%d:\n", (int)(open - name), name, line);
        int n = 1;
        for (const char *s = text; *s && len < cap; n++) {
            const char *nl = strchr(s, '\n');
            int l = nl ? (int)(nl - s) : (int)strlen(s);
            if (n >= line - 3 && n <= line + 3)
                len += (size_t)snprintf(m + len, cap - len, "%s%5d | %.*s\n", n == line ? ">" : " ", n, l, s);
            s += l + (nl ? 1 : 0);
        }
    }
    free(j->err);
    j->err = m;
}

static void *compile_job(void *arg)
{
    job_t *j = arg;
    double t0 = now_ms();
    nvrtcProgram prog = NULL;
    char *log = NULL;
    nvrtcResult r = dsa_nvrtc.nvrtcCreateProgram(&prog, j->k->source.text, j->k->source.name, j->nheaders,
                                                 j->headers, j->names);
    if (r != NVRTC_SUCCESS) {
        j->rc = DSA_ERROR_NVRTC;
        job_fail(j, "nvrtcCreateProgram for kernel %s failed: %s", j->k->name, dsa_nvrtc.nvrtcGetErrorString(r));
        return NULL;
    }
    nvrtcResult cr = dsa_nvrtc.nvrtcCompileProgram(prog, j->nopts, j->opts);
    size_t loglen = 0;
    dsa_nvrtc.nvrtcGetProgramLogSize(prog, &loglen);
    log = dsa_malloc(loglen + 1);
    if (log) {
        log[0] = '\0';
        dsa_nvrtc.nvrtcGetProgramLog(prog, log);
    }
    if (cr != NVRTC_SUCCESS) {
        j->rc = DSA_ERROR_NVRTC;
        explain_failure(j, log ? log : "(no log)");
    } else if (log && (j->nentries = dsa_jit_parse_entries(log, j->entries),
                       !entry_info(j->entries, j->nentries, j->k->entry, &j->info))) {
        /* the module's own entry is what the local-memory check reads: never pass it unread */
        j->rc = DSA_ERROR_NVRTC;
        job_fail(j, "kernel %s: ptxas reported no entry function %s (%d entries read, at most %d)", j->k->name,
                 j->k->entry, j->nentries, DSA_JIT_MAX_ENTRIES);
    } else {
        for (int e = 0; e < j->nentries; e++) /* correct, but slow: say so where the kernel is built */
            if (j->entries[e].wgmma_serialized)
                dsa_log(j->log_level, DSA_LOG_WARN,
                        "kernel %s: ptxas serialized the warpgroup MMAs of %s (C%d): several times slower", j->k->name,
                        j->entries[e].name, j->entries[e].wgmma_serialized);
        size_t n = 0;
        dsa_nvrtc.nvrtcGetCUBINSize(prog, &n);
        j->cubin = dsa_malloc(n ? n : 1);
        if (!j->cubin || dsa_nvrtc.nvrtcGetCUBIN(prog, j->cubin) != NVRTC_SUCCESS) {
            j->rc = j->cubin ? DSA_ERROR_NVRTC : DSA_ERROR_OUT_OF_MEMORY;
            job_fail(j, "cannot get the cubin of kernel %s", j->k->name);
        } else {
            j->cubin_len = n;
        }
    }
    free(log);
    dsa_nvrtc.nvrtcDestroyProgram(&prog);
    j->info.compile_ms = now_ms() - t0;
    return NULL;
}

/* A module the cache did not have (or no cache): with a cache, under the entry's lock, looked up
 * again (another creator may have stored it while we waited), else compiled and stored before the
 * lock is released, so that the creators waiting on it find it. */
static void *build_job(void *arg)
{
    job_t *j = arg;
    if (!j->path[0])
        return compile_job(j);
    double t0 = now_ms();
    int fd = cache_lock(j);
    j->cubin = cache_load(j, &j->cubin_len, 1);
    if (j->cubin) {
        j->info.from_cache = 1;
        j->info.compile_ms = now_ms() - t0; /* the wait included: what the creator spent on it */
    } else {
        compile_job(j);
        if (j->rc == DSA_SUCCESS)
            cache_store(j);
    }
    cache_unlock(fd);
    return NULL;
}

static int make_dirs(const char *dir)
{
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", dir) >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            if (!c)
                break;
            *p = c;
        }
    }
    return access(dir, W_OK) == 0 ? 0 : -1;
}

/* The cache folder (given, $DSA_CACHE_DIR, or $HOME/.cache/dsagen) in buf, "" for none; -1 where
 * its path does not fit buf (never a cut path: that would be another folder). */
static int default_cache_dir(char *buf, size_t n, const char *given)
{
    const char *cd = given ? given : getenv("DSA_CACHE_DIR");
    int len = 0;
    if (cd)
        len = snprintf(buf, n, "%s", cd);
    else if (getenv("HOME"))
        len = snprintf(buf, n, "%s/.cache/dsagen", getenv("HOME"));
    else
        buf[0] = '\0';
    if (len < 0 || (size_t)len >= n) {
        buf[0] = '\0';
        return -1;
    }
    return 0;
}

/* The target reaches NVRTC's options and the cache's file names: sm_ and 1..12 lower-case letters or
 * digits. */
int dsa_target_ok(const char *target)
{
    size_t tl = target ? strlen(target) : 0;
    return tl >= 4 && tl <= 15 && strncmp(target, "sm_", 3) == 0 &&
           strspn(target + 3, "0123456789abcdefghijklmnopqrstuvwxyz") == tl - 3;
}

dsa_result_t dsa_jit_compile(const dsa_cfg_t *cfg, const char *target, const char *cache_dir, int log_level,
                             dsa_jit_out_t *out, char *err, size_t errlen)
{
    dsa_result_t rc = DSA_SUCCESS;
    if (dsa_headers_count > DSA_MAX_HEADERS) {
        snprintf(err, errlen, "the kernel library has %d headers, the JIT takes %d", dsa_headers_count,
                 DSA_MAX_HEADERS);
        return DSA_ERROR_INTERNAL;
    }
    if (!dsa_target_ok(target)) {
        char safe[37]; /* 32 characters at most */
        snprintf(err, errlen, "target '%s' is not an architecture like sm_90a",
                 target ? dsa_escape(target, safe, sizeof safe) : "(null)");
        return DSA_ERROR_INVALID_ARGUMENT;
    }
    if (dsa_load_nvrtc(err, errlen) != 0)
        return DSA_ERROR_NVRTC;
    job_t *jobs = dsa_calloc((size_t)DSA_NMODULES, sizeof *jobs);
    pthread_t *th = dsa_calloc((size_t)DSA_NMODULES, sizeof *th);
    int *started = dsa_calloc((size_t)DSA_NMODULES, sizeof *started);
    if (!jobs || !th || !started) {
        snprintf(err, errlen, "out of host memory");
        rc = DSA_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    char dir[4096];
    if (default_cache_dir(dir, sizeof dir, cache_dir) != 0)
        dsa_log(log_level, DSA_LOG_WARN, "JIT cache folder path is longer than %zu bytes: compiling in memory",
                sizeof dir - 1);
    if (dir[0] && make_dirs(dir) != 0) {
        dsa_log(log_level, DSA_LOG_WARN, "JIT cache folder %s is not writable (%s): compiling in memory", dir,
                strerror(errno));
        dir[0] = '\0';
    }
    /* compute-sanitizer's racecheck misreads barrier.arrive (a warp-specialised loop's producer side
     * of a named barrier): with DSA_SANITIZE_BARRIERS set (not "0") the kernels arrive by
     * barrier.sync instead, the same order and a wait, so that racecheck checks the rest
     * (tests/gpu/run.sh sanitize) */
    const char *sanitize_env = getenv("DSA_SANITIZE_BARRIERS");
    const int sanitize = sanitize_env && strcmp(sanitize_env, "0") != 0;
    for (int i = 0; i < DSA_NMODULES; i++) {
        job_t *j = &jobs[i];
        j->cfg = cfg;
        j->target = target;
        j->log_level = log_level;
        j->k = &cfg->modules[i];
        j->info.name = j->k->name;
        j->headers[0] = cfg->config_h.text;
        j->names[0] = "config.h";
        for (int h = 0; h < dsa_headers_count; h++) {
            j->headers[h + 1] = dsa_headers[h].text;
            j->names[h + 1] = dsa_headers[h].name;
        }
        j->nheaders = dsa_headers_count + 1;
        snprintf(j->opts_arch, sizeof j->opts_arch, "--gpu-architecture=%s", target);
        j->opts[0] = j->opts_arch;
        j->opts[1] = "-std=c++17";
        j->opts[2] = "--ptxas-options=-v";
        j->nopts = 3;
        if (sanitize)
            j->opts[j->nopts++] = "-DDSA_SANITIZE_BARRIERS";
        /* NVRTC 12.9 on keeps its own cache of compiled programs, across processes: a hit skips
         * ptxas, whose report (registers, shared and local memory of each entry) the module's
         * checks read, so the module would fail to compile. Ours (above) is what caches here. */
        if (nvrtc_caches())
            j->opts[j->nopts++] = "--no-cache";
        char key[65] = "";
        const int keyed = make_key(j, j->nheaders) == 0;
        if (keyed) /* its hex names the cache entry, which an unkeyed module does not have */
            dsa_hex(j->key, 32, key);
        /* a warm cache is read without the lock (entries are only ever renamed into place): no
         * lock file is made unless a module must be built */
        /* an entry's path, its lock's and its temporary file's (cache_lock, cache_store: 4200 bytes,
         * 64 more than the entry's at most) fit, or the module is compiled without the cache */
        if (dir[0] && !keyed) {
            dsa_log(log_level, DSA_LOG_WARN, "libcrypto could not compute the JIT cache key of %s: compiling it in memory",
                    j->k->name);
            j->path[0] = '\0';
        } else if (dir[0] && (size_t)snprintf(j->path, sizeof j->path, "%s/%s.%s.%s.%.16s.cubin", dir, cfg->info.name,
                                              j->k->name, target, key) >= sizeof j->path) {
            dsa_log(log_level, DSA_LOG_WARN, "JIT cache entry path in %s is longer than %zu bytes: compiling %s in memory",
                    dir, sizeof j->path - 1, j->k->name);
            j->path[0] = '\0';
        }
        if (j->path[0]) {
            double t0 = now_ms();
            j->cubin = cache_load(j, &j->cubin_len, 0);
            if (j->cubin) {
                j->info.from_cache = 1;
                j->info.compile_ms = now_ms() - t0;
                continue;
            }
        }
        started[i] = pthread_create(&th[i], NULL, build_job, j) == 0;
        if (!started[i])
            build_job(j);
    }
    for (int i = 0; i < DSA_NMODULES; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    for (int i = 0; i < DSA_NMODULES; i++) {
        job_t *j = &jobs[i];
        if (j->rc != DSA_SUCCESS) {
            snprintf(err, errlen, "%s", j->err ? j->err : "kernel compilation failed");
            rc = j->rc;
            goto done;
        }
        j->info.cubin_bytes = j->cubin_len;
        dsa_log(log_level, DSA_LOG_INFO, "%s: kernel %s %s in %.1f ms, %zu-byte cubin", cfg->info.name, j->k->name,
                j->info.from_cache ? "loaded from cache" : "compiled", j->info.compile_ms, j->cubin_len);
    }
    for (int i = 0; i < DSA_NMODULES; i++) {
        out[i].cubin = jobs[i].cubin;
        out[i].len = jobs[i].cubin_len;
        out[i].info = jobs[i].info;
        out[i].nentries = jobs[i].nentries;
        memcpy(out[i].entries, jobs[i].entries, sizeof out[i].entries);
        jobs[i].cubin = NULL;
    }
done:
    for (int i = 0; jobs && i < DSA_NMODULES; i++) {
        free(jobs[i].cubin);
        free(jobs[i].err);
    }
    free(jobs);
    free(th);
    free(started);
    return rc;
}
