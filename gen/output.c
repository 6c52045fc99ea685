/* Staged, all-or-nothing output: write only what changed, through temporary files and rename. */
#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox.h"

int dsg_out_add(dsg_outset *o, const char *path, char *data, size_t len)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 16;
        dsg_file *f = realloc(o->files, cap * sizeof *f);
        if (!f)
            return -1;
        o->files = f;
        o->cap = cap;
    }
    char *p = strdup(path);
    if (!p)
        return -1;
    o->files[o->n++] = (dsg_file){p, data, len};
    return 0;
}

void dsg_out_free(dsg_outset *o)
{
    for (size_t i = 0; i < o->n; i++) {
        free(o->files[i].path);
        free(o->files[i].data);
    }
    free(o->files);
    memset(o, 0, sizeof *o);
}

typedef struct created {
    char **dirs;
    size_t n, cap;
} created;

/* mkdir -p for the folder holding path, remembering each folder made so a failure can undo it. */
static int make_parents(const char *path, created *c, dsg_diag *d)
{
    char buf[4096];
    if (strlen(path) >= sizeof buf) {
        dsg_error(d, NULL, 0, "path too long: '%s'", path);
        return -1;
    }
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        struct stat st;
        if (stat(buf, &st) != 0) {
            if (mkdir(buf, 0777) != 0) {
                dsg_error(d, NULL, 0, "cannot create folder '%s': %s", buf, strerror(errno));
                return -1;
            }
            if (c->n == c->cap) {
                size_t cap = c->cap ? 2 * c->cap : 16;
                char **dirs = realloc(c->dirs, cap * sizeof *dirs);
                if (!dirs)
                    return -1;
                c->dirs = dirs;
                c->cap = cap;
            }
            c->dirs[c->n++] = strdup(buf);
        } else if (!S_ISDIR(st.st_mode)) {
            dsg_error(d, NULL, 0, "cannot create folder '%s': a file of that name exists", buf);
            return -1;
        }
        *p = '/';
    }
    return 0;
}

static int same_content(const dsg_file *f)
{
    size_t len;
    char *old = dsg_read_file(f->path, f->len, &len);
    int same = old && len == f->len && memcmp(old, f->data, len) == 0;
    free(old);
    return same;
}

static void tmp_name(char *buf, size_t n, const char *path)
{
    snprintf(buf, n, "%s.tmp.%ld", path, (long)getpid());
}

int dsg_out_commit(dsg_outset *o, int *written, dsg_diag *d)
{
    created c = {0};
    char *changed = calloc(o->n ? o->n : 1, 1);
    size_t staged = 0;
    int rc = -1;
    char tmp[4200];
    if (!changed) {
        dsg_error(d, NULL, 0, "out of memory");
        return -1;
    }
    for (; staged < o->n; staged++) {
        dsg_file *f = &o->files[staged];
        if (make_parents(f->path, &c, d) != 0)
            goto undo;
        if (same_content(f))
            continue;
        tmp_name(tmp, sizeof tmp, f->path);
        FILE *fp = fopen(tmp, "wb");
        if (!fp) {
            dsg_error(d, NULL, 0, "cannot write '%s': %s", f->path, strerror(errno));
            goto undo;
        }
        size_t n = fwrite(f->data, 1, f->len, fp);
        int e = errno;
        if (fclose(fp) != 0 || n != f->len) {
            dsg_error(d, NULL, 0, "cannot write '%s': %s", f->path, strerror(n != f->len ? e : errno));
            remove(tmp);
            goto undo;
        }
        changed[staged] = 1;
    }
    *written = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (!changed[i])
            continue;
        tmp_name(tmp, sizeof tmp, o->files[i].path);
        if (rename(tmp, o->files[i].path) != 0) {
            dsg_error(d, NULL, 0, "cannot replace '%s': %s", o->files[i].path, strerror(errno));
            remove(tmp);
        } else {
            ++*written;
        }
    }
    rc = d->errors ? -1 : 0;
    staged = 0; /* nothing left to undo */
undo:
    for (size_t i = 0; i < staged; i++) {
        if (changed[i]) {
            tmp_name(tmp, sizeof tmp, o->files[i].path);
            remove(tmp);
        }
    }
    for (size_t i = c.n; i-- > 0;) {
        if (rc != 0)
            rmdir(c.dirs[i]);
        free(c.dirs[i]);
    }
    free(c.dirs);
    free(changed);
    return rc;
}
