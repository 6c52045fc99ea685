/* libFuzzer target for the spec loader and validator: each input is a spec file, run in the
 * sandbox, line-mapped, validated and, when valid, derived, as dsagen does before it renders.
 * Built with clang against ASan+UBSan by `ninja fuzz`; run by tests/fuzz/run.sh. The spec is
 * written to $DSAGEN_FUZZ_DIR/spec-PID.lua (one file per process: runs may overlap), so imports
 * resolve there (the run script puts tests/gen/import/models/ in it). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag.h"
#include "sandbox.h"
#include "spec.h"
#include "trusted.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static dsg_trusted *trusted;
static char spec_path[4096];

static void remove_spec(void)
{
    unlink(spec_path);
}

static void setup(void)
{
    const char *dir = getenv("DSAGEN_FUZZ_DIR");
    if (!dir) {
        fprintf(stderr, "fuzz_spec: set DSAGEN_FUZZ_DIR to a folder for the spec (tests/fuzz/run.sh does)\n");
        exit(2);
    }
    snprintf(spec_path, sizeof spec_path, "%s/spec-%ld.lua", dir, (long)getpid());
    atexit(remove_spec);
    dsg_diag d = {0};
    trusted = dsg_trusted_new(&d); /* kept for the whole run, as dsagen keeps it for all specs */
    if (!trusted)
        exit(2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!trusted)
        setup();
    FILE *f = fopen(spec_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "fuzz_spec: cannot write %s: %s\n", spec_path, strerror(errno));
        abort();
    }
    dsg_diag d = {0};
    dsg_sandbox *sb = dsg_sandbox_new();
    if (!sb)
        abort();
    static dsg_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.path = spec_path;
    int ok = dsg_sandbox_run(sb, spec_path, &d) == 0;
    for (size_t i = 0; ok && i < dsg_sandbox_nsources(sb); i++) {
        const dsg_source *s = dsg_sandbox_source(sb, i);
        ok = dsg_trusted_linemap(trusted, s->path, s->text, s->len, dsg_sandbox_started(sb), &d) == 0;
    }
    if (ok && dsg_spec_validate(&spec, sb, trusted, &d) == 0) {
        if (d.errors)
            abort(); /* valid, yet an error was reported */
        for (int i = 0; i < spec.nconfigs; i++) {
            dsg_derived dv;
            dsg_derive(&spec.g, &spec.configs[i], &dv);
            if (dv.cache_bytes_per_token <= 0 || dv.heads_gathered <= 0 || spec.configs[i].name[0] == '\0')
                abort(); /* validation let through what derivation cannot use */
        }
    } else if (!d.errors) {
        abort(); /* rejected without a message */
    }
    dsg_sandbox_free(sb);
    return 0;
}
