/* Staged output: every file is rendered into memory first; commit writes them all or none. */
#ifndef DSG_OUTPUT_H
#define DSG_OUTPUT_H

#include <stddef.h>

#include "diag.h"

typedef struct dsg_file {
    char *path;
    char *data;
    size_t len;
    int touch; /* written even when unchanged (a stamp: its mtime says when the run ended) */
} dsg_file;

typedef struct dsg_outset {
    dsg_file *files;
    size_t n, cap;
} dsg_outset;

/* Takes ownership of data (malloc'd). Returns -1 when out of memory. */
int dsg_out_add(dsg_outset *o, const char *path, char *data, size_t len);

/* The same, for a file written even when its content is unchanged. */
int dsg_out_add_touch(dsg_outset *o, const char *path, char *data, size_t len);

/* Writes every staged file whose content differs from what is on disk: each to a temporary name
 * beside it, and only when all of them were written are they renamed into place, in order, each
 * replaced file kept (a hard link) until the last rename succeeded. On failure the files renamed
 * so far are put back (the replaced ones by rename, so with their inodes; new ones removed), the
 * temporary files and any folders it created are removed, and nothing on disk has changed, unless
 * the process is killed midway (POSIX has no rename of several files at once). *written counts the
 * files that changed. */
int dsg_out_commit(dsg_outset *o, int *written, dsg_diag *d);

void dsg_out_free(dsg_outset *o);

#endif
