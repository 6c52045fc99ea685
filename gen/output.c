/* Staged, all-or-nothing output: write only what changed, through temporary files and rename. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
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
    o->files[o->n++] = (dsg_file){p, data, len, 0};
    return 0;
}

int dsg_out_add_touch(dsg_outset *o, const char *path, char *data, size_t len)
{
    if (dsg_out_add(o, path, data, len) != 0)
        return -1;
    o->files[o->n - 1].touch = 1;
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

/* mkdir -p for the folder holding path, remembering each folder made so a failure can undo it. A
 * folder that appears meanwhile (another generator creating the same OUTDIR) is fine. */
static int make_parents(const char *path, created *c, dsg_diag *d)
{
    char *buf = strdup(path);
    if (!buf) {
        dsg_error(d, NULL, 0, "out of memory");
        return -1;
    }
    int rc = 0;
    for (char *p = buf + 1; *p && rc == 0; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        struct stat st;
        if (stat(buf, &st) != 0) {
            if (mkdir(buf, 0777) == 0) {
                if (c->n == c->cap) {
                    size_t cap = c->cap ? 2 * c->cap : 16;
                    char **dirs = realloc(c->dirs, cap * sizeof *dirs);
                    if (!dirs) {
                        dsg_error(d, NULL, 0, "out of memory");
                        rc = -1;
                        break;
                    }
                    c->dirs = dirs;
                    c->cap = cap;
                }
                if (!(c->dirs[c->n] = strdup(buf))) {
                    dsg_error(d, NULL, 0, "out of memory");
                    rc = -1;
                    break;
                }
                c->n++;
            } else if (errno != EEXIST || stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
                dsg_error(d, NULL, 0, "cannot create folder '%s': %s", buf,
                          errno == EEXIST ? "a file of that name exists" : strerror(errno));
                rc = -1;
            }
        } else if (!S_ISDIR(st.st_mode)) {
            dsg_error(d, NULL, 0, "cannot create folder '%s': a file of that name exists", buf);
            rc = -1;
        }
        *p = '/';
    }
    free(buf);
    return rc;
}

static int same_content(const dsg_file *f)
{
    size_t len;
    char *old = dsg_read_file(f->path, f->len, &len);
    int same = old && len == f->len && memcmp(old, f->data, len) == 0;
    free(old);
    return same;
}

/* Temporary names beside the file (same folder, so rename is atomic), unique to this process;
 * .gitignore ignores *.tmp.*. */
static char *side_name(const char *path, const char *suffix)
{
    size_t n = strlen(path) + strlen(suffix) + 32;
    char *buf = malloc(n);
    if (buf)
        snprintf(buf, n, "%s.tmp.%ld%s", path, (long)getpid(), suffix);
    return buf;
}

static int write_all(const char *tmp, const dsg_file *f)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < f->len) {
        ssize_t k = write(fd, f->data + done, f->len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        done += (size_t)k;
    }
    return close(fd);
}

enum { NEW, LINKED, MOVED }; /* how the file a rename replaced was kept: none, hard link, moved */

typedef struct step {
    char *tmp, *old; /* the new content's temporary file, the replaced file's backup */
    int changed, kept, renamed;
} step;

int dsg_out_commit(dsg_outset *o, int *written, dsg_diag *d)
{
    created c = {0};
    step *st = calloc(o->n ? o->n : 1, sizeof *st);
    int rc = -1;
    *written = 0;
    if (!st) {
        dsg_error(d, NULL, 0, "out of memory");
        return -1;
    }
    /* 1: every changed file written to a temporary file beside it; nothing visible changes */
    for (size_t i = 0; i < o->n; i++) {
        dsg_file *f = &o->files[i];
        struct stat sb;
        if (make_parents(f->path, &c, d) != 0)
            goto undo;
        if (lstat(f->path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            dsg_error(d, NULL, 0, "cannot replace '%s': a folder of that name exists", f->path);
            goto undo;
        }
        if (!f->touch && same_content(f))
            continue;
        st[i].tmp = side_name(f->path, "");
        st[i].old = side_name(f->path, ".old");
        if (!st[i].tmp || !st[i].old) {
            dsg_error(d, NULL, 0, "out of memory");
            goto undo;
        }
        if (write_all(st[i].tmp, f) != 0) {
            dsg_error(d, NULL, 0, "cannot write '%s': %s", f->path, strerror(errno));
            remove(st[i].tmp);
            goto undo;
        }
        st[i].changed = 1;
    }
    /* 2: each file renamed into place, the one it replaces kept (a hard link; where the file
     * system has none, moved aside) until all are in place */
    for (size_t i = 0; i < o->n; i++) {
        if (!st[i].changed)
            continue;
        const char *path = o->files[i].path;
        struct stat sb;
        unlink(st[i].old); /* a stale one of a killed run with our pid */
        if (lstat(path, &sb) != 0) {
            st[i].kept = NEW;
        } else if (link(path, st[i].old) == 0) {
            st[i].kept = LINKED;
        } else if (rename(path, st[i].old) == 0) {
            st[i].kept = MOVED;
        } else {
            dsg_error(d, NULL, 0, "cannot replace '%s': %s", path, strerror(errno));
            goto undo;
        }
        if (rename(st[i].tmp, path) != 0) {
            dsg_error(d, NULL, 0, "cannot replace '%s': %s", path, strerror(errno));
            if (st[i].kept == MOVED)
                rename(st[i].old, path);
            else if (st[i].kept == LINKED)
                unlink(st[i].old);
            goto undo;
        }
        st[i].renamed = 1;
    }
    for (size_t i = 0; i < o->n; i++) {
        if (st[i].renamed) {
            ++*written;
            if (st[i].kept != NEW)
                unlink(st[i].old);
        }
    }
    rc = 0;
undo:
    /* on failure: every file renamed so far back to what it replaced, in reverse order */
    for (size_t i = o->n; i-- > 0;) {
        if (rc != 0 && st[i].renamed) {
            const char *path = o->files[i].path;
            if (st[i].kept == NEW ? unlink(path) != 0 : rename(st[i].old, path) != 0)
                dsg_error(d, NULL, 0, "cannot restore '%s' after a failed write: %s", path, strerror(errno));
        }
        if (rc != 0 && st[i].changed && !st[i].renamed)
            remove(st[i].tmp);
        free(st[i].tmp);
        free(st[i].old);
    }
    for (size_t i = c.n; i-- > 0;) {
        if (rc != 0)
            rmdir(c.dirs[i]);
        free(c.dirs[i]);
    }
    free(c.dirs);
    free(st);
    return rc;
}
