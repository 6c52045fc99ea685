/* Where plans come from: the folders embedded in libdsa for linked configurations (parsed once,
 * kept for the library's lifetime), and folders read at run time (regular files only, size-capped,
 * never a blocking open). Both go through dsa_plan_parse. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan.h"

#define PLAN_FILE "plan.txt"
#define MAX_FILE_BYTES (4 << 20) /* a plan or kernel source larger than this is not dsagen's */

void dsa_cfg_free(dsa_cfg_t *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < sizeof cfg->owned / sizeof cfg->owned[0]; i++)
        free(cfg->owned[i]);
    free(cfg);
}

/* ---- linked configurations: embedded files ---- */

static const dsa_source_t *embedded(const dsa_plan_t *plan, const char *name)
{
    for (int i = 0; i < plan->nfiles; i++)
        if (!strcmp(plan->files[i].name, name))
            return &plan->files[i];
    return NULL;
}

static dsa_result_t cfg_from_plan(const dsa_plan_t *plan, dsa_cfg_t **out, char *err, size_t errlen)
{
    char where[DSA_NAME_MAX + 32];
    snprintf(where, sizeof where, "plan.txt of %s", plan->name);
    if (plan->abi != DSA_PLAN_ABI) {
        snprintf(err, errlen, "%s: error: linked with plan ABI %d, this libdsa has %d", where, plan->abi, DSA_PLAN_ABI);
        return DSA_ERROR_INVALID_ARGUMENT;
    }
    const dsa_source_t *txt = embedded(plan, PLAN_FILE), *h = embedded(plan, "config.h");
    if (!txt || !h) {
        snprintf(err, errlen, "%s: error: the linked configuration lacks %s", where, txt ? "config.h" : PLAN_FILE);
        return DSA_ERROR_INVALID_ARGUMENT;
    }
    dsa_cfg_t *c = dsa_calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of host memory");
        return DSA_ERROR_OUT_OF_MEMORY;
    }
    dsa_result_t rc = dsa_plan_parse(where, txt->text, *txt->len, c, err, errlen);
    for (int i = 0; rc == DSA_SUCCESS && i < DSA_NMODULES; i++) {
        const dsa_source_t *s = embedded(plan, c->modules[i].file);
        if (!s) {
            snprintf(err, errlen, "%s: error: the linked configuration lacks %s", where, c->modules[i].file);
            rc = DSA_ERROR_INVALID_ARGUMENT;
        } else {
            c->modules[i].source = *s;
        }
    }
    if (rc == DSA_SUCCESS && strcmp(c->name, plan->name)) {
        snprintf(err, errlen, "%s: error: names configuration '%s'", where, c->name);
        rc = DSA_ERROR_INVALID_ARGUMENT;
    }
    c->config_h = *h;
    if (rc == DSA_SUCCESS)
        rc = dsa_plan_check_sources(where, c, err, errlen);
    if (rc != DSA_SUCCESS) {
        dsa_cfg_free(c);
        return rc;
    }
    *out = c;
    return DSA_SUCCESS;
}

static pthread_mutex_t linked_lock = PTHREAD_MUTEX_INITIALIZER;
#define MAX_LINKED 1024
static dsa_cfg_t *linked[MAX_LINKED];

const dsa_cfg_t *dsa_cfg_of_plan(const dsa_plan_t *plan, char *err, size_t errlen)
{
    int i = 0;
    while (i < MAX_LINKED && dsa_registry[i] && dsa_registry[i] != plan)
        i++;
    dsa_cfg_t *c = NULL;
    if (i == MAX_LINKED || !dsa_registry[i]) { /* linked by symbol but not in the registry: parse each time */
        snprintf(err, errlen, "configuration %s is not in this library's registry", plan->name);
        return NULL;
    }
    pthread_mutex_lock(&linked_lock);
    if (!linked[i] && cfg_from_plan(plan, &c, err, errlen) == DSA_SUCCESS)
        linked[i] = c;
    c = linked[i];
    pthread_mutex_unlock(&linked_lock);
    return c;
}

const dsa_cfg_t *dsa_cfg_linked(const char *config, char *err, size_t errlen)
{
    for (const dsa_plan_t *const *p = dsa_registry; *p; p++)
        if (!strcmp((*p)->name, config))
            return dsa_cfg_of_plan(*p, err, errlen);
    snprintf(err, errlen, "no configuration named '%s' in this library (dsa_configs() lists them)", config);
    return NULL;
}

/* ---- a generated folder read at run time ---- */

/* Reads dir/name: a regular file (not a FIFO or device; opened without blocking) of at most
 * MAX_FILE_BYTES, NUL-terminated. */
static dsa_result_t read_file(const char *dir, const char *name, char **text, size_t *len, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
        snprintf(err, errlen, "%s/%s: path too long", dir, name);
        return DSA_ERROR_INVALID_ARGUMENT;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    const int stat_ok = fd >= 0 && fstat(fd, &st) == 0; /* st is read only where fstat filled it */
    if (!stat_ok || !S_ISREG(st.st_mode) || st.st_size > MAX_FILE_BYTES) {
        snprintf(err, errlen, "%s: %s", path,
                 !stat_ok ? strerror(errno) : !S_ISREG(st.st_mode) ? "not a regular file" : "larger than 4 MiB");
        if (fd >= 0)
            close(fd);
        return DSA_ERROR_INVALID_ARGUMENT;
    }
    char *buf = dsa_malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != (size_t)st.st_size || memchr(buf, '\0', got)) {
        snprintf(err, errlen, "%s: %s", path, !buf ? "out of host memory" : got != (size_t)st.st_size
                                                                              ? "short read"
                                                                              : "contains a NUL byte");
        free(buf);
        return buf ? DSA_ERROR_INVALID_ARGUMENT : DSA_ERROR_OUT_OF_MEMORY;
    }
    buf[got] = '\0';
    *text = buf;
    *len = got;
    return DSA_SUCCESS;
}

dsa_result_t dsa_cfg_load_dir(const char *dir, dsa_cfg_t **out, char *err, size_t errlen)
{
    *out = NULL;
    dsa_cfg_t *c = dsa_calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of host memory");
        return DSA_ERROR_OUT_OF_MEMORY;
    }
    char where[PATH_MAX + 16];
    snprintf(where, sizeof where, "%s/" PLAN_FILE, dir);
    dsa_result_t rc = read_file(dir, PLAN_FILE, &c->owned[0], &c->owned_len[0], err, errlen);
    if (rc == DSA_SUCCESS)
        rc = dsa_plan_parse(where, c->owned[0], c->owned_len[0], c, err, errlen);
    if (rc == DSA_SUCCESS)
        rc = read_file(dir, "config.h", &c->owned[1], &c->owned_len[1], err, errlen);
    for (int i = 0; rc == DSA_SUCCESS && i < DSA_NMODULES; i++)
        rc = read_file(dir, c->modules[i].file, &c->owned[2 + i], &c->owned_len[2 + i], err, errlen);
    if (rc == DSA_SUCCESS) {
        c->config_h = (dsa_source_t){"config.h", c->owned[1], &c->owned_len[1]};
        for (int i = 0; i < DSA_NMODULES; i++)
            c->modules[i].source = (dsa_source_t){c->modules[i].file, c->owned[2 + i], &c->owned_len[2 + i]};
        rc = dsa_plan_check_sources(where, c, err, errlen);
    }
    if (rc != DSA_SUCCESS) {
        dsa_cfg_free(c);
        return rc;
    }
    *out = c;
    return DSA_SUCCESS;
}
