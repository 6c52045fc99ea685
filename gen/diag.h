/* Compiler-style diagnostics of the generator: "file:line: error: message" on stderr, counted. */
#ifndef DSG_DIAG_H
#define DSG_DIAG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* The generator reports up to this many errors, then stops (as compilers do). */
#define DSG_MAX_ERRORS 8

typedef struct dsg_diag {
    int errors;
} dsg_diag;

/* file may be NULL (a message about the command line); line <= 0 omits the line. */
void dsg_error(dsg_diag *d, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void dsg_verror(dsg_diag *d, const char *file, int line, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* True once DSG_MAX_ERRORS were reported: the caller stops early. */
int dsg_too_many(const dsg_diag *d);

/* Writes n bytes of s with everything that is not printable escaped (\n, \t, \r, \xNN for other
 * bytes; valid UTF-8 is printable but for C1 controls and the format characters that change a
 * line's layout, bidirectional overrides among them, written \uNNNN). */
void dsg_fputs_escaped(const char *s, size_t n, FILE *f);

/* Reports a message already in "file:line: error: text" form. */
void dsg_error_formatted(dsg_diag *d, const char *msg);

#endif
