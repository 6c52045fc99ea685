/* The generator's own Lua state (not the sandbox): spec line maps and template rendering, both
 * through Penlight (pl.lexer, pl.template). */
#ifndef DSG_TRUSTED_H
#define DSG_TRUSTED_H

#include <lua.h>
#include <stddef.h>

#include "diag.h"

typedef struct dsg_trusted dsg_trusted;

dsg_trusted *dsg_trusted_new(dsg_diag *d);
void dsg_trusted_free(dsg_trusted *t);
lua_State *dsg_trusted_state(dsg_trusted *t);

/* Indexes the field lines of a spec file's text (a file already indexed is skipped), within the
 * spec's time (DSG_SPEC_TIME_LIMIT from started, CLOCK_MONOTONIC seconds: dsg_sandbox_started) and
 * a memory cap; reports an error and returns -1 where it cannot. */
int dsg_trusted_linemap(dsg_trusted *t, const char *file, const char *text, size_t len, double started,
                        dsg_diag *d);

/* The line of the field at a dotted path ("configs.2.tp") in file, or of its nearest enclosing
 * table; 0 when unknown. */
int dsg_trusted_line(dsg_trusted *t, const char *file, const char *path);

/* Renders template text src named name with the table on the stack top as its values (popped).
 * Returns a malloc'd string, or NULL after reporting the error. */
char *dsg_trusted_render(dsg_trusted *t, const char *name, const char *src, size_t len, dsg_diag *d);

#endif
