/* A configuration's constants read from its generated config.h text (`#define NAME value`), for
 * tests that need values the public API does not report (rope, indexer style) or that run without
 * libdsa (the CPU reference tests read out/<config>/config.h). Header-only. */
#ifndef DSA_TEST_CONFIG_TEXT_H
#define DSA_TEST_CONFIG_TEXT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of `#define MACRO value` in config_h; 0, or -1 when absent or not a number. */
static inline int config_define(const char *config_h, const char *macro, double *v)
{
    size_t n = strlen(macro);
    for (const char *p = config_h ? strstr(config_h, "#define ") : NULL; p; p = strstr(p + 1, "#define ")) {
        const char *m = p + 8;
        if (strncmp(m, macro, n) == 0 && m[n] == ' ') {
            char *end;
            *v = strtod(m + n + 1, &end);
            return end == m + n + 1 ? -1 : 0;
        }
    }
    return -1;
}

/* out/<config>/config.h as a malloc'd string, or NULL. */
static inline char *config_text(const char *config)
{
    char path[512];
    snprintf(path, sizeof path, "out/%s/config.h", config);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *t = malloc(1 << 16);
    size_t n = t ? fread(t, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (t)
        t[n] = '\0';
    return t;
}

#endif
