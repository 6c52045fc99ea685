/* Compiler-style diagnostics of the generator. */
#include "diag.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] > 0x8f))
        return 0; /* overlong, a surrogate, or beyond U+10FFFF */
    return len;
}

/* The code point of the valid UTF-8 sequence s of u bytes. */
static unsigned code_point(const unsigned char *s, size_t u)
{
    unsigned cp = u == 2 ? s[0] & 0x1fu : u == 3 ? s[0] & 0x0fu : s[0] & 0x07u;
    for (size_t k = 1; k < u; k++)
        cp = cp << 6 | (s[k] & 0x3fu);
    return cp;
}

/* Invisible characters that change how a terminal or a log viewer lays the line out: bidirectional
 * overrides and isolates, zero-width characters, line and paragraph separators, the BOM. Printed
 * raw, `\u202e` makes the rest of a message read backwards. */
static int format_char(unsigned cp)
{
    return cp == 0x061c || cp == 0x180e || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
           (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff;
}

void dsg_fputs_escaped(const char *str, size_t n, FILE *f)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t u = c >= 0x80 ? utf8_len(s + i, n - i) : 0;
        if (c >= 0x20 && c < 0x7f) {
            fputc(c, f);
            i++;
        } else if (u && !(c == 0xc2 && s[i + 1] < 0xa0) && !format_char(code_point(s + i, u))) {
            fwrite(s + i, 1, u, f); /* printable UTF-8: not a C1 control nor a format character */
            i += u;
        } else if (u) { /* a C1 control or a format character: its code point */
            fprintf(f, "\\u%04x", code_point(s + i, u));
            i += u;
        } else {
            if (c == '\n')
                fputs("\\n", f);
            else if (c == '\t')
                fputs("\\t", f);
            else if (c == '\r')
                fputs("\\r", f);
            else
                fprintf(f, "\\x%02x", c);
            i++;
        }
    }
}

static void put_escaped(const char *s)
{
    dsg_fputs_escaped(s, strlen(s), stderr);
}

void dsg_verror(dsg_diag *d, const char *file, int line, const char *fmt, va_list ap)
{
    d->errors++;
    if (d->errors > DSG_MAX_ERRORS)
        return;
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    /* Messages quote spec text (names, values, a spec's own error message) and paths: anything that
     * is not printable is escaped, so a spec cannot forge a "file:line: error:" line or send
     * terminal escapes. */
    if (file) {
        put_escaped(file);
        if (line > 0)
            fprintf(stderr, ":%d", line);
        fputs(": error: ", stderr);
    } else {
        fputs("dsagen: error: ", stderr);
    }
    put_escaped(msg ? msg : "out of memory");
    fputc('\n', stderr);
    free(msg);
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
    if (d->errors <= DSG_MAX_ERRORS) {
        put_escaped(msg);
        fputc('\n', stderr);
    }
}

int dsg_too_many(const dsg_diag *d)
{
    return d->errors >= DSG_MAX_ERRORS;
}
