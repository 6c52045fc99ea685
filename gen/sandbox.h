/* The spec sandbox: runs a spec file as data in an empty Lua environment with bounded memory and
 * instruction count, and remembers which file each imported table came from. */
#ifndef DSG_SANDBOX_H
#define DSG_SANDBOX_H

#include <lua.h>
#include <stddef.h>

#include "diag.h"

/* Limits while a spec runs. A spec is a page of data; these are orders of magnitude above any real
 * one, and low enough that a runaway loop or allocation fails in well under a second (the time
 * limit catches what the instruction count cannot: single instructions that do much work). */
#define DSG_SPEC_MEMORY_LIMIT ((size_t)16 << 20) /* Lua's memory plus the text of every file read */
#ifndef DSG_SPEC_INSTRUCTION_LIMIT                /* the fuzzer (tests/fuzz/) lowers these two */
#define DSG_SPEC_INSTRUCTION_LIMIT 50000000L
#endif
#ifndef DSG_SPEC_TIME_LIMIT
#define DSG_SPEC_TIME_LIMIT 10                    /* seconds (wall clock), spec and imports together */
#endif
#define DSG_SPEC_FILE_LIMIT ((size_t)1 << 20)
#define DSG_SPEC_STRING_LIMIT ((size_t)1 << 20)
#define DSG_SPEC_IMPORT_DEPTH 8
#define DSG_SPEC_IMPORT_LIMIT 256                 /* import() calls per spec */
#define DSG_SPEC_TABLE_DEPTH 32                   /* levels of an imported table, itself included */

typedef struct dsg_sandbox dsg_sandbox;

typedef struct dsg_source {
    char *path;    /* as the spec named it, relative to the working directory */
    char *text;
    size_t len;
} dsg_source;

/* A Lua allocator's body (lua_Alloc) that counts the bytes it holds in *used and refuses to grow
 * past limit: the sandbox's, and the generator's own state's while it indexes a spec's lines. */
void *dsg_counted_realloc(size_t *used, size_t limit, void *ptr, size_t osize, size_t nsize);

dsg_sandbox *dsg_sandbox_new(void);
/* The clock of the spec's time limit: CLOCK_MONOTONIC seconds, read without a system call. */
double dsg_clock_now(void);
/* When the last dsg_sandbox_run started (dsg_clock_now): the spec's time limit counts from there,
 * also for the generator's work on its text (dsg_trusted_linemap). */
double dsg_sandbox_started(const dsg_sandbox *sb);
void dsg_sandbox_free(dsg_sandbox *sb);
lua_State *dsg_sandbox_state(dsg_sandbox *sb);

/* Runs the spec at path. On success returns 0 and leaves the spec's result on the stack top;
 * on failure reports one error and returns -1. */
int dsg_sandbox_run(dsg_sandbox *sb, const char *path, dsg_diag *d);

/* The last line of spec code executed (the return statement, after a successful run); 0 if none. */
int dsg_sandbox_last_line(const dsg_sandbox *sb);

/* The files the last run read (the spec first, then its imports in order). */
size_t dsg_sandbox_nsources(const dsg_sandbox *sb);
const dsg_source *dsg_sandbox_source(const dsg_sandbox *sb, size_t i);

/* Whether the value at idx is the sandbox's environment (_ENV): never a spec table. */
int dsg_sandbox_is_env(dsg_sandbox *sb, int idx);

/* The file an imported table at stack index idx came from, or NULL if it was not imported. */
const char *dsg_sandbox_origin(dsg_sandbox *sb, int idx);

/* Reads a whole regular file (at most limit bytes) into a NUL-terminated buffer; NULL and errno on
 * failure: EFBIG when larger than limit, EINVAL when not a regular file (a FIFO, a device, a folder:
 * they are never opened in a way that could block). */
char *dsg_read_file(const char *path, size_t limit, size_t *len);

/* Why dsg_read_file failed, for messages. */
const char *dsg_read_strerror(int err, size_t limit);

#endif
