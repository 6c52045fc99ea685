/* Compiler-style diagnostics of the generator. */
#include "diag.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

void dsg_verror(dsg_diag *d, const char *file, int line, const char *fmt, va_list ap)
{
    d->errors++;
    if (d->errors > DSG_MAX_ERRORS)
        return;
    if (file && line > 0)
        fprintf(stderr, "%s:%d: error: ", file, line);
    else if (file)
        fprintf(stderr, "%s: error: ", file);
    else
        fputs("dsagen: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    if (d->errors == DSG_MAX_ERRORS)
        fputs("dsagen: too many errors, stopping\n", stderr);
}

void dsg_error(dsg_diag *d, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dsg_verror(d, file, line, fmt, ap);
    va_end(ap);
}

void dsg_error_formatted(dsg_diag *d, const char *msg)
{
    d->errors++;
    if (d->errors <= DSG_MAX_ERRORS)
        fprintf(stderr, "%s\n", msg);
}

int dsg_too_many(const dsg_diag *d)
{
    return d->errors >= DSG_MAX_ERRORS;
}

/* Lua positions its messages as "chunkname:line: text"; the chunk name is the file path. Find the
 * first ":<digits>: " and split there, so the file part may itself contain ':' or digits. */
void dsg_error_lua(dsg_diag *d, const char *fallback_file, const char *msg)
{
    for (const char *p = strchr(msg, ':'); p; p = strchr(p + 1, ':')) {
        const char *q = p + 1;
        if (!isdigit((unsigned char)*q))
            continue;
        int line = 0;
        while (isdigit((unsigned char)*q) && line < 100000000)
            line = line * 10 + (*q++ - '0');
        if (q[0] != ':' || q[1] != ' ')
            continue;
        char file[1024];
        size_t n = (size_t)(p - msg);
        if (n >= sizeof file)
            break;
        memcpy(file, msg, n);
        file[n] = '\0';
        dsg_error(d, file, line, "%s", q + 2);
        return;
    }
    dsg_error(d, fallback_file, 0, "%s", msg);
}
